"""What the compiled-kernel cache saves: each training script's two-step laptop run started twice
against an empty NUMBA_CACHE_DIR, wall time of the first start (every kernel compiled) and of the
second (loaded from the cache), process start-up included; and the seconds the first start's notice
promised to measure (from the notice to the end of the first step, as the run recorded them: what
kernels/core/first_compile.py quotes to a first run), for the trainers and for generation and
evaluation of the EGG.

    python -m bench.main_job.compile_cache
"""

import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import typer

from bench.report import print_table, write_result
from eggnog.kernels.core.first_compile import RECORD
from eggnog.runtime.cli import cli_help, user_errors

ROOT = Path(__file__).resolve().parents[2]
# a run, its command and the job its first-compile record is kept under
RUNS = {"train_es.py": (["bin/train_es.py"], "EsRunConfig"),
        "train_es.py --model transformer": (["bin/train_es.py", "--model", "transformer"], "TransformerEsRunConfig"),
        "train_es.py --model mingru": (["bin/train_es.py", "--model", "mingru"], "FloatEsRunConfig"),
        "train_bptt.py": (["bin/train_bptt.py"], "BpttRunConfig"),
        "train_rge.py": (["bin/train_rge.py"], "RgeRunConfig")}
READERS = {"generate.py": (["bin/generate.py", "--length", "20"], "generate egg"),
           "evaluate.py": (["bin/evaluate.py"], "evaluate egg")}
app = typer.Typer(add_completion=False, pretty_exceptions_enable=False, rich_markup_mode=None)


def timed(args, cache):
    env = {**os.environ, "EGGNOG_PROGRESS": "0", "NUMBA_CACHE_DIR": str(cache)}
    started = time.perf_counter()
    done = subprocess.run([sys.executable, *args], env=env, capture_output=True, text=True, cwd=ROOT)
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(args)} failed:\n{done.stderr[-2000:]}")
    return round(time.perf_counter() - started, 1)


def notice_seconds(cache, job):
    """The seconds a cold run recorded for `job` in the compile cache's versioned folder."""
    records = [json.loads(path.read_text()) for path in Path(cache).glob(f"*/{RECORD}")]
    return next(record[job] for record in records if job in record)


@app.command(help=cli_help(__doc__))
@user_errors
def main():
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for name, (args, job) in RUNS.items():
            cache = Path(tmp) / f"cache-{len(rows)}"
            run = ["--steps", "2", "--run-dir"]
            cold = timed([*args, *run, str(Path(tmp) / f"cold-{len(rows)}")], cache)
            warm = timed([*args, *run, str(Path(tmp) / f"warm-{len(rows)}")], cache)
            rows.append({"run": name, "first_start_s": cold, "second_start_s": warm,
                         "notice_s": notice_seconds(cache, job)})
            print(rows[-1], flush=True)
        for name, (args, job) in READERS.items():  # of the EGG run above, each on a cache of its own
            cache = Path(tmp) / f"cache-{len(rows)}"
            cold = timed([*args, str(Path(tmp) / "cold-0")], cache)
            warm = timed([*args, str(Path(tmp) / "cold-0")], cache)
            rows.append({"run": name, "first_start_s": cold, "second_start_s": warm,
                         "notice_s": notice_seconds(cache, job)})
            print(rows[-1], flush=True)
    print_table(rows, list(rows[0]))
    print(f"wrote {write_result('compile_cache', 'cpu', rows)}")


if __name__ == "__main__":
    app()
