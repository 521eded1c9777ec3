"""The flags of d-eggs' coordinator (`--mode coordinator`, over MPI or TCP), shared by the run configs
that may run under it: put among the bases of a run config whose `check` calls `check_coordinator`
once the strategy's own checks passed."""

from dataclasses import dataclass

from eggnog.runtime.errors import BadInput
from eggnog.training.run.config import flag


@dataclass(frozen=True)
class CoordinatorFields:
    population_chunk: int = flag(64, "Coordinator: members per chunk of work (d-eggs' CHUNK_SIZE).")
    straggler_timeout: float = flag(90.0, "Coordinator: seconds before a chunk not returned goes to another "
                                          "worker.", changeable=True)
    history: int = flag(1000, "Coordinator: steps of packed fitness kept for workers that fall behind.",
                        changeable=True)
    straggler_factor: float = flag(2.0, "Coordinator: when no chunk is free, hand out again the oldest one in "
                                        "progress once it took this many times the median chunk time (0: only "
                                        "--straggler-timeout, as d-eggs).", changeable=True)
    transport: str = flag("mpi", "Coordinator: mpi (rank 0 coordinates the other ranks) or tcp (this process "
                                 "coordinates; workers join with bin/es_worker.py --connect HOST:PORT).",
                          changeable=True)
    listen: str = flag("0.0.0.0:12345", "Coordinator over TCP: HOST:PORT to listen on.", changeable=True,
                       metavar="<host:port>")
    token_file: str | None = flag(None, "Coordinator over TCP: file holding the shared token.", changeable=True,
                                  metavar="<path>", default_text="$EGGNOG_TOKEN")
    heartbeat_timeout: float = flag(60.0, "Coordinator over TCP: seconds without a message after which a worker "
                                          "is lost and its chunks go to others.", changeable=True)
    chunk_mean_filter: bool = flag(False, "Coordinator: add sign(m)|m|^1.2 of the chunk's mean pair "
                                          "difference m to each difference (d-eggs).")
    adaptive_threshold: bool = flag(False, "Coordinator: zero fitness where |difference| < 0.1 x the chunk's "
                                           "mean |difference| (d-eggs).")

    def check_coordinator(self, ranks):
        """What must hold under `--mode coordinator` on `ranks` ranks."""
        self.check_coordinator_transport(ranks)
        if not self.fast_fitness:
            raise BadInput("--mode coordinator exchanges ternary fitness: it needs --fast-fitness")
        chunk = self.population_chunk
        if chunk < 2 or chunk % 2 or self.population % chunk:
            raise BadInput(f"--population-chunk {chunk} must be even and divide the population {self.population}")
        for name in ("straggler_timeout", "heartbeat_timeout"):
            if getattr(self, name) <= 0:
                raise BadInput(f"--{name.replace('_', '-')} must be positive, got {getattr(self, name)}")
        if self.straggler_factor < 0:
            raise BadInput(f"--straggler-factor must be 0 (off) or positive, got {self.straggler_factor}")
        if self.history < self.checkpoint_every:
            raise BadInput(f"--history {self.history} must be at least --checkpoint-every {self.checkpoint_every}, "
                           "so a worker past the history finds a checkpoint inside it")

    def check_coordinator_transport(self, ranks):
        if self.transport == "mpi":
            if ranks < 2:
                raise BadInput("--mode coordinator needs at least 2 ranks (rank 0 coordinates, the others work), or "
                               "--transport tcp")
            return
        if self.transport != "tcp":
            raise BadInput(f"unknown --transport {self.transport!r}: choose mpi or tcp")
        if ranks != 1:
            raise BadInput(f"--transport tcp runs the coordinator as one process, not {ranks} ranks: start it "
                           "without mpiexec or srun, and its workers with bin/es_worker.py --connect HOST:PORT")
        host, _, port = self.listen.rpartition(":")
        if not host or not port.isdigit() or not 0 < int(port) < 65536:
            raise BadInput(f"--listen {self.listen!r} is not HOST:PORT")
