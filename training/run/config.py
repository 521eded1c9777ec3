"""What a run config is: a frozen dataclass whose fields are the script's flags, each carrying its
help in `flag(...)` metadata (so the command line is generated from the code and its defaults), and
the few answers the launcher asks of it (run name, header lines, closing line)."""

from collections.abc import Sequence
from dataclasses import MISSING, field, fields
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from eggnog.corpus.deggs_tokens import TokenCorpus
    from eggnog.corpus.reader import ByteCorpus
    from eggnog.runtime.world import World


def option_name(name: str) -> str:
    """The flag of a field: `foo_bar` -> `--foo-bar`."""
    return "--" + name.replace("_", "-")


def flag(default: Any, help: str, *, aliases: Sequence[str] = (), per_rank: Sequence[str] | None = None,
         default_text: str | None = None, changeable: bool = False, off: str | None = None,
         metavar: str | None = None) -> Any:
    """A dataclass field that is also a command-line flag named after it (`foo_bar` -> `--foo-bar`).

    aliases: older names also accepted (`("n_embd",)` -> `--n-embd`).
    per_rank: (name, *aliases) of a companion flag giving the value per MPI rank; the launcher turns it
        into the total (value x ranks).
    default_text: what the default means when it is None (e.g. "tied to --lr").
    changeable: the field may differ when a run is resumed (step budget, logging, validation sample).
    off: the name of a boolean flag's negative form (default `no_<name>`).
    """
    meta = {"help": help, "aliases": tuple(aliases), "per_rank": tuple(per_rank or ()),
            "default_text": default_text, "changeable": changeable, "off": off, "metavar": metavar}
    return field(default=default, metadata=meta)


def described(base: type[Any], name: str, help: str, *, default: Any = MISSING, **meta: Any) -> Any:
    """Field `name` of a plain dataclass `base` (an algorithm's config, free of command-line concerns) as a
    flag of a run config that extends it: its default kept there unless given here, `help` and the
    other metadata of `flag` added here."""
    return flag(base.__dataclass_fields__[name].default if default is MISSING else default, help, **meta)


def redefault(base: type[Any], name: str, default: Any, help: str | None = None) -> Any:
    """Field `name` of dataclass `base` with another default (and `help`, where given) and otherwise the
    same flag metadata."""
    meta = base.__dataclass_fields__[name].metadata
    return field(default=default, metadata=meta if help is None else {**meta, "help": help})


SEED_LIMIT = 1 << 63  # seeds are stored as int64 and hashed as uint64


def check_values(cfg: Any) -> None:
    """What holds for every run config, whatever its fields mean: floats are finite (a NaN would run
    and be written into JSON), a seed lies in [0, 2^63)."""
    import math
    from dataclasses import fields

    from eggnog.runtime.errors import BadInput

    for f in fields(cfg):
        value = getattr(cfg, f.name)
        if isinstance(value, float) and not math.isfinite(value):
            raise BadInput(f"{option_name(f.name)} must be a finite number, got {value}")
        if f.name == "max_minutes" and value < 0:
            raise BadInput(f"--max-minutes must be 0 (no limit) or positive, got {value}")
        if f.name == "seed" and not 0 <= value < SEED_LIMIT:
            raise BadInput(f"--seed must lie in [0, 2^63), got {value}")


class RunConfig:
    """Mixed into every run config (after the dataclass bases): what the launcher asks besides the
    fields. Subclasses override what differs."""

    run_name = "run"  # a run directory defaults to runs/<run_name>-<time>
    divergence_hint = "lower --lr"  # what the stop on a diverged loss suggests
    validates = True  # prints the corpus's validation baselines in its header
    generates = True  # bin/generate.py reads its checkpoints

    @classmethod
    def fixed_on_resume(cls) -> tuple[str, ...]:
        """Fields a resumed run must keep."""
        return tuple(f.name for f in fields(cls) if not f.metadata.get("changeable"))  # type: ignore[arg-type]

    def resolved(self) -> "RunConfig":
        """The config with every derived field filled in (e.g. sizes solved from a budget)."""
        return self

    @property
    def uses_corpus(self) -> bool:
        return True

    def open_data(self, path: str) -> "ByteCorpus | TokenCorpus":
        """The corpus at --data `path`."""
        from eggnog.corpus.reader import open_corpus

        return open_corpus(path)

    def host_memory(self, ranks: int) -> dict[str, int]:
        """{what: bytes} of one rank's largest host arrays (training/memory_plan.py); {} where the
        trainer checks its own."""
        return {}

    def layout(self, world: "World") -> str | None:
        """How the run is spread over ranks, when that is a choice (printed in the header)."""
        return None

    def describe(self, trainer: Any) -> list[str]:
        """Header lines about the model and the method."""
        return []

    def summarize(self, summary: dict[str, Any]) -> str:
        """The closing line from the trainer's summary."""
        return "done"
