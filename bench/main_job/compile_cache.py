"""What the compiled-kernel cache saves: each training script's two-step laptop run started twice
against an empty NUMBA_CACHE_DIR, wall time of the first start (every kernel compiled) and of the
second (loaded from the cache), process start-up included.

    python -m bench.main_job.compile_cache
"""

import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import typer

from bench.report import print_table, write_result
from eggnog.runtime.cli import cli_help, user_errors

ROOT = Path(__file__).resolve().parents[2]
RUNS = {"train_es.py": ["bin/train_es.py"], "train_es.py --model transformer": ["bin/train_es.py", "--model",
                                                                                "transformer"],
        "train_bptt.py": ["bin/train_bptt.py"], "train_rge.py": ["bin/train_rge.py"]}
app = typer.Typer(add_completion=False, pretty_exceptions_enable=False, rich_markup_mode=None)


def timed(args, run_dir, cache):
    env = {**os.environ, "EGGNOG_PROGRESS": "0", "NUMBA_CACHE_DIR": str(cache)}
    started = time.perf_counter()
    done = subprocess.run([sys.executable, *args, "--steps", "2", "--run-dir", str(run_dir)], env=env,
                          capture_output=True, text=True, cwd=ROOT)
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(args)} failed:\n{done.stderr[-2000:]}")
    return round(time.perf_counter() - started, 1)


@app.command(help=cli_help(__doc__))
@user_errors
def main():
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for name, args in RUNS.items():
            cache = Path(tmp) / f"cache-{len(rows)}"
            cold = timed(args, Path(tmp) / f"cold-{len(rows)}", cache)
            warm = timed(args, Path(tmp) / f"warm-{len(rows)}", cache)
            rows.append({"run": name, "first_start_s": cold, "second_start_s": warm})
            print(rows[-1], flush=True)
    print_table(rows, list(rows[0]))
    print(f"wrote {write_result('compile_cache', 'cpu', rows)}")


if __name__ == "__main__":
    app()
