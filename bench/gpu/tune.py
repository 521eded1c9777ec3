"""Tuner: times every launch variant of every tunable kernel on this GPU and keeps the fastest per problem.

    python -m bench.gpu.tune [--only scan_forward,matmul_tf32] [--quick]

A tunable kernel's module declares TUNABLES (kernels/core/tuning.py's Tunable): its variants, the static
model's default, and problem sizes of the main jobs. For each problem every variant is launched once
(compiling it), then timed with CUDA events over a few calls; `tuning.fastest` picks (the default unless
another is faster by more than the noise margin) and `tuning.record` keeps the choice in tuning.json beside
the compile cache, which later launches on this GPU read. `--quick` tunes the first problem of each kernel
with fewer repeats. The table goes to bench/results/tune-<device>-<date>.json. `--dry-run` runs the same
steps on the simulator at the kernels' small sizes (wall-clock timings, meaningless as speeds) into a
tuning file of its own choosing, for tests.
"""

import statistics
import time

import typer

from bench.report import print_table, write_result
from eggnog.runtime.cli import cli_help, user_errors

app = typer.Typer(add_completion=False, pretty_exceptions_enable=False, rich_markup_mode=None)

REPEATS, QUICK_REPEATS = 5, 3


def tunables(only=None):
    """The Tunables of every kernel module ({kernel: Tunable}), those named in `only` when given."""
    from eggnog.kernels.core.registry import import_families
    from eggnog.kernels.core.tuning import TUNABLES
    from eggnog.runtime.errors import BadInput

    import_families()
    if not only:
        return dict(sorted(TUNABLES.items()))
    unknown = [name for name in only if name not in TUNABLES]
    if unknown:
        raise BadInput(f"--only names no tunable kernel {', '.join(unknown)}: "
                       f"choose among {', '.join(sorted(TUNABLES))}")
    return {name: TUNABLES[name] for name in only}


def event_timer(cuda):
    """Seconds of one launch() between two CUDA events on the launch stream."""

    def timed(launch):
        start, end = cuda.event(), cuda.event()
        start.record()
        launch()
        end.record()
        end.synchronize()
        return cuda.event_elapsed_time(start, end) / 1e3

    return timed


def wall_timer(launch):
    """Seconds of one launch() on the simulator (which runs it before returning)."""
    begin = time.perf_counter()
    launch()
    return time.perf_counter() - begin


def time_variants(tunable, sizes, timer, repeats):
    """{variant: [seconds, ...]}: each variant launched once untimed, then `repeats` timed launches."""
    timings = {}
    for variant in tunable.variants:
        launch = tunable.run(variant, sizes)
        launch()
        timings[variant] = [timer(launch) for _ in range(repeats)]
    return timings


def tune(chosen, device, timer, repeats, quick, small, path=None):
    """Time, choose and record every (kernel, problem); returns the table's rows."""
    from eggnog.kernels.core.tuning import fastest, problem_key, record

    rows = []
    for name, tunable in chosen.items():
        problems = [("small", sizes) for sizes in tunable.small] if small else list(tunable.problems)
        for job, sizes in problems[:1] if quick else problems:
            timings = time_variants(tunable, sizes, timer, repeats)
            best = fastest(timings, tunable.default)
            record(name, device, problem_key(*sizes), best, path=path)
            for variant, times in timings.items():
                rows.append({"kernel": name, "job": job, "problem": problem_key(*sizes), "variant": variant,
                             "median_ms": round(statistics.median(times) * 1e3, 4),
                             "default": variant == tunable.default, "chosen": variant == best})
    return rows


@app.command(help=cli_help(__doc__))
@user_errors
def main(only: str = typer.Option("", help="Comma-separated kernel names (default: every tunable kernel)."),
         quick: bool = typer.Option(False, help="The first problem of each kernel, fewer repeats."),
         dry_run: bool = typer.Option(False, help="Run on the simulator at small sizes (tests)."),
         tuning_file: str = typer.Option("", help="Where to record choices (default: beside the compile cache).")):
    from eggnog.kernels.core.cuda_api import SIMULATED, cuda
    from eggnog.kernels.core.tuning import device_name, tuning_path
    from eggnog.runtime.errors import BadInput

    if dry_run and not SIMULATED:
        raise BadInput("--dry-run runs on the CUDA simulator only: set NUMBA_ENABLE_CUDASIM=1")
    if not dry_run and (SIMULATED or not cuda.is_available()):
        raise BadInput("the tuner times kernels on a real GPU and none is usable here "
                       "(the simulator and the CPU cannot tune; --dry-run checks the steps on the simulator)")
    chosen = tunables([name for name in only.split(",") if name.strip()] if only else None)
    device = device_name()
    path = tuning_file or tuning_path()
    repeats = QUICK_REPEATS if quick or dry_run else REPEATS
    timer = wall_timer if dry_run else event_timer(cuda)
    rows = tune(chosen, device, timer, 1 if dry_run else repeats, quick, dry_run, path)
    print_table(rows, ["kernel", "job", "problem", "variant", "median_ms", "default", "chosen"])
    print(f"recorded in {path}")
    print(f"wrote {write_result('tune', device, rows, {'tuning_file': path})}")


if __name__ == "__main__":
    app()
