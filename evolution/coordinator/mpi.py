"""The coordinator's messages over MPI: rank 0 coordinates, every other rank is a worker for the
whole job (MPI ends the job when a rank dies, so no worker is ever lost or new)."""

from eggnog.evolution.coordinator import wire


class MpiCoordinatorLink:
    elastic = False

    def __init__(self, world):
        self.comm, self.workers, self.stopped = world.comm, world.size - 1, set()

    def receive(self, timeout):
        """(message, rank) of the next worker message, or None after `timeout` seconds."""
        return wire.receive(self.comm, None, wire.UP, timeout)

    def send(self, rank, message):
        wire.send(self.comm, message, rank, wire.DOWN)

    def lost(self):
        return []

    def refuse(self, rank, reason):
        raise RuntimeError(f"rank {rank} sent a malformed message: {reason}")

    def closing(self, status):
        pass

    def stopped_worker(self, rank):
        self.stopped.add(rank)

    def waiting(self):
        """True while a worker has not been told to stop."""
        return len(self.stopped) < self.workers

    def close(self):
        pass


class MpiWorkerLink:
    elastic = False

    def __init__(self, world):
        self.comm, self.name = world.comm, world.rank

    def request(self, message):
        """Send `message` to rank 0 and return its answer."""
        wire.send(self.comm, message, 0, wire.UP)
        return wire.receive(self.comm, 0, wire.DOWN)[0]

    def send(self, message):
        wire.send(self.comm, message, 0, wire.UP)
