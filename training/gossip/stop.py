"""SIGINT and SIGTERM in a gossip run: every island stops after the same round, saves and exits with the
signal's status (130, 143), whichever rank got the signal.

Islands walk the rounds at their own pace, so none may stop at the first boundary it sees: a partner
in a later round would wait for it for ever. A signalled rank sends STOP to every other rank; a rank
joins the agreement when it is signalled or hears STOP (at a round boundary, or while it waits for a
partner or for the population), by posting, in a non-blocking allgather, how many rounds it has
started. All then walk on to the furthest of those rounds, so every tournament under way completes,
and stop there. A rank that reaches the end of the run joins unasked, so the allgather always
completes. The agreement has a communicator of its own: it is posted at different moments on
different ranks, which the population's collectives on the run's communicator must not see.
"""

import numpy as np

TAG_STOP = 104


class StopAgreement:
    """`comm`: this agreement's own communicator (None: a world of one); `signals`: a StopSignals."""

    def __init__(self, comm, rank, size, signals, started):
        self.comm, self.rank, self.size, self.signals = comm, rank, size, signals
        self.started = started  # rounds this rank has started
        self.request = self.table = None
        self.sends, self.heard, self.note = [], 0, None

    def poll(self):
        """Join once a stop is known here; cheap, called at every boundary and in every wait."""
        if self.comm is None or self.request is not None:
            return
        from mpi4py import MPI

        signum = self.signals.signum
        if signum:
            self.note = np.array([signum], np.int64)
            self.sends = [self.comm.Isend(self.note, dest=r, tag=TAG_STOP) for r in range(self.size) if r != self.rank]
        elif self.comm.Iprobe(source=MPI.ANY_SOURCE, tag=TAG_STOP):
            signum = self._receive_note()
        else:
            return
        self._join(signum)

    def _receive_note(self):
        note = np.empty(1, np.int64)
        self.comm.Recv(note, tag=TAG_STOP)
        self.heard += 1
        return int(note[0])

    def _join(self, signum):
        mine = np.array([self.started, signum, 1 if self.sends else 0], np.int64)
        self.table = np.empty((self.size, 3), np.int64)
        self.request = self.comm.Iallgather(mine, self.table)

    def _agreed(self):
        from eggnog.training.gossip.mpi import wait_quietly

        wait_quietly([self.request])
        return int(self.table[:, 0].max()), int(self.table[:, 1].max())

    def stop_round(self):
        """At a round boundary: the round every rank stops at, once a stop is agreed (None: go on)."""
        if self.comm is None:
            return self.started if self.signals.signum else None
        self.poll()
        return None if self.request is None else self._agreed()[0]

    def settle(self):
        """At the end of the run (collective): the signal the run stopped for, 0 if none; STOP messages
        still on their way are taken in."""
        if self.comm is None:
            return self.signals.signum
        if self.request is None:
            self._join(0)
        _, signum = self._agreed()
        others = int(self.table[:, 2].sum()) - (1 if self.sends else 0)  # ranks that sent this rank STOP
        for _ in range(others - self.heard):
            self._receive_note()
        from mpi4py import MPI

        MPI.Request.Waitall(self.sends)
        return signum
