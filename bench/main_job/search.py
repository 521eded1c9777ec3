"""The best validation figure the integer EGG main job (`bin/train_es.py` on the embedded corpus) reaches
in a wall-clock budget on this machine, over a small search of population, width, depth, group size and
the update's rate.

A budget of minutes becomes a budget of steps: a run is deterministic, so its validation after N steps
does not depend on how busy the machine was, only the time to get there does. The seconds a step takes
(its median, plus its share of the validations every ~20 s) are measured for each setting on a quiet
machine first (`--calibration FILE` reuses a measurement), and a setting's budget is the steps that many
seconds hold. Then, each run to exactly its budget and validated there:

1. screen: every setting for --screen-minutes;
2. final: the --keep best of the screen continue (an exact resume) to --final-minutes;
3. long: the best final setting continues to --long-minutes (0: no long stage).

The best checkpoint of the best run is scored by `bin/evaluate.py` on --eval-rows rows, beside the split's
unigram and bigram baselines. Runs live in --runs (kept, so a stopped search resumes where it was); the
results file is rewritten after every run.

    python -m bench.main_job.search                                   # 2 / 10 / 60 minutes
    python -m bench.main_job.search --screen-minutes 0.1 --final-minutes 0.2 --long-minutes 0 --setting default
"""

import json
import os
import platform
import statistics
import subprocess
import sys
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
CALIBRATION_STEPS = 60
app = typer.Typer(add_completion=False, pretty_exceptions_enable=False, rich_markup_mode=None)


def train(flags, env, run_dir=None):
    where = ["--run-dir", str(run_dir)] if run_dir is not None else []
    done = subprocess.run([sys.executable, str(ROOT / "bin/train_es.py"), *flags, *where],
                          capture_output=True, text=True, env=env)
    if done.returncode != 0:
        raise RuntimeError(f"train_es.py {' '.join(flags)} failed:\n{done.stdout[-2000:]}\n{done.stderr[-2000:]}")


def metrics(run_dir):
    return [json.loads(line) for line in (Path(run_dir) / "metrics.jsonl").read_text().splitlines() if line.strip()]


def calibrate(name, env, folder):
    """Seconds a step of the setting takes on this machine now: its median step after the first (which
    compiles), plus the validations' share at one every ~VALIDATION_S seconds."""
    run_dir = Path(folder) / f"calibrate-{name}"
    # compiled first (steps and validation), so that no measured step or validation compiles
    train([*SETTINGS[name], "--steps", "2", "--validate-every", "1", "--no-plots"], env, Path(folder) / f"warm-{name}")
    every = CALIBRATION_STEPS // 4
    train([*SETTINGS[name], "--steps", str(CALIBRATION_STEPS), "--validate-every", str(every), "--no-plots"], env,
          run_dir)
    records = metrics(run_dir)
    step = statistics.median(r["step_s"] for r in records[1:])
    # a step's record is written before its validation, whose time the next step's clock then shows
    ends = {r["step"]: r["elapsed_s"] for r in records}
    val_s = statistics.median(ends[r["step"] + 1] - ends[r["step"]] - step for r in records
                              if "val_bpb" in r and r["step"] + 1 in ends)
    every = max(1, round(VALIDATION_S / step))
    return {"setting": name, "step_s": round(step, 5), "validation_s": round(max(val_s, 0.0), 4),
            "validate_every": every, "seconds_per_step": round(step + max(val_s, 0.0) / every, 5),
            "load": [round(x, 2) for x in os.getloadavg()]}


def validated_curve(run_dir):
    return [(r["step"], r["val_bpb"]) for r in metrics(run_dir) if "val_bpb" in r]


def run_to(name, steps, calibration, env, run_dir):
    """The setting's run brought to `steps` (an exact resume; a run already past them is read at its last
    validation up to there); returns its row."""
    done = metrics(run_dir)[-1]["step"] if (run_dir / "metrics.jsonl").is_file() else 0
    budget = ["--steps", str(steps), "--max-minutes", "0"]
    if (run_dir / "checkpoints" / "latest").is_file() and done < steps:
        train(["--resume", str(run_dir), *budget, "--validate-every", str(calibration["validate_every"])], env)
    elif done < steps:
        train([*SETTINGS[name], "--validate-every", str(calibration["validate_every"]), "--no-plots", *budget], env,
              run_dir)
    curve = [(s, v) for s, v in validated_curve(run_dir) if s <= steps]
    return {"setting": name, "flags": " ".join(SETTINGS[name]) or "(the defaults)", "budget_steps": steps,
            "read_at_step": curve[-1][0], "val_bpb": curve[-1][1], "best_val_bpb": min(v for _, v in curve),
            "val_curve": curve}


def evaluated(run_dir, rows, env):
    done = subprocess.run([sys.executable, str(ROOT / "bin/evaluate.py"), str(run_dir / "checkpoints" / "best"),
                           "--rows", str(rows), "--json"], capture_output=True, text=True, env=env)
    if done.returncode != 0:
        raise RuntimeError(f"evaluate.py failed:\n{done.stdout[-2000:]}\n{done.stderr[-2000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def calibrations(chosen, given, env, runs):
    """{setting: calibration}: from --calibration where it has the setting, else measured now (and saved
    beside the runs)."""
    known = json.loads(Path(given).read_text()) if given else {}
    if not isinstance(known, dict):
        raise BadInput(f"--calibration {given!r} holds no {{setting: calibration}} object")
    for name in chosen:
        if name not in known:
            known[name] = calibrate(name, env, runs)
        if not isinstance(known[name], dict) or not all(
                isinstance(known[name].get(k), (int, float)) and known[name][k] > 0
                for k in ("seconds_per_step", "validate_every")):
            raise BadInput(f"--calibration {given!r}: setting {name!r} lacks positive seconds_per_step and "
                           "validate_every")
    (runs / "calibration.json").write_text(json.dumps(known, indent=1) + "\n")
    return known


@app.command(help=cli_help(__doc__))
@user_errors
def main(setting: list[str] = typer.Option(None, help=f"Settings to screen (default: all): {', '.join(SETTINGS)}."),
         screen_minutes: float = typer.Option(2.0, help="Budget of every setting in the screen."),
         final_minutes: float = typer.Option(10.0, help="Budget the best --keep settings continue to."),
         long_minutes: float = typer.Option(60.0, help="Budget the best final setting continues to (0: none)."),
         keep: int = typer.Option(2, help="Settings of the screen that continue to --final-minutes."),
         eval_rows: int = typer.Option(256, help="Validation rows the best run's best checkpoint is scored on."),
         runs: Path = typer.Option(Path("runs/main-job-search"), help="Folder of the search's runs (kept)."),
         calibration: Path = typer.Option(None, help="JSON {setting: calibration} measured before (on a quiet "
                                                     "machine); settings missing from it are measured now."),
         threads: int = typer.Option(os.cpu_count(), help="CPU threads of every run.")):
    chosen = setting or list(SETTINGS)
    unknown = [s for s in chosen if s not in SETTINGS]
    if unknown:
        raise BadInput(f"unknown setting {unknown[0]!r}: choose from {', '.join(SETTINGS)}")
    if not 0 < screen_minutes <= final_minutes or (long_minutes and long_minutes <= final_minutes):
        raise BadInput("the budgets must grow: 0 < --screen-minutes <= --final-minutes < --long-minutes (or 0)")
    if not 1 <= keep <= len(chosen) or eval_rows < 1 or threads < 1:
        raise BadInput(f"--keep must lie in [1, {len(chosen)}], --eval-rows and --threads must be positive")
    if calibration is not None and not calibration.is_file():
        raise BadInput(f"--calibration {str(calibration)!r} does not exist")
    runs.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "EGGNOG_PROGRESS": "0", "NUMBA_CACHE_DIR": str(runs / "cache"),
           "NUMBA_NUM_THREADS": str(threads)}
    measured = calibrations(chosen, calibration, env, runs)
    result = {"python": platform.python_version(), "corpus_sha256": SHA256, "threads": threads,
              "budgets_minutes": [screen_minutes, final_minutes, long_minutes],
              "calibration": {name: measured[name] for name in chosen}}
    rows = []

    def stage(name, setting_name, minutes):
        steps = int(minutes * 60 / measured[setting_name]["seconds_per_step"])
        row = {"stage": name, "minutes": minutes, **run_to(setting_name, steps, measured[setting_name], env,
                                                            runs / setting_name)}
        rows.append(row)
        path = write_result("main_job_search", "cpu", rows, result)
        print(f"{name:>6} {setting_name:>10}: step {row['read_at_step']} of {steps}, val {row['val_bpb']:.3f} "
              f"(best {row['best_val_bpb']:.3f})  -> {path}", flush=True)
        return row

    screened = sorted((stage("screen", name, screen_minutes) for name in chosen), key=lambda r: r["best_val_bpb"])
    finals = [stage("final", row["setting"], final_minutes) for row in screened[:keep]]
    best = min(finals, key=lambda r: r["best_val_bpb"])
    if long_minutes:
        best = stage("long", best["setting"], long_minutes)
    scored = evaluated(runs / best["setting"], eval_rows, env)
    result["evaluated"] = {"setting": best["setting"], "rows": eval_rows, "step": scored["step"],
                           "val_bpb": scored["loss"], "baselines": scored["baselines"]}
    path = write_result("main_job_search", "cpu", rows, result)
    print_table(rows, ["stage", "setting", "flags", "minutes", "budget_steps", "read_at_step", "val_bpb",
                       "best_val_bpb"])
    print(f"{best['setting']} (best checkpoint, step {scored['step']}) scored on {eval_rows} rows: "
          f"{scored['loss']:.4f} bits/byte; baselines "
          + ", ".join(f"{k} {v:.4f}" for k, v in scored["baselines"].items()) + f"\nwrote {path}")


if __name__ == "__main__":
    app()
