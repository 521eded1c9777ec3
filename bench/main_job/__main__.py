"""The bare commands of the README and docs/training.md, run as a newcomer runs them (no flags but the
job's own; the embedded default corpus), each in a fresh run folder with an empty compile cache:
wall time (process start and every kernel's compilation included, as on a first run), time in the
steps, the median tokens/s of the steps after the first, the first and last training loss, and the
validation bits/byte (final, best, and at every validation). Each job writes its own file, named
after the job and the Python, so run it under each Python whose figures the docs quote.

    python -m bench.main_job
    python -m bench.main_job --job train_es --job train_bptt --job train_es_transformer
"""

import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import typer

from bench.report import print_table, write_result
from eggnog.corpus.default import SHA256
from eggnog.runtime.cli import cli_help, user_errors
from eggnog.runtime.errors import BadInput

ROOT = Path(__file__).resolve().parents[2]
JOBS = {"train_es": ["bin/train_es.py"], "train_bptt": ["bin/train_bptt.py"],
        "train_es_mingru": ["bin/train_es.py", "--model", "mingru"],
        "train_es_transformer": ["bin/train_es.py", "--model", "transformer"],
        "train_es_4000": ["bin/train_es.py", "--steps", "4000", "--validate-every", "100"],
        "train_rge_overfit": ["bin/train_rge.py", "--overfit", "--lr", "0.3", "--sigma", "0.01", "--target-loss",
                              "0.1"]}
app = typer.Typer(add_completion=False, pretty_exceptions_enable=False, rich_markup_mode=None)


def run_job(name, directory):
    run_dir = Path(directory) / name
    script, *flags = JOBS[name]
    started = time.perf_counter()
    done = subprocess.run([sys.executable, str(ROOT / script), *flags, "--run-dir", str(run_dir)],
                          capture_output=True, text=True,
                          env={**os.environ, "EGGNOG_PROGRESS": "0", "NUMBA_CACHE_DIR": str(Path(directory) / "cache")})
    wall = time.perf_counter() - started
    if done.returncode != 0:
        raise RuntimeError(f"{name} failed:\n{done.stdout[-2000:]}\n{done.stderr[-2000:]}")
    records = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines() if line.strip()]
    rates = [r["tokens_per_s"] for r in records[1:] if "tokens_per_s" in r]
    val = [r["val_bpb"] for r in records if "val_bpb" in r]
    first = records[0].get("train_bpb", records[0].get("loss"))
    last = records[-1].get("train_bpb", records[-1].get("loss"))  # bits/byte, or bits/token on a task
    return {"job": " ".join([Path(script).name, *flags]), "steps": records[-1]["step"], "wall_s": round(wall, 1),
            "steps_s": round(records[-1]["elapsed_s"] if "elapsed_s" in records[-1]
                             else sum(r.get("step_s", r.get("s_per_step")) for r in records), 1),
            "tokens_per_s": round(statistics.median(rates)) if rates else None,
            "first_train_loss": round(first, 4), "final_train_loss": round(last, 4),
            "val_bpb": round(val[-1], 3) if val else None, "best_val_bpb": round(min(val), 3) if val else None,
            "val_curve": {r["step"]: round(r["val_bpb"], 3) for r in records if "val_bpb" in r},
            "val_elapsed_s": {r["step"]: r.get("elapsed_s") for r in records if "val_bpb" in r}}


@app.command(help=cli_help(__doc__))
@user_errors
def main(job: list[str] = typer.Option(None, help=f"Jobs to run (default: train_es): {', '.join(JOBS)}.")):
    chosen = job or ["train_es"]
    unknown = [j for j in chosen if j not in JOBS]
    if unknown:
        raise BadInput(f"unknown job {unknown[0]!r}: choose from {', '.join(JOBS)}")
    python = platform.python_version()
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for name in chosen:  # a file per job: running one again replaces only its own
            rows.append(run_job(name, tmp))
            path = write_result(f"main_job-{name}", f"cpu-py{python}", rows[-1:], {"python": python,
                                                                                 "corpus_sha256": SHA256})
            print(f"{rows[-1]}\nwrote {path}", flush=True)
    print_table(rows, [k for k in rows[0] if k != "val_curve"])


if __name__ == "__main__":
    app()
