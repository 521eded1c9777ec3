"""EGGROLL population evaluation: tokens/s with perturbations (noise regenerated on the fly inside the
kernels) against the same kernels without perturbation (plain batched inference), per population.

    python bench/eggroll_throughput.py --n-layer 6 --n-embd 256 --populations 1024,8192,32768

The EGGROLL paper reports 91% of inference throughput with stored noise and 69% with noise generated
on the fly; the ratio column is the same measure for these kernels.
"""

import os
import resource
import sys

import numpy as np
import typer

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from bench.report import median_seconds, print_table, write_result  # noqa: E402
from eggnog.runtime.cli import user_errors  # noqa: E402

app = typer.Typer(add_completion=False, pretty_exceptions_enable=False, help=__doc__)


def device_bytes_in_use(backend):
    if backend.name == "cuda" and not backend.simulated:
        from eggnog.kernels.cuda_api import cuda

        free, total = cuda.current_context().get_memory_info()
        return int(total - free)
    return None


@app.command()
@user_errors
def main(n_layer: int = 1, n_embd: int = 64, populations: str = "64,256,1024", tokens: int = 16,
         repeat: int = 3, backend: str = typer.Option(None, help="auto, cpu or cuda.")):
    from eggnog.evolution.eggroll import IntEggroll, IntEggrollConfig
    from eggnog.kernels.backend import select_backend
    from eggnog.models.egg import EggConfig, EggModel

    chosen = select_backend(backend)
    model = EggModel(EggConfig(n_layer, n_embd))
    params = model.init_params(0)
    rows = []
    for population in (int(p) for p in populations.split(",")):
        strategy = IntEggroll(model, IntEggrollConfig(population=population, tokens_per_update=tokens), 0, chosen,
                              params)
        windows = np.random.default_rng(0).integers(1, 256, (population, tokens + 1), dtype=np.uint8)

        def evaluate(perturbed):
            states = [chosen.zeros((population, n_embd), np.int8) for _ in range(n_layer)]
            strategy.evaluate(windows, states, perturbed=perturbed)

        timing = {p: median_seconds(lambda p=p: evaluate(p), repeat=repeat, sync=chosen.synchronize)
                  for p in (True, False)}
        rows.append({"population": population, "tokens": tokens,
                     "perturbed_tokens_per_s": round(population * tokens / timing[True]),
                     "plain_tokens_per_s": round(population * tokens / timing[False]),
                     "ratio": round(timing[False] / timing[True], 3),
                     "device_bytes_in_use": device_bytes_in_use(chosen)})
    print_table(rows, ["population", "tokens", "perturbed_tokens_per_s", "plain_tokens_per_s", "ratio"])
    peak_rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    path = write_result(f"eggroll_throughput-egg{n_layer}x{n_embd}", chosen.device_name, rows,
                        {"model": f"egg {n_layer}x{n_embd}", "params": model.n_params, "backend": chosen.name,
                         "host_peak_rss_bytes": peak_rss})
    print(f"wrote {path}")


if __name__ == "__main__":
    app()
