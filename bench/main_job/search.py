"""The best validation figure the integer EGG main job (`bin/train_es.py` on the embedded corpus) reaches
in a fixed wall-clock budget on this machine, over a small search of population, width, depth, group size
and noise scale. Every setting runs to the same budget of its run clock (`--max-minutes`, compile
excluded: the kernels are compiled once before the first setting):

1. screen: every setting for --screen-minutes;
2. final: the --keep best of the screen continue (an exact resume) to --final-minutes;
3. long: the best at --final-minutes continues to --long-minutes (0: no long stage).

Each finalist's best checkpoint is then scored by `bin/evaluate.py` on --eval-rows rows of the validation
split, beside the split's unigram and bigram baselines. The results file is rewritten after every run, so
a stopped search keeps what it measured.

    python -m bench.main_job.search                                   # 2 / 10 / 60 minutes
    python -m bench.main_job.search --screen-minutes 0.2 --final-minutes 0.5 --long-minutes 0 --setting default
"""

import json
import os
import platform
import subprocess
import sys
import tempfile
from pathlib import Path

import typer

from bench.report import print_table, write_result
from eggnog.corpus.default import SHA256
from eggnog.runtime.cli import cli_help, user_errors
from eggnog.runtime.errors import BadInput

ROOT = Path(__file__).resolve().parents[2]
SETTINGS = {
    "default": [],
    "dim128": ["--dim", "128"],
    "depth2": ["--depth", "2"],
    "pop2048": ["--population", "2048", "--group-size", "256"],
    "group8": ["--group-size", "8"],
    "sigma3": ["--sigma-shift", "3"],
    "slow_decay": ["--alpha-decay-timestep", "5000"],  # the z-test's level falls 5x slower: more weights move late
}
VALIDATION_S = 20  # seconds of training between validations, whatever a setting's step time
app = typer.Typer(add_completion=False, pretty_exceptions_enable=False, rich_markup_mode=None)


def train(flags, env, run_dir=None):
    where = ["--run-dir", str(run_dir)] if run_dir is not None else []
    done = subprocess.run([sys.executable, str(ROOT / "bin/train_es.py"), *flags, *where],
                          capture_output=True, text=True, env=env)
    if done.returncode != 0:
        raise RuntimeError(f"train_es.py {' '.join(flags)} failed:\n{done.stdout[-2000:]}\n{done.stderr[-2000:]}")


def metrics(run_dir):
    return [json.loads(line) for line in (Path(run_dir) / "metrics.jsonl").read_text().splitlines() if line.strip()]


def step_seconds(name, env, tmp):
    """Median step time of a setting, from a short run after the first (compiling) step."""
    run_dir = Path(tmp) / f"probe-{name}"
    train([*SETTINGS[name], "--steps", "6", "--validate-every", "100", "--no-plots"], env, run_dir)
    times = sorted(r["step_s"] for r in metrics(run_dir)[1:])
    return times[len(times) // 2]


def run_to(name, minutes, validate_every, env, run_dir):
    """Run (or continue) a setting until its run clock passes `minutes`; returns its row."""
    budget = ["--steps", str(10 ** 9), "--max-minutes", str(minutes)]
    if (run_dir / "checkpoints" / "latest").is_file():
        train(["--resume", str(run_dir), *budget], env)
    else:
        train([*SETTINGS[name], "--validate-every", str(validate_every), "--no-plots", *budget], env, run_dir)
    records = metrics(run_dir)
    val = [(r["elapsed_s"], r["val_bpb"]) for r in records if "val_bpb" in r]
    rates = sorted(r["tokens_per_s"] for r in records[1:])
    return {"setting": name, "flags": " ".join(SETTINGS[name]) or "(the defaults)", "minutes": minutes,
            "steps": records[-1]["step"], "elapsed_s": records[-1]["elapsed_s"],
            "tokens_per_s": round(rates[len(rates) // 2]) if rates else None,
            "val_bpb": val[-1][1], "best_val_bpb": min(v for _, v in val),
            "val_curve": [[round(t, 1), v] for t, v in val]}


def evaluated(run_dir, rows, env):
    done = subprocess.run([sys.executable, str(ROOT / "bin/evaluate.py"), str(run_dir / "checkpoints" / "best"),
                           "--rows", str(rows), "--json"], capture_output=True, text=True, env=env)
    if done.returncode != 0:
        raise RuntimeError(f"evaluate.py failed:\n{done.stdout[-2000:]}\n{done.stderr[-2000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def loads():
    return [round(x, 2) for x in os.getloadavg()]


@app.command(help=cli_help(__doc__))
@user_errors
def main(setting: list[str] = typer.Option(None, help=f"Settings to screen (default: all): {', '.join(SETTINGS)}."),
         screen_minutes: float = typer.Option(2.0, help="Budget of every setting in the screen."),
         final_minutes: float = typer.Option(10.0, help="Budget the best --keep settings continue to."),
         long_minutes: float = typer.Option(60.0, help="Budget the best final setting continues to (0: none)."),
         keep: int = typer.Option(2, help="Settings of the screen that continue to --final-minutes."),
         eval_rows: int = typer.Option(256, help="Validation rows the finalists' best checkpoints are scored on."),
         threads: int = typer.Option(os.cpu_count(), help="CPU threads of every run.")):
    chosen = setting or list(SETTINGS)
    unknown = [s for s in chosen if s not in SETTINGS]
    if unknown:
        raise BadInput(f"unknown setting {unknown[0]!r}: choose from {', '.join(SETTINGS)}")
    if not 0 < screen_minutes <= final_minutes or (long_minutes and long_minutes <= final_minutes):
        raise BadInput("the budgets must grow: 0 < --screen-minutes <= --final-minutes < --long-minutes (or 0)")
    if not 1 <= keep <= len(chosen) or eval_rows < 1 or threads < 1:
        raise BadInput(f"--keep must lie in [1, {len(chosen)}], --eval-rows and --threads must be positive")
    rows, result = [], {"python": platform.python_version(), "corpus_sha256": SHA256, "threads": threads,
                        "budgets_minutes": [screen_minutes, final_minutes, long_minutes], "load_before": loads()}

    def save(stage, row):
        rows.append({"stage": stage, **row})
        path = write_result("main_job_search", "cpu", rows, {**result, "load_now": loads()})
        print(f"{stage:>6} {row['setting']:>8}: {row['steps']} steps, val {row['val_bpb']:.3f} "
              f"(best {row['best_val_bpb']:.3f})  -> {path}", flush=True)

    with tempfile.TemporaryDirectory() as tmp:
        env = {**os.environ, "EGGNOG_PROGRESS": "0", "NUMBA_CACHE_DIR": str(Path(tmp) / "cache"),
               "NUMBA_NUM_THREADS": str(threads)}
        every = {name: max(1, round(VALIDATION_S / step_seconds(name, env, tmp))) for name in chosen}
        runs = {name: Path(tmp) / name for name in chosen}
        for name in chosen:
            save("screen", run_to(name, screen_minutes, every[name], env, runs[name]))
        screened = sorted(rows, key=lambda r: r["best_val_bpb"])[:keep]
        finals = []
        for row in screened:
            finals.append(run_to(row["setting"], final_minutes, every[row["setting"]], env, runs[row["setting"]]))
            save("final", finals[-1])
        best = min(finals, key=lambda r: r["best_val_bpb"])
        if long_minutes:
            finals.append(run_to(best["setting"], long_minutes, every[best["setting"]], env, runs[best["setting"]]))
            save("long", finals[-1])
        scored = evaluated(runs[best["setting"]], eval_rows, env)
        result["evaluated"] = {"setting": best["setting"], "rows": eval_rows, "val_bpb": scored["loss"],
                               "baselines": scored["baselines"]}
        path = write_result("main_job_search", "cpu", rows, {**result, "load_now": loads()})
    print_table(rows, ["stage", "setting", "flags", "minutes", "steps", "tokens_per_s", "val_bpb", "best_val_bpb"])
    print(f"{best['setting']} scored on {eval_rows} rows: {scored['loss']:.4f} bits/byte; baselines "
          + ", ".join(f"{k} {v:.4f}" for k, v in scored["baselines"].items()) + f"\nwrote {path}")


if __name__ == "__main__":
    app()
