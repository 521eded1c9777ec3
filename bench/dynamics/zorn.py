"""Learning like the original: CD-RGE (96 probes) and BPTT training curves of eggnog beside the authors'
zero_order_rnn series trainer (rge_series_experiments.train, run unedited from a checkout) on the same
copy-task problem, from the same initial weights, on the CPU.

    python -m bench.dynamics.zorn --peer-python ENV/bin/python --peer-repo CHECKOUT     # copy, 200 steps, lr 0.1, 0.3
    python -m bench.dynamics.zorn --peer-python ENV/bin/python --peer-repo CHECKOUT --quick   # copy, 60 steps, lr 0.1
    python -m bench.dynamics.zorn --peer-python ENV/bin/python --peer-repo CHECKOUT --cells overfit,copy \\
        --steps 1000 --overfit-steps 100 --lrs 0.1 --eval-every 50 --spread-seeds 1       # the committed run
    python -m bench.dynamics.zorn --no-peer                                                # eggnog's curves alone

The default took 8 min 42 s on 2 cores with another job running, --quick 2 min 22 s; the committed run
(1000 steps, the peer's 1.4 to 2.2 s a step on one core being the long pole) took 43 minutes.

The peer's environment: `python3 -m venv ENV && ENV/bin/pip install torch numpy` and a checkout of
sisl/zero_order_rnn (the figures in docs/originals.md: HEAD 49cddcf); bench/peers/zorn_torch_train.py drives it.

Cells. "copy" is Table 2's CPU cell in the authors' flags (--task copy --seq_length 4 --hidden_size 32
--num_heads 4 --head_size 8 --input_size 16 --micro_batch_size 64 --num_perturbations 96 --distribution
rad): training lengths 2-4, validation 5-54 (the authors' split, seq_length + 1 .. + 50). "overfit" is the
README's Table 1 workload (overfit one fixed batch, --overfit_to_one_batch_flag, at the tiny LSTM's
lr = eps 0.1) scaled to this machine: hidden 64, embedding 32, 64 copy samples of lengths 2-10 (the
tiny width, 240, costs ~10 s a step on either side here); the claim is that the loss on that batch falls
fast (the runs of docs/originals.md stop below 0.1 nats).

Without FlashRNN (any CPU) the authors' LSTM is their fallback, a dense nn.LSTM + nn.Linear with torch's
default initialisation (heads are ignored); eggnog trains its LSTM with one head (the same dense
recurrence) from the peer's initial tensors (W_in = W_ih^T, R = W_hh per gate, b = b_ih + b_hh). The
first score of both sides, before any step, must agree: the JSON's init_difference. Both sides see the
same batches (eggnog's task generator, handed to the peer in order) and are scored on the same held-out
samples.

Objective. The authors' loss is cross-entropy in nats over their target positions: answer letters 2..L
and the one or two spaces after (the first letter is never a target). eggnog's own objective is bits
over all L answer letters; at the same lr = eps its CD-RGE step is 1/ln 2 = 1.44x larger. The eggnog
curves that are compared train on the authors' positions in nats (eggnog's CD-RGE and model, only the
mask and the unit changed), so the lr means the same step; "eggnog_cdrge_own" trains on eggnog's own
objective at the first lr, as bench/zorn_paper/table2.py does. Update of both:
theta -= eps * sum_i (L+ - L-)/(2 eps n) z_i with eps = lr; BPTT: AdamW betas (0.99, 0.999) at --bptt-lr
(the authors' --use_adam).

Scores every --eval-every steps: "clean" = held-out samples of the training lengths (overfit: the fixed
batch itself), "val" = the validation lengths, each in the authors' nats and in eggnog's bits over all
answer letters. Verdict per curve pair, on the final clean and val nats: "match" when both differ by at
most --tolerance (default 0.1 nats; the JSON records the spread of eggnog's final scores over
--spread-seeds extra probe seeds), else "eggnog better" / "peer better" by the clean loss.

The peer is slow on a CPU (its loss loops over samples in Python, 192 times a step: ~1.4 s/step at
the copy cell), so peer curves run as --peer-jobs background processes of one thread each while
eggnog's run in the foreground on --eggnog-threads. Writes bench/results/dynamics_zorn-cpu-<date>.json
and a .png beside it.
"""

import math
import os
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import typer

from bench.peers import FOLDER as PEERS
from bench.report import check_python, peer_result, print_table, write_result
from eggnog.runtime.cli import cli_help, user_errors
from eggnog.runtime.errors import BadInput

app = typer.Typer(add_completion=False, pretty_exceptions_enable=False, rich_markup_mode=None)

PEER_SCRIPT = PEERS / "zorn_torch_train.py"
LN2 = math.log(2.0)
PROBES = 96
SPACE = 94  # string.printable.index(" ")


@dataclass(frozen=True)
class Cell:
    hidden: int
    heads: int  # the authors' flag; their CPU fallback is one dense nn.LSTM
    embed: int
    batch: int
    low: int
    high: int
    overfit: bool
    lrs: tuple


CELLS = {"copy": Cell(32, 4, 16, 64, 2, 4, False, (0.1, 0.3)), "overfit": Cell(64, 4, 32, 64, 2, 10, True, (0.1,))}


def parse_lrs(text):
    try:
        lrs = tuple(float(v) for v in text.split(","))
    except ValueError:
        lrs = ()
    if not lrs or not all(0 < v < 10 for v in lrs):
        raise BadInput(f"--lrs {text!r} is not a list of positive rates like 0.1,0.3")
    return lrs


def verdict(ours, theirs, tolerance):
    """(clean, val) nats of eggnog against the peer's (lower is better)."""
    if theirs is None:
        return "peer not run"
    if all(abs(a - b) <= tolerance for a, b in zip(ours, theirs)):
        return "match"
    return "eggnog better" if ours[0] < theirs[0] else "peer better"


# ---- the shared problem -------------------------------------------------------------------------
def sequences(batch):
    """Whole (B, W) token rows of a TaskBatch (inputs plus the last target)."""
    return np.concatenate([batch.inputs, batch.targets[:, -1:]], axis=1).astype(np.uint8)


def authors_mask(seqs):
    """The targets of the authors' compute_task_loss on shifted (B, W - 1) targets: after the first
    space (at L), positions L + 1 .. min(2 L + 1, W - 2): answer letters 2..L, then up to two spaces."""
    rows, width = seqs.shape
    mask = np.zeros((rows, width - 1), np.float32)
    for r in range(rows):
        n = int(np.argmax(seqs[r] == SPACE))
        mask[r, n + 1:min(2 * n + 1, width - 2) + 1] = 1.0
    return mask


def build_problem(cell, steps, samples, seed):
    """Training batches (steps, B, W), and held-out clean and val samples with eggnog's and the
    authors' masks."""
    from eggnog.zorn.tasks import make_task, validation_task

    task = make_task("copy", cell.low, cell.high, seed)
    train = np.stack([sequences(task.batch(s, cell.batch)) for s in range(1 if cell.overfit else steps)])
    clean = task.batch(0, cell.batch) if cell.overfit else validation_task("copy", cell.low, cell.high, seed).batch(
        0, samples)
    val = validation_task("copy", cell.high + 1, cell.high + 50, seed).batch(0, samples)
    problem = {"train": train}
    for name, batch in (("clean", clean), ("val", val)):
        problem.update({name: sequences(batch), name + "_mask": batch.mask.astype(np.float32),
                        name + "_authors_mask": authors_mask(sequences(batch))})
    return problem


# ---- eggnog's side ------------------------------------------------------------------------------
def eggnog_params(model, tensors):
    """eggnog's flat LSTM parameters (one head) holding the peer's nn.LSTM + nn.Linear + embedding."""
    h = model.cfg.hidden_size
    p = {"W_in": tensors["weight_ih"].T, "R": tensors["weight_hh"].reshape(4, 1, h, h),
         "b": (tensors["bias_ih"] + tensors["bias_hh"]).reshape(4, 1, h), "states0": np.zeros((2, 1, h)),
         "W_proj": tensors["proj_weight"], "b_proj": tensors["proj_bias"], "embed": tensors["embed"]}
    flat = np.zeros(model.n_params, np.float32)
    for name, *_ in model.specs:
        start, shape = model.offsets[name]
        flat[start:start + math.prod(shape)] = np.asarray(p[name], np.float32).reshape(-1)
    return flat


def batch_of(seqs, mask):
    from eggnog.zorn.batch import TaskBatch

    return TaskBatch(np.ascontiguousarray(seqs[:, :-1]), np.ascontiguousarray(seqs[:, 1:]), mask)


class ScaledLoss:
    """The model's loss times `scale` (the authors' objective in nats, or ours in bits), as CD-RGE sees it."""

    def __init__(self, model, scale):
        self.model, self.scale = model, scale

    def loss(self, backend_name, params, batch):
        return self.model.loss(backend_name, params, batch) * self.scale


def eggnog_curve(cell, problem, init, method, lr, objective, bptt_lr, eval_every, seed):
    """Logged losses and [step, clean nats, val nats, clean bits, val bits] scores of one eggnog run.
    objective "authors": their target positions in nats; "own": all answer letters in bits."""
    from eggnog.kernels.core.backend import select_backend
    from eggnog.models.lstm import LstmConfig, LstmModel
    from eggnog.runtime.world import init_world
    from eggnog.training.optimizers import AdamW
    from eggnog.zorn.rge.trainer import RgeConfig, RgeTrainer

    backend = select_backend("cpu")
    model = LstmModel(LstmConfig(100, cell.embed, cell.hidden, 1))
    theta = eggnog_params(model, init)
    mask, scale = ("_authors_mask", LN2) if objective == "authors" else ("_mask", 1.0)
    held = {f"{name}{m}": batch_of(problem[name], problem[name + m]) for name in ("clean", "val")
            for m in ("_authors_mask", "_mask")}
    if method == "cdrge":
        trainer = RgeTrainer(ScaledLoss(model, scale), RgeConfig(probes=PROBES, lr=lr), backend, theta, seed,
                             world=init_world())
        params = lambda: trainer.theta  # noqa: E731
    else:
        opt = AdamW(backend.to_device(theta), bptt_lr, (0.99, 0.999), weight_decay=0.0)
        params = opt.train_params

    def score(step):
        loss = {k: model.loss("cpu", params(), b) for k, b in held.items()}
        return [step, loss["clean_authors_mask"] * LN2, loss["val_authors_mask"] * LN2, loss["clean_mask"],
                loss["val_mask"]]

    losses, evals, seconds = [], [], 0.0
    steps = problem["steps"]
    for step in range(steps):
        if step % eval_every == 0:
            evals.append(score(step))
        rows = problem["train"][0 if cell.overfit else step]
        batch = batch_of(rows, problem["train_mask"][0 if cell.overfit else step] if objective == "authors"
                         else problem["train_own_mask"][0 if cell.overfit else step])
        begin = time.perf_counter()
        if method == "cdrge":
            loss = trainer.train_step(batch)
        else:
            loss, grad = model.loss_and_grad("cpu", opt.train_params(), batch)
            opt.step(grad * np.float32(scale))
            loss *= scale
        seconds += time.perf_counter() - begin
        losses.append(float(loss))
    evals.append(score(steps))
    return {"train_loss": losses, "evals": evals, "s_per_step": seconds / max(steps, 1)}


# ---- the peer ------------------------------------------------------------------------------------
def check_peer(peer_python, peer_repo, script):
    check_python(peer_python, "--peer-python")
    if not (Path(peer_repo) / "rge_series_experiments.py").is_file():
        raise BadInput(f"--peer-repo {peer_repo} is not a checkout of zero_order_rnn (no rge_series_experiments.py)")
    got = peer_result([peer_python, str(script), "--repo", str(peer_repo), "--check"], 300,
                      missing="has no torch and numpy or does not run the authors' code")
    if not isinstance(got, dict):
        raise BadInput(f"--peer-python {peer_python} {got}")
    return got


def peer_command(peer_python, script, repo, cell, problem_path, steps, eval_every, seed):
    command = [peer_python, str(script), "--repo", str(repo), "--problem", str(problem_path), "--steps", str(steps),
               "--eval-every", str(eval_every), "--seed", str(seed), "--hidden", str(cell.hidden),
               "--heads", str(cell.heads), "--embed", str(cell.embed), "--seq-length", str(cell.high),
               "--probes", str(PROBES)]
    return command + (["--overfit"] if cell.overfit else [])


# ---- report ---------------------------------------------------------------------------------------
COLORS = {"peer": "tab:orange", "eggnog": "tab:blue", "own": "tab:green"}


def draw(cells, path):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(len(cells), 3, figsize=(16, 4.2 * len(cells)), squeeze=False)
    for row, (name, curves) in zip(axes, cells.items()):
        for label, curve in curves.items():
            if curve is None:
                continue
            side = "own" if label.endswith("_own") else label.split("_")[0]
            style = "--" if "bptt" in label else "-"
            alpha = 0.5 if "0.3" in label else 1.0
            loss = np.asarray(curve["train_loss"])
            width = max(1, min(25, len(loss) // 10))
            row[0].plot(np.arange(width - 1, len(loss)), np.convolve(loss, np.ones(width) / width, "valid"), style,
                        color=COLORS[side], alpha=alpha, label=label)
            evals = np.asarray(curve["evals"])
            row[1].plot(evals[:, 0], evals[:, 1], style, color=COLORS[side], alpha=alpha, label=label)
            row[2].plot(evals[:, 0], evals[:, 2], style, color=COLORS[side], alpha=alpha, label=label)
        row[0].set(xlabel="step", ylabel="logged loss (moving mean)", title=f"{name}: logged training loss")
        row[1].set(xlabel="step", ylabel="nats (authors' positions)", title=f"{name}: clean (training lengths)")
        row[2].set(xlabel="step", ylabel="nats (authors' positions)", title=f"{name}: validation (longer)")
        for ax in row:
            ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def final(curve):
    return None if curve is None else [round(curve["evals"][-1][i], 4) for i in (1, 2)]


def run_cell(name, cell, steps, args, folder, pool):
    """Every curve of a cell: peer runs submitted to `pool`, eggnog's run here meanwhile."""
    problem = build_problem(cell, steps, args["samples"], args["seed"])
    problem["train_mask"] = np.stack([authors_mask(rows) for rows in problem["train"]])
    problem["train_own_mask"] = np.stack([own_mask(rows) for rows in problem["train"]])
    problem["steps"] = steps
    path = folder / f"problem-{name}.npz"
    np.savez(path, **{k: v for k, v in problem.items() if k in ("train", "clean", "val", "clean_mask", "val_mask")})
    pairs = [("cdrge", lr) for lr in cell.lrs] + ([("bptt", args["bptt_lr"])] if not cell.overfit else [])
    futures, init = {}, None
    if args["peer"]:
        python, repo, script = args["peer"]
        init_path = folder / f"init-{name}.npz"
        got = peer_result(peer_command(python, script, repo, cell, path, 0, 1, args["seed"]) +
                          ["--init-out", str(init_path)], 300)
        if not isinstance(got, dict):
            raise BadInput(f"the authors' code did not build its model: {got}")
        init = dict(np.load(init_path, allow_pickle=False))
        env = dict(os.environ, OMP_NUM_THREADS="1", MKL_NUM_THREADS="1")
        for method, lr in pairs:
            command = peer_command(python, script, repo, cell, path, steps, args["eval_every"], args["seed"])
            futures[f"peer_{method}_{lr:g}"] = pool.submit(
                peer_result, command + ["--method", method, "--lr", repr(lr), "--init-in", str(init_path)],
                args["timeout"], env)
    else:
        init = torch_default_init(cell, args["seed"])
    curves = {}
    for method, lr in pairs:
        curves[f"eggnog_{method}_{lr:g}"] = eggnog_curve(cell, problem, init, method, lr, "authors", lr,
                                                         args["eval_every"], args["seed"])
    if not cell.overfit:
        curves[f"eggnog_cdrge_{cell.lrs[0]:g}_own"] = eggnog_curve(cell, problem, init, "cdrge", cell.lrs[0], "own",
                                                                   0, args["eval_every"], args["seed"])
    spread = [final(eggnog_curve(cell, problem, init, "cdrge", cell.lrs[0], "authors", 0, args["eval_every"], s))
              for s in range(args["seed"] + 1, args["seed"] + 1 + args["spread_seeds"])]
    peers = {}
    for label, future in futures.items():
        got = future.result()
        peers[label] = got if isinstance(got, dict) else None
        if not isinstance(got, dict):
            print(f"{name} {label}: the authors' code {got}")
    rows = []
    for method, lr in pairs:
        ours, peer = curves[f"eggnog_{method}_{lr:g}"], peers.get(f"peer_{method}_{lr:g}")
        theirs = final(peer)
        rows.append({"cell": name, "method": method, "lr": lr, "eps": lr if method == "cdrge" else None,
                     "steps": steps, "peer_clean_nats": None if theirs is None else theirs[0],
                     "eggnog_clean_nats": final(ours)[0], "peer_val_nats": None if theirs is None else theirs[1],
                     "eggnog_val_nats": final(ours)[1],
                     "start_clean_nats": round(ours["evals"][0][1], 4),
                     "init_difference": None if peer is None else round(abs(peer["evals"][0][1] -
                                                                            ours["evals"][0][1]), 6),
                     "verdict": verdict(final(ours), theirs, args["tolerance"]),
                     "peer_s_per_step": None if peer is None else round(peer["s_per_step"], 4),
                     "eggnog_s_per_step": round(ours["s_per_step"], 4)})
    for label, peer in peers.items():
        curves[label] = peer
    finals = np.array([final(curves[f"eggnog_cdrge_{cell.lrs[0]:g}"]), *spread])
    own = curves.get(f"eggnog_cdrge_{cell.lrs[0]:g}_own")
    info = {"cell": {**cell.__dict__, "lrs": list(cell.lrs), "probes": PROBES, "steps": steps,
                     "val_lengths": [cell.high + 1, cell.high + 50], "held_out_samples": args["samples"]},
            "own_objective_final_nats": final(own),
            "seed_spread": None if not spread else {
                "lr": cell.lrs[0], "finals_nats": finals.tolist(), "range_clean": round(float(np.ptp(finals[:, 0])), 4),
                "range_val": round(float(np.ptp(finals[:, 1])), 4)},
            "curves": curves}
    return rows, info


def own_mask(rows):
    """eggnog's own mask (every answer letter, as zorn/tasks.py builds it) of whole copy rows."""
    width = rows.shape[1]
    mask = np.zeros((rows.shape[0], width - 1), np.float32)
    for r in range(rows.shape[0]):
        n = int(np.argmax(rows[r] == SPACE))
        mask[r, n:2 * n] = 1.0
    return mask


def torch_default_init(cell, seed):
    """Without a peer: torch's default scheme for the fallback's tensors (embedding N(0, 1), nn.LSTM and
    nn.Linear U(+-1/sqrt(hidden))."""
    rng = np.random.default_rng(seed)
    h, e, bound = cell.hidden, cell.embed, 1.0 / math.sqrt(cell.hidden)
    shapes = {"weight_ih": (4 * h, e), "weight_hh": (4 * h, h), "bias_ih": (4 * h,), "bias_hh": (4 * h,),
              "proj_weight": (100, h), "proj_bias": (100,)}
    init = {k: rng.uniform(-bound, bound, s).astype(np.float32) for k, s in shapes.items()}
    return {**init, "embed": rng.standard_normal((100, e)).astype(np.float32)}


@app.command(help=cli_help(__doc__))
@user_errors
def main(cells: str = typer.Option("copy", help="Comma-separated: copy (Table 2's CPU cell), overfit (Table 1's "
                                                "workload, tiny width)."),
         steps: int = typer.Option(200, help="Steps of the copy cell."),
         overfit_steps: int = typer.Option(100, help="Steps of the overfit cell."),
         lrs: str = typer.Option(None, help="CD-RGE lr = eps of the copy cell, comma-separated.",
                                 show_default="0.1,0.3"),
         bptt_lr: float = typer.Option(0.01, help="AdamW's rate of the BPTT pair (the authors' LSTM tests: 0.01)."),
         eval_every: int = typer.Option(25, help="Steps between scores."),
         samples: int = typer.Option(128, help="Held-out samples of each score."),
         tolerance: float = typer.Option(0.1, help="Final nats within which the sides match."),
         spread_seeds: int = typer.Option(0, help="Extra eggnog CD-RGE runs (other probe seeds) measuring the spread."),
         seed: int = typer.Option(0, help="Seed of the batches, held-out samples, initial weights and probes."),
         quick: bool = typer.Option(False, help="Copy cell, 60 steps, lr 0.1: about 2 minutes."),
         peer_python: str = typer.Option(None, help="A Python with torch and numpy (required unless --no-peer)."),
         peer_repo: str = typer.Option(None, help="A checkout of sisl/zero_order_rnn."),
         peer_jobs: int = typer.Option(2, help="Peer runs at a time, one thread each."),
         eggnog_threads: int = typer.Option(1, help="Numba threads of eggnog's runs."),
         no_peer: bool = typer.Option(False, help="eggnog's curves alone."),
         peer_script: str = typer.Option(str(PEER_SCRIPT), hidden=True),
         timeout: int = typer.Option(7200, help="Seconds one peer run may take.")):
    chosen = [c.strip() for c in cells.split(",") if c.strip()]
    if not chosen or set(chosen) - set(CELLS):
        raise BadInput(f"--cells {cells!r} must name some of {', '.join(CELLS)}")
    if quick:
        chosen, steps, lrs = ["copy"], 60, lrs or "0.1"
    copy_lrs = parse_lrs(lrs) if lrs is not None else CELLS["copy"].lrs
    if min(steps, overfit_steps, eval_every, samples, peer_jobs, eggnog_threads) < 1 or spread_seeds < 0:
        raise BadInput("--steps, --overfit-steps, --eval-every, --samples, --peer-jobs and --eggnog-threads must be "
                       "positive, --spread-seeds not negative")
    if not (bptt_lr > 0 and tolerance >= 0):
        raise BadInput("--bptt-lr must be positive and --tolerance not negative")
    given = (peer_python is not None, peer_repo is not None)
    if given != (not no_peer, not no_peer):
        raise BadInput("give --peer-python ENV/bin/python and --peer-repo CHECKOUT (zero_order_rnn), or --no-peer")
    peer_info = None if no_peer else check_peer(peer_python, peer_repo, peer_script)
    import numba

    numba.set_num_threads(min(eggnog_threads, numba.config.NUMBA_NUM_THREADS))
    from eggnog.kernels.core.backend import select_backend

    backend = select_backend("cpu")
    args = {"samples": samples, "seed": seed, "eval_every": eval_every, "bptt_lr": bptt_lr, "tolerance": tolerance,
            "spread_seeds": spread_seeds, "timeout": timeout,
            "peer": None if no_peer else (peer_python, Path(peer_repo).resolve(), peer_script)}
    rows, infos, started = [], {}, time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="eggnog-dynamics-zorn-") as tmp, ThreadPoolExecutor(peer_jobs) as pool:
        for name in chosen:
            cell = CELLS[name] if name != "copy" else Cell(**{**CELLS["copy"].__dict__, "lrs": copy_lrs})
            cell_rows, infos[name] = run_cell(name, cell, steps if name == "copy" else overfit_steps, args,
                                              Path(tmp), pool)
            rows += cell_rows
    print_table(rows, ["cell", "method", "lr", "steps", "start_clean_nats", "peer_clean_nats", "eggnog_clean_nats",
                       "peer_val_nats", "eggnog_val_nats", "verdict", "peer_s_per_step", "eggnog_s_per_step"])
    extra = {"settings": {"probes": PROBES, "distribution": "rademacher", "eps": "lr", "bptt": f"AdamW {bptt_lr} "
                          "betas (0.99, 0.999)", "eval_every": eval_every, "tolerance_nats": tolerance, "seed": seed,
                          "loss_unit": "nats over the authors' target positions (answer letters 2..L and up to two "
                                       "spaces after); *_bits: bits over every answer letter",
                          "peer_model": "nn.LSTM + nn.Linear fallback (no FlashRNN on a CPU), fp32",
                          "eggnog_model": "LSTM with one head from the peer's initial tensors"},
             "peer": peer_info, "wall_seconds": round(time.perf_counter() - started, 1), "cells": infos}
    path = write_result("dynamics_zorn", backend.device_name, rows, extra)
    draw({name: info["curves"] for name, info in infos.items()}, path.with_suffix(".png"))
    print(f"wrote {path} and {path.with_suffix('.png').name}")


if __name__ == "__main__":
    app()
