"""Integer EGGROLL on N ranks, synchronous and under the coordinator, on the same config: seconds per
step and population tokens/s (median over the steps after --warmup, which compile the kernels), and
whether the two runs end with the same parameters (they must, with shaping off).

    python -m bench.scale.es_modes --ranks 4 --steps 30 --population 512 --population-chunk 64

Each mode is one `mpiexec -n N python bin/train_es.py` run on the default corpus; the coordinator's N
ranks are 1 coordinator and N - 1 workers, the synchronous run's N ranks all evaluate.
"""

import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
import typer

from bench.report import REPO, print_table, write_result
from eggnog.kernels.core.backend import select_backend
from eggnog.runtime.checkpoint import load_checkpoint
from eggnog.runtime.cli import cli_help, user_errors
from eggnog.runtime.errors import BadInput

app = typer.Typer(add_completion=False, pretty_exceptions_enable=False, rich_markup_mode=None)


def run_mode(mode, ranks, steps, population, chunk, backend, run_dir, timeout):
    command = ["mpiexec", "-n", str(ranks), sys.executable, str(REPO / "bin" / "train_es.py"), "--mode", mode,
               "--steps", steps, "--population", population, "--population-chunk", chunk, "--backend", backend,
               "--validate-every", steps, "--checkpoint-every", steps, "--run-dir", run_dir]
    env = dict(os.environ, NUMBA_NUM_THREADS=os.environ.get("NUMBA_NUM_THREADS", "1"), EGGNOG_PROGRESS="0")
    done = subprocess.run([str(c) for c in command], capture_output=True, text=True, env=env, timeout=timeout)
    if done.returncode:
        tail = (done.stderr.strip().splitlines() or ["no message"])[-1]
        raise BadInput(f"the {mode} run failed (exit {done.returncode}: {tail})")
    lines = [json.loads(line) for line in (Path(run_dir) / "metrics.jsonl").read_text().splitlines() if line.strip()]
    return lines, load_checkpoint(run_dir)[0]["params"]


@app.command(help=cli_help(__doc__))
@user_errors
def main(ranks: int = typer.Option(4, help="MPI ranks of each run."),
         steps: int = typer.Option(30, help="Steps of each run."),
         warmup: int = typer.Option(3, help="First steps left out of the medians (kernel compilation)."),
         population: int = typer.Option(512, help="Population."),
         population_chunk: int = typer.Option(64, help="Coordinator chunk."),
         backend: str = typer.Option("cpu", help="cpu, cuda or auto."),
         timeout: int = typer.Option(1800, help="Seconds allowed to each run.")):
    if ranks < 2 or steps <= warmup or warmup < 0:
        raise BadInput("--ranks must be at least 2 and --steps more than --warmup (>= 0)")
    if shutil.which("mpiexec") is None:
        raise BadInput("mpiexec is not on PATH (install the dev extra, or load the site MPI)")
    rows, params = [], {}
    with tempfile.TemporaryDirectory() as tmp:
        for mode in ("sync", "coordinator"):
            lines, params[mode] = run_mode(mode, ranks, steps, population, population_chunk, backend,
                                           Path(tmp) / mode, timeout)
            timed = lines[warmup:]
            rows.append({"mode": mode, "ranks": ranks, "evaluating_ranks": ranks - (mode == "coordinator"),
                         "step_s": round(float(np.median([r["step_s"] for r in timed])), 4),
                         "tokens_per_s": round(float(np.median([r["tokens_per_s"] for r in timed])), 1),
                         "final_train_bpb": lines[-1]["train_bpb"]})
    same = bool(np.array_equal(params["sync"], params["coordinator"]))
    print_table(rows, list(rows[0]))
    print(f"same final parameters: {same}")
    extra = {"steps": steps, "warmup": warmup, "population": population, "population_chunk": population_chunk,
             "same_parameters": same}
    print(f"wrote {write_result('es_modes', select_backend(backend, 0).device_name, rows, extra)}")


if __name__ == "__main__":
    app()
