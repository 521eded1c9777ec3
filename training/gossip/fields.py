"""The gossip flags of gruboros (tournaments, checkpoints, rejuvenation), shared by the gossip run
configs of every island trainer (in training/mingru/island.py, evolution/egg_island.py and
zorn/rge/island.py): put before a trainer's run config among the bases. Flags that only decide what
is logged, kept or summarised may change on resume."""

import os
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from eggnog.runtime.errors import BadInput
from eggnog.runtime.world import launcher_rank
from eggnog.training.gossip.messages import MAX_ISLANDS
from eggnog.training.run.config import flag, option_name

if TYPE_CHECKING:
    from eggnog.runtime.world import World

MERGES = ("clonal", "recombination", "mixed")
TRANSPORTS = ("mpi", "tcp")
OPTIMIZER_MERGES = ("interpolate", "reset")


def _in_unit_interval(cfg: "GossipFields", name: str, upper_open: bool = False) -> None:
    value = getattr(cfg, name)
    if not (0 <= value < 1 if upper_open else 0 <= value <= 1):
        raise BadInput(f"{option_name(name)} must lie in [0, 1{')' if upper_open else ']'}, got {value}")


@dataclass(frozen=True)
class GossipFields:
    """The gossip flags, put before a trainer's run config (GossipFields first among the bases, so that
    its checkpoint_every, check and summarize win)."""

    if TYPE_CHECKING:
        max_minutes: float = 0.0  # RunSchedule's, a base of the config this is put before

    run_name = "gossip"

    checkpoint_every: int = flag(100, "Mean steps between checkpoints of the least fit island; fitter islands save "
                                      "more often (--elite-checkpoint-multiplier); every island saves at the end.",
                                 changeable=True)
    gossip_mixing_rate: float = flag(0.01, "Probability that a rank takes part in a tournament at a step boundary.")
    gossip_merge: str = flag("recombination", "How a loser takes the winner's model: clonal, recombination, or "
                                              "mixed (recombination with --gossip-recombination-prob, else clonal).")
    gossip_recombination_prob: float = flag(0.5, "Probability of recombination in a mixed tournament.")
    gossip_recombination_alpha: float = flag(0.5, "Recombination weight of the winner: p <- (1-a) p + a p_winner.")
    gossip_optimizer_merge: str = flag("interpolate", "The optimiser state in a recombination: interpolate (all of "
                                                      "it, Schedule-Free's z included) or reset.")
    gossip_fitness_decay: float = flag(0.995, "Decay of the training-loss average whose negative is the fitness.")
    elites: int = flag(10, "Elite checkpoints kept (lowest average training loss over all islands).",
                       changeable=True)
    keep_checkpoints: int = flag(3, "Newest checkpoints kept per island.", aliases=("keep_last",), changeable=True)
    archive_rate: float = flag(0.0, "Probability that a checkpoint due for removal is archived for good instead.",
                               changeable=True)
    elite_checkpoint_multiplier: float = flag(4.0, "Save rate of the fittest island over the least fit one.",
                                              changeable=True)
    rejuvenation_rate: float = flag(0.0, "Probability per step that an island ranked at or beyond "
                                         "--rejuvenation-threshold blends half-way with a better elite checkpoint "
                                         "and restarts its optimiser.")
    rejuvenation_threshold: float = flag(0.75, "Rank percentile (0 fittest, 1 least fit) from which an island may be "
                                               "rejuvenated.")
    population_every: int = flag(10, "Steps between population summaries (fitness ranking, metrics.jsonl line, "
                                     "checkpoint links and removal).", changeable=True)
    # peer to peer over TCP (training/gossip/tcp.py); every island may set these differently
    transport: str = flag("mpi", "mpi (islands are the ranks of one MPI job) or tcp (islands are plain processes "
                                 "that find each other by --peers or --rendezvous and survive each other's failures).",
                          changeable=True)
    island: int | None = flag(None, "TCP: this island's number (its rank-NN folder and data stream).",
                              default_text="the launcher's task number, $SLURM_PROCID", changeable=True)
    listen: str = flag("0.0.0.0:29500", "TCP: HOST:PORT this island listens on; the island with node-local id L "
                                        "listens on PORT + L (port 0: any free port, for --rendezvous).",
                       changeable=True)
    peers: str | None = flag(None, "TCP: slurm (every host of SLURM_JOB_NODELIST, ports by the --listen rule) or "
                                   "HOST:PORT,... .", default_text="slurm under SLURM without --rendezvous",
                             changeable=True)
    rendezvous: str | None = flag(None, "TCP: a folder on a shared filesystem where every island writes its address "
                                        "and reads the others'.", default_text="none", changeable=True)
    token_file: str | None = flag(None, "TCP: file holding the token every island shares.",
                                  default_text="$EGGNOG_TOKEN", changeable=True)
    peer_timeout: float = flag(30.0, "TCP: seconds an exchange may wait for a peer's answer; a peer that does not "
                                     "answer in time is dropped, and retried after as long again.", changeable=True)
    catch_up_steps: int = flag(1000, "TCP: an island this many steps behind the furthest island loads that "
                                     "island's newest checkpoint (0: never).", changeable=True)

    def host_memory(self, ranks: int) -> dict[str, int]:
        return super().host_memory(1)  # type: ignore[misc]  # an island holds its whole population or batch

    def check(self, ranks: int = 1) -> None:
        # every island trains alone, on its whole batch or population; --transport is gossip's here
        super(GossipFields, replace(self, transport="mpi")).check(1)  # type: ignore[misc]
        self.check_transport(ranks)
        if self.max_minutes:
            raise BadInput("--max-minutes is not for gossip runs: their islands run to --steps; stop one with "
                           "SIGTERM, which saves it")
        if self.gossip_merge not in MERGES:
            raise BadInput(f"unknown --gossip-merge {self.gossip_merge!r}: choose {', '.join(MERGES)}")
        if self.gossip_optimizer_merge not in OPTIMIZER_MERGES:
            raise BadInput(f"unknown --gossip-optimizer-merge {self.gossip_optimizer_merge!r}: choose "
                           f"{' or '.join(OPTIMIZER_MERGES)}")
        for name in ("gossip_mixing_rate", "gossip_recombination_prob", "gossip_recombination_alpha",
                     "archive_rate", "rejuvenation_rate", "rejuvenation_threshold"):
            _in_unit_interval(self, name)
        _in_unit_interval(self, "gossip_fitness_decay", upper_open=True)
        for name in ("elites", "keep_checkpoints", "population_every"):
            if getattr(self, name) < 1:
                raise BadInput(f"{option_name(name)} must be positive, got {getattr(self, name)}")
        if not self.elite_checkpoint_multiplier >= 1:
            raise BadInput(f"--elite-checkpoint-multiplier must be at least 1, got {self.elite_checkpoint_multiplier}")

    def check_transport(self, ranks: int) -> None:
        if self.transport not in TRANSPORTS:
            raise BadInput(f"unknown --transport {self.transport!r}: choose mpi or tcp")
        if self.transport == "mpi":
            return
        if ranks != 1:
            raise BadInput(f"--transport tcp runs each island as a process of its own, not {ranks} MPI ranks: start "
                           "them with srun (no --mpi) or by hand")
        if not 0 <= self.island_number() < MAX_ISLANDS:
            raise BadInput(f"--island must lie in 0..{MAX_ISLANDS - 1}, got {self.island_number()}")
        host, _, port = self.listen.rpartition(":")
        if not host or not port.isdigit() or not 0 <= int(port) < 65536:
            raise BadInput(f"--listen {self.listen!r} is not HOST:PORT")
        if self.peers and self.rendezvous:
            raise BadInput("--peers and --rendezvous are two ways to find the islands: give one")
        if not self.peer_timeout > 0:
            raise BadInput(f"--peer-timeout must be positive, got {self.peer_timeout}")
        if self.catch_up_steps < 0:
            raise BadInput(f"--catch-up-steps must be 0 (never) or more, got {self.catch_up_steps}")

    def island_number(self, environ: Mapping[str, str] = os.environ) -> int:
        """--island, else the launcher's task number (SLURM_PROCID under srun); BadInput when neither."""
        if self.island is not None:
            return self.island
        number = launcher_rank(environ)
        if number is None:
            raise BadInput("--transport tcp needs --island N (each island its own number), or a launcher that numbers "
                           "its tasks (srun: SLURM_PROCID)")
        return number

    def layout(self, world: "World") -> str | None:
        if self.transport == "tcp":
            return f"gossip over TCP, island {self.island_number()}"
        return f"gossip, {world.size} island(s)"

    def tournaments_line(self) -> str:
        merge = self.gossip_merge + (f" (recombination with p {self.gossip_recombination_prob})"
                                     if self.gossip_merge == "mixed" else "")
        return (f"tournaments: rate {self.gossip_mixing_rate} per step, merge {merge}, alpha "
                f"{self.gossip_recombination_alpha}, optimizer {self.gossip_optimizer_merge}; elites {self.elites}, "
                f"keep-checkpoints {self.keep_checkpoints}, rejuvenation rate {self.rejuvenation_rate}")

    def summarize(self, summary: dict[str, Any]) -> str:
        first, last = summary["first"], summary["final"]
        line = f"done: {summary['steps']} steps per island in {summary['elapsed_s']:.0f} s"
        if first and last and first.get("mean_fitness") is not None:
            line += (f"; population fitness (minus bits/byte) mean {first['mean_fitness']:.3f} -> "
                     f"{last['mean_fitness']:.3f}, best {last['best_fitness']:.3f} (rank {last['best_rank']})")
        if last:
            line += (f"; {last['tournaments']} tournaments: {last['clonal']} clonal, {last['recombination']} "
                     f"recombination; {last['rejuvenations']} rejuvenations")
        return line
