"""EGGROLL population evaluation: tokens/s of `IntEggroll.evaluate` with perturbations (noise
regenerated on the fly inside the kernels) against the same kernels without perturbation (plain
batched inference of the same model), per population.

    python bench/eggroll_throughput.py --depth 6 --dim 256 --populations 1024,8192,32768

Only `evaluate` is timed: the byte windows (on the host, uploaded by `evaluate` as in training) and
the hidden states (on the device) are made before the timed region, the log-likelihoods stay on the
device until one copy at the end of each call, and the device is synchronised before each clock
reading. ratio = perturbed tokens/s ÷ plain tokens/s, the measure
behind the EGGROLL paper's 91% (noise stored) and 69% (noise generated on the fly) of inference
throughput. Memory is that of one more perturbed evaluation, outside the timed runs
(training/memory.py says what each figure measures).
"""

import os
import sys

import numpy as np
import typer

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from bench.report import median_seconds, print_table, write_result  # noqa: E402
from eggnog.runtime.cli import user_errors  # noqa: E402

app = typer.Typer(add_completion=False, pretty_exceptions_enable=False, help=__doc__)


@app.command()
@user_errors
def main(depth: int = typer.Option(1, "--depth", "--n-layer", help="EGG blocks."),
         dim: int = typer.Option(64, "--dim", "--n-embd", help="EGG width."),
         populations: str = typer.Option("64,256,1024", help="Comma-separated population sizes."),
         tokens: int = typer.Option(16, help="Bytes each member reads per evaluation."), repeat: int = 3,
         backend: str = typer.Option(None, help="auto, cpu or cuda.")):
    from eggnog.evolution.eggroll import IntEggroll, IntEggrollConfig
    from eggnog.kernels.backend import select_backend
    from eggnog.models.egg import EggConfig, EggModel
    from eggnog.runtime.errors import BadInput
    from eggnog.training.memory import MemoryMeter

    try:
        sizes = [int(p) for p in populations.split(",")]
    except ValueError:
        raise BadInput(f"--populations {populations!r} is not a comma-separated list of integers") from None
    if repeat < 1 or tokens < 1:
        raise BadInput(f"--repeat and --tokens must be at least 1, not {repeat} and {tokens}")
    chosen = select_backend(backend)
    model = EggModel(EggConfig(depth, dim))
    params = model.init_params(0)
    rows, meter = [], None
    for population in sizes:
        cfg = IntEggrollConfig(population=population, tokens_per_update=tokens)
        cfg.check()
        strategy = IntEggroll(model, cfg, 0, chosen, params)
        windows = np.random.default_rng(0).integers(1, 256, (population, tokens + 1), dtype=np.uint8)
        states = {p: [chosen.zeros((population, dim), np.int8) for _ in range(depth)] for p in (True, False)}
        seconds = {p: median_seconds(lambda p=p: strategy.evaluate(windows, states[p], perturbed=p), repeat=repeat,
                                     sync=chosen.synchronize) for p in (True, False)}
        meter = meter or MemoryMeter(chosen)
        meter.reset()
        strategy.evaluate(windows, states[True])
        rows.append({"population": population, "tokens": tokens,
                     "perturbed_tokens_per_s": round(population * tokens / seconds[True]),
                     "plain_tokens_per_s": round(population * tokens / seconds[False]),
                     "ratio": round(seconds[False] / seconds[True], 3), **meter.peaks()})
    meter.stop()
    print_table(rows, ["population", "tokens", "perturbed_tokens_per_s", "plain_tokens_per_s", "ratio"])
    path = write_result(f"eggroll_throughput-egg{depth}x{dim}", chosen.device_name, rows,
                        {"model": f"egg {depth}x{dim}", "params": model.n_params, "backend": chosen.name,
                         "repeat": repeat, "memory": meter.sources()})
    print(f"wrote {path}")


if __name__ == "__main__":
    app()
