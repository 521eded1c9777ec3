"""Learning like the original: training curves of eggnog's MinGRU LM beside minGRU-pytorch's minLM on the
same problem, in bits per byte, on the CPU.

    python -m bench.dynamics.mingru --peer-python ENV/bin/python              # 64x2 and 256x4: 11 to 15 min, 2 cores
    python -m bench.dynamics.mingru --peer-python ENV/bin/python --quick      # 64x2, 300 steps, ~1.5 min
    python -m bench.dynamics.mingru --no-peer                                 # eggnog's two curves alone

The peer's environment (PyTorch on the CPU and minGRU-pytorch 0.2.1, nothing from eggnog):

    python3 -m venv ENV && ENV/bin/pip install torch==2.13.0 minGRU-pytorch    # pin torch if it pulls another

Both sides train minLM's architecture (vocabulary 256, expansion 1.5, feed-forward x4; configs are
dim x depth, optionally :steps; 256x4 runs 120 steps by default to keep the run within 15 minutes on 2
cores, --configs 64x2:500,256x4:500 takes about 35) on batch 8 x seq 512 byte windows with minGRU-pytorch's train.py
settings: learning rate 1e-4, Adam (here AdamW with weight decay 0, the same step), betas (0.9, 0.999),
eps 1e-8, the gradient norm of the loss in nats clipped at 0.5, no schedule. The data are the embedded
default corpus eggnog trains on (eggnog.corpus.default: the standard library's sources, its own
train/validation split), written out to raw byte files that both sides read, and both see exactly the
same windows: the bench draws every step's window starts (eggnog's RandomWindows, seed --seed) and the
validation windows (the first --val-rows windows of the validation split, as eggnog's validation takes
them) and hands the list to the peer (bench/peers/mingru_torch_train.py, run with --peer-python).

eggnog's loss and gradients are in bits; the bench multiplies the gradient by ln 2 before clipping and
stepping, so the clip threshold and Adam's eps act on the same numbers as in PyTorch. eggnog starts from
PyTorch's default initialisation of the same tensors (--init torch: embedding N(0, 1), every weight and
bias U(+-1/sqrt(fan_in)), norms at one), not from the same values; --init gruboros uses eggnog's own.
The third curve is eggnog with Schedule-Free AdamW (training/optimizers.py) at the same learning rate
(--sf-lr), clipped alike, validated at its averaged point x.

Curves: training bits/byte of every step (the loss the step's gradient came from) and validation
bits/byte every --val-every steps and at the end. Verdict per config, on the final validation figure:
"match" when eggnog-AdamW is within --tolerance bits/byte of the peer (default 0.05, a little above the
spread between seeds of one side measured at 64x2, see docs/originals.md), else "eggnog better" or "peer
better". Writes bench/results/dynamics_mingru-cpu-<date>.json and a .png beside it.
"""

import json
import math
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

PEER_SCRIPT = PEERS / "mingru_torch_train.py"
LN2 = math.log(2.0)
CURVES = ("peer_adamw", "eggnog_adamw", "eggnog_sf_adamw")
DEFAULT_CONFIGS = "64x2:500,256x4:120"
QUICK_CONFIGS = "64x2:300"


def parse_configs(text, steps):
    """[(dim, depth, steps)] from 'DIMxDEPTH[:STEPS],...'."""
    try:
        configs = []
        for item in text.split(","):
            model, _, count = item.partition(":")
            dim, depth = (int(v) for v in model.split("x"))
            n = int(count) if count else steps
            if min(dim, depth, n) < 1:
                raise ValueError
            configs.append((dim, depth, n))
        return configs
    except ValueError:
        raise BadInput(f"--configs {text!r} is not a list like 64x2:500,256x4 "
                       "(dim x depth, optionally :steps)") from None


def verdict(ours, theirs, tolerance):
    """Compare final validation bits/byte (lower is better)."""
    if theirs is None:
        return "peer not run"
    if abs(ours - theirs) <= tolerance:
        return "match"
    return "eggnog better" if ours < theirs else "peer better"


# ---- the shared problem -------------------------------------------------------------------------
def write_problem(folder, batch, seq, steps_max, val_rows, val_every, seed):
    """The corpus split written as raw bytes, and the plan of windows both sides read."""
    from eggnog.corpus.default import default_corpus
    from eggnog.corpus.samplers import RandomWindows

    corpus = default_corpus()
    train, val = np.asarray(corpus.train, np.uint8), np.asarray(corpus.val, np.uint8)
    length = seq + 1
    if len(val) < length:
        raise BadInput(f"the validation split ({len(val)} bytes) is shorter than one window of {length} bytes")
    val_rows = min(val_rows, len(val) // length)
    sampler = RandomWindows(train, length, seed)
    plan = {"train_file": str(folder / "train.bin"), "val_file": str(folder / "val.bin"), "window": length,
            "val_every": val_every, "val_starts": [r * length for r in range(val_rows)],
            "train_starts": [sampler.starts(step, 0, batch).tolist() for step in range(steps_max)]}
    train.tofile(plan["train_file"])
    val.tofile(plan["val_file"])
    info = {"corpus": Path(corpus.path).name, "train_bytes": int(len(train)), "val_bytes": int(len(val)),
            "val_rows": val_rows}
    return plan, train, val, info


def plan_for(plan, steps, folder, name):
    """The plan cut to `steps` steps, written for the peer."""
    cut = dict(plan, train_starts=plan["train_starts"][:steps])
    path = folder / f"plan-{name}.json"
    path.write_text(json.dumps(cut))
    return cut, path


# ---- eggnog's side ------------------------------------------------------------------------------
def torch_default_init(model, seed):
    """PyTorch's defaults for minLM's tensors: nn.Embedding N(0, 1); nn.Linear weight and bias
    U(+-1/sqrt(fan_in)) (kaiming_uniform with a = sqrt(5)); RMSNorm ones."""
    rng = np.random.default_rng(seed)
    flat = np.empty(model.n_params, np.float32)
    fan_in = {}
    for name, shape, _, _ in model.specs:
        if len(shape) == 2:
            fan_in[name] = shape[1]
    for name, shape, _, _ in model.specs:
        start, _ = model.offsets[name]
        n = math.prod(shape)
        if name == "embed":
            values = rng.normal(0.0, 1.0, n)
        elif name == "norm" or name.endswith("_norm"):
            values = np.ones(n)
        else:  # a weight (out, in), or a bias bounded by its weight's fan-in
            bound = 1.0 / math.sqrt(fan_in[name[:-len("_bias")]] if name.endswith("_bias") else shape[1])
            values = rng.uniform(-bound, bound, n)
        flat[start:start + n] = values
    return flat


def eggnog_curve(dim, depth, plan, train, val, optimizer, lr, clip, init, seed, warmup_steps=0):
    from eggnog.kernels.core.registry import ops_for
    from eggnog.models.mingru import MinGruConfig, MinGruModel
    from eggnog.models.mingru_eval import val_bpb
    from eggnog.runtime.world import init_world
    from eggnog.training.optimizers import make_optimizer

    ops = ops_for("cpu")
    model = MinGruModel(MinGruConfig(dim, depth))
    params = torch_default_init(model, seed) if init == "torch" else model.init_params(seed)
    opt = make_optimizer(optimizer, params, lr, warmup_steps=warmup_steps)
    length = plan["window"]
    val_batch = np.stack([val[s:s + length] for s in plan["val_starts"]])

    def validate(step):  # the trainers' validation, on the plan's windows
        return [step, val_bpb(model, ops, opt.eval_params(), val_batch, init_world())]

    train_bpb, val_curve, seconds = [], [], 0.0
    steps = len(plan["train_starts"])
    for step, starts in enumerate(plan["train_starts"]):
        if step % plan["val_every"] == 0:
            val_curve.append(validate(step))
        window = np.stack([train[s:s + length] for s in starts])
        begin = time.perf_counter()
        bits, grads, _ = model.loss_and_grad(ops, model.views(opt.train_params()), window[:, :-1], window[:, 1:])
        grad = model.flatten_on(grads, ops) * np.float32(LN2)  # the gradient of the loss in nats, as torch's
        if clip > 0:  # torch.nn.utils.clip_grad_norm_
            norm = float(np.sqrt(np.dot(grad.astype(np.float64), grad.astype(np.float64))))
            grad *= np.float32(min(1.0, clip / (norm + 1e-6)))
        opt.step(grad)
        seconds += time.perf_counter() - begin
        train_bpb.append(bits)
    val_curve.append(validate(steps))
    return {"train_bpb": train_bpb, "val": val_curve, "s_per_step": seconds / steps, "params": model.n_params}


# ---- the peer ------------------------------------------------------------------------------------
def check_peer(peer_python, script):
    check_python(peer_python, "--peer-python")
    got = peer_result([peer_python, str(script), "--check"], 300,
                      missing="has no torch and minGRU-pytorch or does not run the peer")
    if not isinstance(got, dict):
        raise BadInput(f"--peer-python {peer_python} {got}")
    return got


def peer_curve(peer_python, script, plan_path, dim, depth, lr, clip, seed, timeout):
    command = [peer_python, str(script), "--plan", str(plan_path), "--dim", str(dim), "--depth", str(depth),
               "--lr", repr(lr), "--clip", repr(clip), "--seed", str(seed)]
    return peer_result(command, timeout)


# ---- report ---------------------------------------------------------------------------------------
def draw(rows, path):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    colors = {"peer_adamw": "tab:orange", "eggnog_adamw": "tab:blue", "eggnog_sf_adamw": "tab:green"}
    labels = {"peer_adamw": "minGRU-pytorch, AdamW", "eggnog_adamw": "eggnog, AdamW",
              "eggnog_sf_adamw": "eggnog, Schedule-Free AdamW"}
    fig, axes = plt.subplots(len(rows), 2, figsize=(12, 4 * len(rows)), squeeze=False)
    for (by_step, by_val), row in zip(axes, rows):
        for name, curve in row["curves"].items():
            if curve is None:
                continue
            train = np.asarray(curve["train_bpb"])
            width = max(1, min(20, len(train) // 10))
            smooth = np.convolve(train, np.ones(width) / width, mode="valid")
            by_step.plot(np.arange(len(train)), train, color=colors[name], alpha=0.2, lw=0.7)
            by_step.plot(np.arange(width - 1, len(train)), smooth, color=colors[name], label=labels[name])
            steps, bpb = zip(*curve["val"])
            by_val.plot(steps, bpb, "o-", ms=3, color=colors[name], label=labels[name])
        title = f"minLM {row['model']}, batch {row['batch']} x seq {row['seq']}, lr {row['lr']:g}"
        by_step.set(xlabel="step", ylabel="training bits/byte", title=title + f" (moving mean of {width})")
        by_val.set(xlabel="step", ylabel="validation bits/byte", title=f"{title}: {row['verdict']}")
        by_step.legend(fontsize=8)
        by_val.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def final_val(curve):
    return None if curve is None else round(curve["val"][-1][1], 4)


@app.command(help=cli_help(__doc__))
@user_errors
def main(configs: str = typer.Option(DEFAULT_CONFIGS, help="dim x depth, optionally :steps, comma-separated."),
         steps: int = typer.Option(500, help="Steps of a config that names none."),
         batch: int = typer.Option(8, help="Windows per step."),
         seq: int = typer.Option(512, help="Bytes per window (predicted; windows are seq + 1)."),
         lr: float = typer.Option(1e-4, help="AdamW's learning rate (minGRU-pytorch's train.py: 1e-4)."),
         sf_lr: float = typer.Option(None, help="Schedule-Free AdamW's learning rate (default: --lr)."),
         clip: float = typer.Option(0.5, help="Gradient norm clip on the loss in nats (train.py: 0.5; 0: none)."),
         init: str = typer.Option("torch", help="eggnog's initialisation: torch (the peer's scheme) or gruboros."),
         val_every: int = typer.Option(25, help="Steps between validations."),
         val_rows: int = typer.Option(8, help="Validation windows (seq + 1 bytes each)."),
         tolerance: float = typer.Option(0.05, help="Final validation bits/byte within which sides match."),
         seed: int = typer.Option(0, help="Seed of the windows and of both sides' initialisation."),
         quick: bool = typer.Option(False, help=f"--configs {QUICK_CONFIGS}: about 2 minutes."),
         peer_python: str = typer.Option(None, help="A Python with torch and minGRU-pytorch (required unless "
                                                    "--no-peer)."),
         no_peer: bool = typer.Option(False, help="eggnog's curves alone."),
         peer_script: str = typer.Option(str(PEER_SCRIPT), hidden=True),
         timeout: int = typer.Option(3600, help="Seconds the peer may take per config.")):
    if quick:
        configs = QUICK_CONFIGS
    chosen = parse_configs(configs, steps)
    sf_lr = lr if sf_lr is None else sf_lr
    if min(steps, batch, seq, val_every, val_rows) < 1:
        raise BadInput("--steps, --batch, --seq, --val-every and --val-rows must be positive")
    if not (lr > 0 and sf_lr > 0 and clip >= 0 and tolerance >= 0):
        raise BadInput("--lr and --sf-lr must be positive, --clip and --tolerance not negative")
    if init not in ("torch", "gruboros"):
        raise BadInput(f"--init {init!r} is not torch or gruboros")
    if no_peer == (peer_python is not None):
        raise BadInput("give --peer-python ENV/bin/python (torch and minGRU-pytorch installed) or --no-peer")
    peer_info = None if no_peer else check_peer(peer_python, peer_script)
    from eggnog.kernels.core.backend import select_backend

    backend = select_backend("cpu")
    rows, started = [], time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="eggnog-dynamics-") as tmp:
        folder = Path(tmp)
        plan, train, val, data_info = write_problem(folder, batch, seq, max(n for _, _, n in chosen), val_rows,
                                                    val_every, seed)
        for dim, depth, n in chosen:
            cut, plan_path = plan_for(plan, n, folder, f"{dim}x{depth}")
            curves = {"peer_adamw": None}
            why_not = "not run: --no-peer"
            if not no_peer:
                got = peer_curve(peer_python, peer_script, plan_path, dim, depth, lr, clip, seed, timeout)
                if isinstance(got, dict):
                    curves["peer_adamw"], why_not = got, None
                else:
                    why_not = f"minGRU-pytorch {got}"
            curves["eggnog_adamw"] = eggnog_curve(dim, depth, cut, train, val, "adamw", lr, clip, init, seed)
            curves["eggnog_sf_adamw"] = eggnog_curve(dim, depth, cut, train, val, "sf-adamw", sf_lr, clip, init, seed)
            ours, theirs = final_val(curves["eggnog_adamw"]), final_val(curves["peer_adamw"])
            row = {"model": f"{dim}x{depth}", "batch": batch, "seq": seq, "steps": n, "lr": lr, "sf_lr": sf_lr,
                   "peer_val_bpb": theirs, "eggnog_adamw_val_bpb": ours,
                   "eggnog_sf_adamw_val_bpb": final_val(curves["eggnog_sf_adamw"]),
                   "difference": None if theirs is None else round(ours - theirs, 4),
                   "verdict": verdict(ours, theirs, tolerance),
                   "peer_s_per_step": None if curves["peer_adamw"] is None
                   else round(curves["peer_adamw"]["s_per_step"], 4),
                   "eggnog_s_per_step": round(curves["eggnog_adamw"]["s_per_step"], 4),
                   "curves": curves}
            if why_not:
                row["peer_why_not"] = why_not
            rows.append(row)
    print_table(rows, ["model", "steps", "peer_val_bpb", "eggnog_adamw_val_bpb", "eggnog_sf_adamw_val_bpb",
                       "difference", "verdict", "peer_s_per_step", "eggnog_s_per_step"])
    for row in rows:
        if row.get("peer_why_not"):
            print(f"{row['model']}: {row['peer_why_not']}")
    extra = {"settings": {"batch": batch, "seq": seq, "lr": lr, "sf_lr": sf_lr, "clip_nats": clip, "init": init,
                          "weight_decay": 0.0, "betas": [0.9, 0.999], "eps": 1e-8, "val_every": val_every,
                          "tolerance_bpb": tolerance, "seed": seed, "same_windows": True, **data_info},
             "peer": peer_info, "wall_seconds": round(time.perf_counter() - started, 1)}
    path = write_result("dynamics_mingru", backend.device_name, rows, extra)
    draw(rows, path.with_suffix(".png"))
    print(f"wrote {path} and {path.with_suffix('.png').name}")


if __name__ == "__main__":
    app()
