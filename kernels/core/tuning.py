"""Launch shapes chosen per GPU: a kernel whose best shape depends on the device offers named variants
(each bit-exact with the others, or within its op's tolerance), its default the static model's best, and
asks `variant_for(kernel, device, problem, variants, default)` at launch. `python -m bench.gpu.tune` times the
variants on a real GPU and keeps the fastest per (device name, kernel, problem size) in `tuning.json`
beside the compile cache (core/compile_cache.py), which later launches read; a source edit starts a new
compile-cache folder, and so a new tuning file. EGGNOG_TUNING=0 uses every default (reproducing a run
whatever was tuned). The choice from timings is `fastest`, kept apart so tests inject timings."""

import json
import os
import statistics
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from eggnog.kernels.core.compile_cache import compile_cache_folder
from eggnog.runtime.errors import BadInput

FILE = "tuning.json"
ENV = "EGGNOG_TUNING"
_cache: dict[str, dict[str, Any]] = {}  # path -> the file's contents, read once a process (record() refreshes it)


def tuning_path(folder: str | None = None) -> str:
    return os.path.join(folder or compile_cache_folder(), FILE)


def problem_key(*sizes: int) -> str:
    """The problem-size part of a tuning entry: sizes joined by 'x' (`problem_key(4, 256)` is '4x256')."""
    return "x".join(str(int(s)) for s in sizes)


def _read(path: str) -> dict[str, Any]:
    if path not in _cache:
        try:
            with open(path) as f:
                table = json.load(f)
        except FileNotFoundError:
            table = {}
        except (OSError, ValueError):  # a damaged file is ignored (defaults), never trusted
            table = {}
        _cache[path] = table if isinstance(table, dict) else {}
    return _cache[path]


def variant_for(kernel: str, device: str, problem: str, variants: tuple[str, ...], default: str,
                path: str | None = None, environ: Mapping[str, str] = os.environ) -> str:
    """The variant of `kernel` to launch on `device` for `problem`: the tuned one if the tuning file
    names one of `variants`, else `default` (also when EGGNOG_TUNING=0)."""
    if environ.get(ENV, "1").strip() == "0":
        return default
    chosen = _read(path or tuning_path()).get(device, {}).get(kernel, {}).get(problem)
    return chosen if chosen in variants else default


def fastest(timings: dict[str, list[float]], default: str, margin: float = 0.03) -> str:
    """The variant with the smallest median time ({variant: [seconds, ...]}); the default unless another is
    faster by more than `margin` (timing noise must not move a choice)."""
    if not timings or any(not times for times in timings.values()):
        raise BadInput("every variant needs at least one timing")
    medians = {name: statistics.median(times) for name, times in timings.items()}
    best = min(medians, key=lambda name: medians[name])
    if default in medians and medians[best] >= medians[default] * (1 - margin):
        return default
    return best


def record(kernel: str, device: str, problem: str, variant: str, path: str | None = None) -> None:
    """Keep `variant` as the choice of (device, kernel, problem), written atomically."""
    path = path or tuning_path()
    table = json.loads(json.dumps(_read(path)))  # a copy: the cached table changes only once written
    table.setdefault(device, {}).setdefault(kernel, {})[problem] = variant
    os.makedirs(os.path.dirname(path), exist_ok=True)
    temporary = f"{path}.{os.getpid()}.tmp"
    with open(temporary, "w") as f:
        json.dump(table, f, indent=1, sort_keys=True)
        f.flush()
        os.fsync(f.fileno())
    os.replace(temporary, path)
    _cache[path] = table


def device_name() -> str:
    """The name the tuning file keys the current GPU by ('CUDA simulator' on the simulator)."""
    from eggnog.kernels.core.cuda_api import SIMULATED, cuda

    if SIMULATED:
        return "CUDA simulator"
    name = cuda.get_current_device().name
    return name.decode() if isinstance(name, bytes) else str(name)


TUNABLES: dict[str, "Tunable"] = {}  # kernel name -> its Tunable, filled as kernel modules are imported


@dataclass(frozen=True)
class Tunable:
    """What `python -m bench.gpu.tune` reads from a kernel module (its module-level TUNABLES, a tuple of these).

    kernel: the name in the tuning file. variants: the launch shapes' names; default: the static model's
    best of them. problems: (job, sizes) pairs of the main jobs to tune for on a GPU, the first the one
    `--quick` keeps. small: sizes small enough for the simulator (tests, the tuner's dry run). run(variant,
    sizes): prepares inputs on the device and returns `launch()`, which enqueues one call of that variant
    (no host wait: the tuner brackets it with CUDA events). The launcher asks `choose(sizes)` which to run."""

    kernel: str
    variants: tuple[str, ...]
    default: str
    problems: tuple[tuple[str, tuple[int, ...]], ...]
    run: Callable[[str, tuple[int, ...]], Callable[[], object]]
    small: tuple[tuple[int, ...], ...] = ()

    def __post_init__(self) -> None:
        if self.default not in self.variants:
            raise ValueError(f"{self.kernel}: default {self.default!r} is not one of its variants")
        if TUNABLES.get(self.kernel, self) is not self:
            raise ValueError(f"{self.kernel}: a second Tunable of that name")
        TUNABLES[self.kernel] = self

    def problem(self, sizes: tuple[int, ...]) -> str:
        return problem_key(*sizes)

    def choose(self, sizes: tuple[int, ...], device: str | None = None, path: str | None = None) -> str:
        """The variant to launch for `sizes` on `device` (the current GPU's name when None)."""
        return variant_for(self.kernel, device or device_name(), problem_key(*sizes), self.variants,
                           self.default, path=path)
