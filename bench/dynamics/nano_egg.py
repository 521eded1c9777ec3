"""Learning like the original: EGGROLL training curves of eggnog's EGG beside nano-egg's own run.py, on the
same bytes at the same settings, over several seeds, in bits per byte, on the CPU.

    python -m bench.dynamics.nano_egg --peer-python ENV/bin/python --nano-egg NANO_EGG  # 1x64 pop 512, 3 x 200 epochs
    python -m bench.dynamics.nano_egg --peer-python ENV/bin/python --nano-egg NANO_EGG --quick  # 2 seeds x 30 epochs
    python -m bench.dynamics.nano_egg ... --configs 1x64:512,2x128:512,1x64:4096,2x128:4096 --epochs 1000  # all

nano-egg's environment (JAX on the CPU, nothing from eggnog; NANO_EGG is a checkout of ESHyperscale/nano-egg):

    python3 -m venv ENV && ENV/bin/pip install jax jaxlib tyro scipy tqdm huggingface_hub

Both sides train the EGG (configs are depth x dim : population) for --epochs updates with nano-egg's
defaults: sigma shift 4, alpha 4 (z-test level decaying over 1000 epochs), CLT votes, fast fitness,
noise reuse 1, group size 2 (eggnog's bare command uses 64; here both use nano-egg's 2), 100 bytes per
member per epoch. The data are the embedded default corpus eggnog trains on (eggnog.corpus.default: the
standard library's sources, its train/validation split), written out as the .npy files run.py reads;
both sides cut the training split into the same streams (one per group, read 100 bytes an epoch, in
the same order), so they read the same bytes each epoch. Validation: the same --val-rows windows of
--val-tokens + 1 bytes from the start of the validation split, each from a zero state, every
--validate-every epochs (nano-egg's validation_batch_size and validate_every are set to match).

What differs: the initial weights and the noise. nano-egg draws both from JAX's threefry (its noise from
a 2^30-entry int8 table), eggnog from its counter hash, so a seed gives different runs on the two sides;
the bench compares the mean over --seeds seeds of each side (seeds 0..n-1), with their spread. nano-egg
runs its run.py unchanged (bench/peers/nano_egg_train.py records what it logs through a stand-in wandb);
eggnog runs bin/train_es.py.

Verdict per config on the final validation bits/byte: "match" when the two means differ by less than two
standard errors of the difference or by less than --tolerance (0.02), else "eggnog better" or "nano-egg
better". Writes bench/results/dynamics_nano_egg-<grid>-cpu-<date>.json (grid: 1x64p512_2x128p512 ...) and a
.png beside it: training bits/byte (population mean, per epoch) and validation bits/byte, means over seeds with
their min-max band.
"""

import hashlib
import json
import math
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import typer

from bench.peers import FOLDER as PEERS
from bench.report import check_python, peer_result, print_table, write_result
from eggnog.runtime.cli import cli_help, user_errors
from eggnog.runtime.errors import BadInput

app = typer.Typer(add_completion=False, pretty_exceptions_enable=False, rich_markup_mode=None)

ROOT = Path(__file__).resolve().parents[2]
PEER_SCRIPT = PEERS / "nano_egg_train.py"
DEFAULT_CONFIGS, DEFAULT_EPOCHS, DEFAULT_SEEDS = "1x64:512", 200, 3
QUICK_CONFIGS, QUICK_EPOCHS, QUICK_SEEDS = "1x64:512", 30, 2
SIDES = ("nano_egg", "eggnog")


def parse_configs(text):
    """'1x64:512,2x128:4096' -> [(1, 64, 512), (2, 128, 4096)] (depth, dim, population)."""
    try:
        configs = []
        for item in text.split(","):
            shape, population = item.split(":")
            depth, dim = (int(v) for v in shape.split("x"))
            population = int(population)
            if min(depth, dim, population) < 1 or population % 2:
                raise ValueError
            configs.append((depth, dim, population))
        return configs
    except ValueError:
        raise BadInput(f"--configs {text!r} is not a list like 1x64:512,2x128:4096 "
                       "(depth x dim : an even population)") from None


def summary(finals):
    """Mean, sample standard deviation and standard error of a side's final validation figures."""
    values = np.asarray(finals, float)
    std = float(values.std(ddof=1)) if len(values) > 1 else 0.0
    return {"mean": round(float(values.mean()), 4), "std": round(std, 4),
            "se": round(std / math.sqrt(len(values)), 4), "n": len(values)}


def verdict(ours, theirs, tolerance):
    """ours, theirs: summary() of eggnog's and nano-egg's final validation bits/byte (lower is better)."""
    if theirs is None:
        return "nano-egg not run"
    difference = ours["mean"] - theirs["mean"]
    if abs(difference) < tolerance or abs(difference) < 2 * math.hypot(ours["se"], theirs["se"]):
        return "match"
    return "eggnog better" if difference < 0 else "nano-egg better"


# ---- the shared data -----------------------------------------------------------------------------
def write_data(folder, val_rows, val_tokens):
    """The training split and the validation windows as the .npy files run.py reads."""
    from eggnog.corpus.default import default_corpus

    corpus = default_corpus()
    train, val = np.asarray(corpus.train, np.uint8), np.asarray(corpus.val, np.uint8)
    rows = min(val_rows, len(val) // (val_tokens + 1))
    if rows < 1:
        raise BadInput(f"the validation split ({len(val)} bytes) is shorter than one window of {val_tokens + 1}")
    np.save(folder / "minipile_train.npy", train)
    np.save(folder / "minipile_valid.npy", val[:rows * (val_tokens + 1)])
    return {"corpus": Path(corpus.path).name, "train_bytes": int(len(train)), "val_rows": rows,
            "val_tokens": val_tokens}


# ---- the two sides -------------------------------------------------------------------------------
def eggnog_run(folder, depth, dim, population, epochs, seed, validate_every, rows, tokens, timeout):
    run_dir = folder / f"eggnog-{depth}x{dim}-{population}-{seed}"
    command = [sys.executable, str(ROOT / "bin" / "train_es.py"), "--depth", str(depth), "--dim", str(dim),
               "--population", str(population), "--group-size", "2", "--sigma-shift", "4", "--alpha", "4",
               "--noise-reuse", "1", "--tokens-per-update", "100", "--steps", str(epochs), "--seed", str(seed),
               "--validate-every", str(validate_every), "--val-rows", str(rows), "--val-tokens", str(tokens),
               "--checkpoint-every", str(epochs), "--no-plots", "--backend", "cpu",
               "--run-dir", str(run_dir)]
    begin = time.perf_counter()
    done = subprocess.run(command, capture_output=True, text=True, timeout=timeout,
                          env=dict(os.environ, EGGNOG_PROGRESS="0"))
    if done.returncode != 0:
        raise RuntimeError(f"eggnog's train_es.py failed: {done.stderr.strip()[-2000:]}")
    records = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    return {"train_bpb": [r["train_bpb"] for r in records],
            "val": [[r["step"], r["val_bpb"]] for r in records if "val_bpb" in r],
            "wall_s": round(time.perf_counter() - begin, 1)}


def nano_run(peer_python, peer_script, nano_egg, folder, depth, dim, population, epochs, seed, validate_every, rows,
             timeout):
    command = [peer_python, str(peer_script), "--nano-egg", nano_egg, "--data-dir", str(folder),
               "--depth", str(depth), "--dim", str(dim), "--population", str(population), "--epochs", str(epochs),
               "--seed", str(seed), "--validation-batch-size", str(rows), "--validate-every", str(validate_every)]
    begin = time.perf_counter()
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return f"ran past {timeout} s"
    if done.returncode != 0:
        return f"failed: {done.stderr.strip().splitlines()[-1] if done.stderr.strip() else done.returncode}"
    records = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    if len(records) != epochs:
        return f"logged {len(records)} of {epochs} epochs"
    return {"train_bpb": [round(r["avg_fitness"], 5) for r in records],
            "val": [[r["epoch"], round(r["validation_score"], 5)] for r in records if "validation_score" in r],
            "wall_s": round(time.perf_counter() - begin, 1)}


def check_peer(peer_python, peer_script, nano_egg):
    check_python(peer_python, "--peer-python")
    if not os.path.isfile(os.path.join(nano_egg, "run.py")):
        raise BadInput(f"--nano-egg {nano_egg} holds no run.py (give a checkout of ESHyperscale/nano-egg)")
    got = peer_result([peer_python, str(peer_script), "--check"], 300,
                      missing="has no jax, jaxlib, scipy, tyro and tqdm")
    if not isinstance(got, dict):
        raise BadInput(f"--peer-python {peer_python} {got}")
    with open(os.path.join(nano_egg, "run.py"), "rb") as f:
        return {**got, "run_py_sha256": hashlib.sha256(f.read()).hexdigest()}


# ---- report ---------------------------------------------------------------------------------------
def band(curves, key):
    """Steps, mean, min and max over seeds of a curve (train: per epoch; val: [step, bpb] pairs)."""
    if key == "train_bpb":
        values = np.array([c["train_bpb"] for c in curves])
        return np.arange(1, values.shape[1] + 1), values.mean(0), values.min(0), values.max(0)
    values = np.array([[v for _, v in c["val"]] for c in curves])
    return np.array([s for s, _ in curves[0]["val"]]), values.mean(0), values.min(0), values.max(0)


def draw(rows, path):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    colors = {"nano_egg": "tab:orange", "eggnog": "tab:blue"}
    labels = {"nano_egg": "nano-egg run.py", "eggnog": "eggnog"}
    fig, axes = plt.subplots(len(rows), 2, figsize=(12, 4 * len(rows)), squeeze=False)
    for (by_epoch, by_val), row in zip(axes, rows):
        for side in SIDES:
            runs = row["runs"][side]
            if not runs or any(isinstance(r, str) for r in runs):
                continue
            steps, mean, low, high = band(runs, "train_bpb")
            width = max(1, min(10, len(mean) // 10))
            smooth = np.convolve(mean, np.ones(width) / width, mode="valid")
            by_epoch.fill_between(steps, low, high, color=colors[side], alpha=0.15, lw=0)
            by_epoch.plot(steps[width - 1:], smooth, color=colors[side], label=f"{labels[side]}, mean of {len(runs)}")
            steps, mean, low, high = band(runs, "val")
            by_val.fill_between(steps, low, high, color=colors[side], alpha=0.15, lw=0)
            by_val.plot(steps, mean, "o-", ms=2, color=colors[side], label=f"{labels[side]}, mean of {len(runs)}")
        title = f"EGG {row['model']}, population {row['population']}"
        by_epoch.set(xlabel="epoch", ylabel="training bits/byte (population)", title=title)
        by_val.set(xlabel="epoch", ylabel="validation bits/byte", title=f"{title}: {row['verdict']}")
        by_epoch.legend(fontsize=8)
        by_val.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def config_row(depth, dim, population, epochs, runs, tolerance):
    finals = {side: [r["val"][-1][1] for r in runs[side] if isinstance(r, dict)] for side in SIDES}
    stats = {side: summary(v) if v and len(v) == len(runs[side]) else None for side, v in finals.items()}
    row = {"model": f"{depth}x{dim}", "population": population, "epochs": epochs, "seeds": len(runs["eggnog"]),
           "nano_egg_val_bpb": stats["nano_egg"], "eggnog_val_bpb": stats["eggnog"],
           "difference": None if stats["nano_egg"] is None
           else round(stats["eggnog"]["mean"] - stats["nano_egg"]["mean"], 4),
           "verdict": verdict(stats["eggnog"], stats["nano_egg"], tolerance),
           "wall_s": {side: [r["wall_s"] for r in runs[side] if isinstance(r, dict)] for side in SIDES},
           "runs": runs}
    failed = [r for r in runs["nano_egg"] if isinstance(r, str)]
    if failed:
        row["nano_egg_why_not"] = failed[0]
    return row


def table_row(row):
    def cell(s):
        return None if s is None else f"{s['mean']:.3f} ± {s['std']:.3f}"

    return {"model": row["model"], "population": row["population"], "epochs": row["epochs"], "seeds": row["seeds"],
            "nano_egg": cell(row["nano_egg_val_bpb"]), "eggnog": cell(row["eggnog_val_bpb"]),
            "difference": row["difference"], "verdict": row["verdict"]}


@app.command(help=cli_help(__doc__))
@user_errors
def main(configs: str = typer.Option(DEFAULT_CONFIGS, help="depth x dim : population, comma-separated."),
         epochs: int = typer.Option(DEFAULT_EPOCHS, help="Updates (epochs) of every run."),
         seeds: int = typer.Option(DEFAULT_SEEDS, help="Seeds per side and config (0..n-1)."),
         validate_every: int = typer.Option(10, help="Epochs between validations (nano-egg's default: 10)."),
         val_rows: int = typer.Option(64, help="Validation windows, each from a zero state."),
         val_tokens: int = typer.Option(256, help="Bytes scored per validation window."),
         tolerance: float = typer.Option(0.02, help="Bits/byte within which the means match whatever their spread."),
         quick: bool = typer.Option(False, help=f"{QUICK_SEEDS} seeds x {QUICK_EPOCHS} epochs of {QUICK_CONFIGS}: "
                                                "2 min 20 s on 2 cores."),
         peer_python: str = typer.Option(None, help="A Python with jax, jaxlib, tyro, scipy, tqdm, huggingface_hub "
                                                    "(required unless --no-peer)."),
         nano_egg: str = typer.Option(None, help="A checkout of ESHyperscale/nano-egg (the folder of run.py)."),
         no_peer: bool = typer.Option(False, help="eggnog's runs alone."),
         peer_script: str = typer.Option(str(PEER_SCRIPT), hidden=True),
         timeout: int = typer.Option(7200, help="Seconds one run of either side may take.")):
    if quick:
        configs, epochs, seeds = QUICK_CONFIGS, QUICK_EPOCHS, QUICK_SEEDS
    chosen = parse_configs(configs)
    if min(epochs, seeds, validate_every, val_rows, val_tokens, timeout) < 1 or tolerance < 0:
        raise BadInput("--epochs, --seeds, --validate-every, --val-rows, --val-tokens and --timeout must be positive, "
                       "--tolerance not negative")
    if epochs % validate_every:
        raise BadInput(f"--epochs {epochs} is not a multiple of --validate-every {validate_every}: "
                       "both sides must validate at the last epoch")
    if no_peer == (peer_python is not None) or (peer_python is None) != (nano_egg is None):
        raise BadInput("give --peer-python ENV/bin/python and --nano-egg NANO_EGG_CHECKOUT, or --no-peer")
    peer_info = None if no_peer else check_peer(peer_python, peer_script, os.path.abspath(nano_egg))
    rows, started = [], time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="eggnog-dynamics-") as tmp:
        folder = Path(tmp)
        data_info = write_data(folder, val_rows, val_tokens)
        rows_n = data_info["val_rows"]
        for depth, dim, population in chosen:
            runs = {side: [] for side in SIDES}
            for seed in range(seeds):
                if not no_peer:
                    runs["nano_egg"].append(nano_run(peer_python, peer_script, os.path.abspath(nano_egg), folder,
                                                     depth, dim, population, epochs, seed, validate_every, rows_n,
                                                     timeout))
                runs["eggnog"].append(eggnog_run(folder, depth, dim, population, epochs, seed, validate_every,
                                                 rows_n, val_tokens, timeout))
                print(f"{depth}x{dim} population {population} seed {seed}: "
                      + ", ".join(f"{side} {r[-1]['val'][-1][1]:.3f}" if r and isinstance(r[-1], dict)
                                  else f"{side} {r[-1] if r else 'not run'}" for side, r in runs.items()),
                      flush=True)
            rows.append(config_row(depth, dim, population, epochs, runs, tolerance))
    print_table([table_row(r) for r in rows],
                ["model", "population", "epochs", "seeds", "nano_egg", "eggnog", "difference", "verdict"])
    for row in rows:
        if row.get("nano_egg_why_not"):
            print(f"{row['model']} population {row['population']}: nano-egg {row['nano_egg_why_not']}")
    extra = {"settings": {"sigma_shift": 4, "alpha": 4.0, "alpha_decay_timestep": 1000, "use_clt": True,
                          "fast_fitness": True, "noise_reuse": 1, "group_size": 2, "tokens_per_update": 100,
                          "validate_every": validate_every, "tolerance_bpb": tolerance, "seeds": list(range(seeds)),
                          "same_bytes": True, **data_info},
             "peer": peer_info, "wall_seconds": round(time.perf_counter() - started, 1)}
    # one file per grid: a grid too long for one sitting runs as several commands
    grid = "_".join(f"{depth}x{dim}p{population}" for depth, dim, population in chosen)
    path = write_result(f"dynamics_nano_egg-{grid}", "cpu", rows, extra)
    draw(rows, path.with_suffix(".png"))
    print(f"wrote {path} and {path.with_suffix('.png').name}")


if __name__ == "__main__":
    app()
