"""Figure 1 of the zero-order RNN paper: a DNC (H = M = W = 128 s, one read head, embedding 32,
vocabulary 100) overfitting one fixed batch of the copy task, BPTT with SGD against CD-RGE and FDRAS at
the same probe count; loss against step and against wall time, and the peak memory of each method,
with the authors' README log drawn beside ours as reference points (labelled as theirs). Writes JSON
and a PNG to bench/results/.

    python -m bench.zorn_paper.figure1               # CPU size: a few minutes on 2 cores
    python -m bench.zorn_paper.figure1 --preset paper --backend cuda  # s = 8, 512 probes, L = 100

Each method starts from the same initial weights (--seed) and reads the same batch; the loss of a
step is what the method reports (BPTT: the batch's loss; CD-RGE and FDRAS: the mean of their probes'
losses, as the authors report it); memory is the
peak of NumPy's and Python's own allocations during the method's steps (tracemalloc) on the CPU, and
numba's device allocations on a GPU (training/memory.py).
"""

import math
import time

import typer

from bench.report import print_table, write_result
from eggnog.runtime.cli import cli_help, user_errors

app = typer.Typer(add_completion=False, pretty_exceptions_enable=False, rich_markup_mode=None)

# The authors' README log (CD-RGE with 512 probes on an A40; BPTT with SGD): loss at iterations 0-3,
# PyTorch's cross entropy in nats (5.3 at the start lies above ln 100 = 4.6 and far below log2 100 =
# 6.6, where a fresh model starts in bits); drawn in bits per token beside ours.
NATS_TO_BITS = 1 / math.log(2)
THEIRS = {"cdrge": {"loss": [5.299, 4.759, 4.348, 3.950], "seconds_per_step": 80.0},
          "bptt": {"loss": [5.484, 5.416, 5.349, 5.282], "seconds_per_step": 0.5}}
PRESETS = {"paper": {"scale": 8.0, "probes": 512, "seq_length": 100, "steps": 4}}
METHODS = ("bptt", "cdrge", "fdras")
COLORS = {"bptt": "C0", "cdrge": "C1", "fdras": "C2"}


def method_config(method, scale, probes, seq_length, batch, lr_rge, lr_sgd, seed):
    from eggnog.zorn.rge.run import RgeRunConfig

    width = max(2, round(128 * scale))
    return RgeRunConfig(model="dnc", solver=method, input_size=32, hidden_size=width, memory_size=width,
                        head_size=width, num_reads=1, task="copy", min_seq_len=seq_length, max_seq_len=seq_length,
                        batch_size=batch, probes=probes, lr=lr_sgd if method == "bptt" else lr_rge,
                        sigma=lr_rge, optimizer="sgd", seed=seed, steps=1)


def run_method(cfg, steps, backend):
    """(losses per step, seconds since the start at each step, peak bytes) of one method."""
    from eggnog.runtime.world import init_world
    from eggnog.training.memory import MemoryMeter
    from eggnog.zorn.rge.run import RgeRun
    from eggnog.zorn.tasks import make_task

    run = RgeRun(cfg, init_world(), backend)
    batch = make_task("copy", cfg.min_seq_len, cfg.max_seq_len, cfg.seed).batch(0, cfg.batch_size)
    run.train_step(batch)  # compiles; its update is undone below, so every method starts alike
    run = RgeRun(cfg, init_world(), backend)
    meter = MemoryMeter(backend, trace_host=True)
    losses, clock, started = [], [], time.perf_counter()
    for _ in range(steps):
        losses.append(float(run.train_step(batch)))
        run.step += 1
        backend.synchronize()
        clock.append(time.perf_counter() - started)
        meter.sample()
    peak = meter.peaks()
    meter.stop()
    return losses, clock, peak["peak_own_bytes"] or peak["peak_process_bytes"]


def draw(results, path):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (by_step, by_time, memory) = plt.subplots(1, 3, figsize=(15, 4.5))
    for method, r in results.items():
        by_step.plot(range(len(r["loss"])), r["loss"], "o-", ms=3, color=COLORS[method], label=f"{method} (ours)")
        by_time.plot(r["seconds"], r["loss"], "o-", ms=3, color=COLORS[method])
    for method, theirs in THEIRS.items():
        steps, bits = range(len(theirs["loss"])), [x * NATS_TO_BITS for x in theirs["loss"]]
        by_step.plot(steps, bits, "x--", color=COLORS[method], label=f"{method} (authors' README, A40, s = 8)")
        by_time.plot([(i + 1) * theirs["seconds_per_step"] for i in steps], bits, "x--", color=COLORS[method])
    by_step.set(xlabel="step", ylabel="loss (bits per token)", title="DNC overfitting one copy batch")
    by_time.set(xlabel="wall time (s)", ylabel="loss (bits per token)", xscale="log", title="against wall time")
    names = list(results)
    memory.bar(names, [results[m]["peak_bytes"] / 2**20 for m in names])
    memory.set(ylabel="peak MiB", title="peak memory per method")
    by_step.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


@app.command(help=cli_help(__doc__))
@user_errors
def main(scale: float = typer.Option(0.125, help="s: H = M = W = 128 s."),
         probes: int = typer.Option(32, help="Probes of CD-RGE and FDRAS per step."),
         seq_length: int = typer.Option(10, help="L: copy sequences of this length."),
         batch_size: int = typer.Option(8, help="Sequences in the one batch."),
         steps: int = typer.Option(20, help="Steps of each method."),
         lr: float = typer.Option(0.01, help="CD-RGE and FDRAS learning rate and epsilon."),
         sgd_lr: float = typer.Option(0.001, help="BPTT's SGD learning rate."),
         preset: str = typer.Option(None, help="paper: s = 8, 512 probes, L = 100, 4 steps."),
         methods: str = typer.Option(",".join(METHODS), help="Comma-separated subset of bptt, cdrge, fdras."),
         seed: int = typer.Option(0),
         backend: str = typer.Option("cpu", help="auto, cpu or cuda.")):
    from eggnog.kernels.core.backend import select_backend
    from eggnog.runtime.errors import BadInput

    if preset is not None:
        if preset not in PRESETS:
            raise BadInput(f"unknown --preset {preset!r}: choose {', '.join(PRESETS)}")
        scale, probes, seq_length, steps = (PRESETS[preset][k] for k in ("scale", "probes", "seq_length", "steps"))
    chosen_methods = [m.strip() for m in methods.split(",") if m.strip()]
    if not chosen_methods or set(chosen_methods) - set(METHODS):
        raise BadInput(f"--methods must name some of {', '.join(METHODS)}, got {methods!r}")
    if scale <= 0 or probes < 1 or seq_length < 1 or batch_size < 1 or steps < 1 or lr <= 0 or sgd_lr <= 0:
        raise BadInput("--scale, --probes, --seq-length, --batch-size, --steps, --lr and --sgd-lr must be positive")
    chosen = select_backend(backend)
    results, rows = {}, []
    for method in chosen_methods:
        cfg = method_config(method, scale, probes, seq_length, batch_size, lr, sgd_lr, seed)
        cfg.check(1)
        losses, clock, peak = run_method(cfg, steps, chosen)
        results[method] = {"loss": [round(x, 5) for x in losses], "seconds": [round(t, 4) for t in clock],
                           "peak_bytes": int(peak or 0)}
        rows.append({"method": method, "first loss": round(losses[0], 4), "last loss": round(losses[-1], 4),
                     "s/step": round(clock[-1] / steps, 4), "peak MiB": round((peak or 0) / 2**20, 1)})
    print_table(rows, ["method", "first loss", "last loss", "s/step", "peak MiB"])
    settings = {"scale": scale, "hidden": max(2, round(128 * scale)), "probes": probes, "seq_length": seq_length,
                "batch_size": batch_size, "steps": steps, "lr": lr, "sgd_lr": sgd_lr, "seed": seed}
    path = write_result("figure1", chosen.device_name, rows,
                        {"settings": settings, "series": results, "theirs": THEIRS})
    png = path.with_suffix(".png")
    draw(results, png)
    print(path)
    print(png)


if __name__ == "__main__":
    app()
