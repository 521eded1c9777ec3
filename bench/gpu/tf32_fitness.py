"""Float EGGROLL's population forward with fp32 products and with TF32 products (kernels/layers/matmul_tf32.py),
on the same members, noise and windows: how far TF32 moves each member's loss against the spread of the
losses over the population, and what that does to the z-scored fitness, the antithetic pair signs and
the update direction. This is the evidence for --forward-precision auto (TF32 on a GPU).

    python -m bench.gpu.tf32_fitness --dim 256 --depth 4 --population 256 --bptt-steps 200

The model is trained first for --bptt-steps AdamW steps on the data (so the losses are not those of a
random model), then each of --epochs noise epochs evaluates the population both ways. TF32 is an
operation on rounded inputs, so the CPU twins give what the tensor cores give up to fp32 accumulation
order: the figures do not depend on the device that computes them.
"""


import numpy as np
import typer

from bench.report import print_table, write_result
from eggnog.runtime.cli import cli_help, user_errors
from eggnog.runtime.errors import BadInput

app = typer.Typer(add_completion=False, pretty_exceptions_enable=False, rich_markup_mode=None)

DATA = ("default", "random")


def byte_source(data, seed):
    """A function (rows, length) -> uint8 windows from the default corpus or from random bytes."""
    rng = np.random.default_rng(seed)
    if data == "random":
        return lambda rows, length: rng.integers(0, 256, (rows, length)).astype(np.uint8)
    from eggnog.corpus.default import default_corpus

    train = np.asarray(default_corpus().train)

    def windows(rows, length):
        starts = rng.integers(0, train.size - length, rows)
        return np.stack([train[s:s + length] for s in starts])

    return windows


def trained_params(model, ops, windows, steps, seed):
    from eggnog.training.optimizers import make_optimizer

    optimizer = make_optimizer("adamw", ops.to_device(model.init_params(seed)), 3e-3)
    losses = []
    for _ in range(steps):
        batch = windows(8, 129)
        loss, grads, _ = model.loss_and_grad(ops, model.views(optimizer.train_params()), batch[:, :-1], batch[:, 1:])
        optimizer.step(model.flatten_on(grads, ops))
        losses.append(loss)
    return optimizer.train_params(), (float(np.mean(losses[-10:])) if losses else None)


def compare(model, ops, params, cfg_args, epoch, windows):
    """One noise epoch evaluated with fp32 and with TF32 products: a result row."""
    from eggnog.evolution.float_eggroll import FloatEggroll, FloatEggrollConfig, zscore_fitness
    from eggnog.training.optimizers import make_optimizer

    results = {}
    for precision in ("fp32", "tf32"):
        cfg = FloatEggrollConfig(**cfg_args, forward_precision=precision)
        optimizer = make_optimizer("sgd", ops.to_device(np.array(params)), 1.0, momentum=0.0)
        es = FloatEggroll(model, cfg, ops, optimizer, 0, step=epoch)
        losses = es.evaluate(windows)
        results[precision] = (losses, zscore_fitness(losses, cfg.group_size, cfg.fitness),
                              ops.to_host(es.gradient(losses)).astype(np.float64))
    (l32, f32, g32), (ltf, ftf, gtf) = results["fp32"], results["tf32"]
    spread = float(np.std(l32))
    moved = np.abs(ltf - l32)
    pairs32, pairstf = np.sign(f32[0::2] - f32[1::2]), np.sign(ftf[0::2] - ftf[1::2])
    return {
        "epoch": epoch,
        "mean_loss_bits": round(float(l32.mean()), 4),
        "loss_spread_bits": float(f"{spread:.3g}"),
        "max_loss_moved_bits": float(f"{moved.max():.3g}"),
        "max_moved_over_spread": float(f"{moved.max() / spread:.3g}") if spread > 0 else None,
        "fitness_1_minus_corr": float(f"{1.0 - np.corrcoef(f32, ftf)[0, 1]:.3g}"),
        "pair_signs_kept": f"{int(np.sum(pairs32 == pairstf))}/{pairs32.size}",
        "gradient_1_minus_cos": float(f"{1.0 - g32 @ gtf / (np.linalg.norm(g32) * np.linalg.norm(gtf)):.3g}"),
    }


@app.command(help=cli_help(__doc__))
@user_errors
def main(dim: int = typer.Option(64, help="Model width."),
         depth: int = typer.Option(2, help="Layers."),
         population: int = typer.Option(64, help="Members (even)."),
         group_size: int = typer.Option(8, help="Members sharing a window (even)."),
         tokens: int = typer.Option(128, help="Bytes each member reads."),
         sigma: float = typer.Option(0.01, help="Perturbation scale."),
         bptt_steps: int = typer.Option(100, help="AdamW steps (8 x 128 bytes) before the comparison."),
         epochs: int = typer.Option(3, help="Noise epochs compared."),
         data: str = typer.Option("default", help="default (the embedded corpus) or random bytes."),
         backend: str = typer.Option("cpu", help="cpu, or cuda for the tensor-core kernel itself."),
         seed: int = typer.Option(0, help="Seed of the model, the windows and the noise.")):
    if data not in DATA:
        raise BadInput(f"--data must be one of {', '.join(DATA)}, got {data!r}")
    if min(dim, depth, tokens, epochs) < 1 or bptt_steps < 0:
        raise BadInput("--dim, --depth, --tokens and --epochs must be positive and --bptt-steps not negative")
    cfg_args = {"population": population, "group_size": group_size, "sigma": sigma, "tokens_per_update": tokens}
    from eggnog.evolution.float_eggroll import FloatEggrollConfig

    FloatEggrollConfig(**cfg_args).check()
    from eggnog.kernels.core.backend import select_backend
    from eggnog.kernels.core.registry import ops_for
    from eggnog.models.mingru import MinGruConfig, MinGruModel

    chosen = select_backend(backend)
    ops = ops_for(chosen.name)
    model = MinGruModel(MinGruConfig(dim, depth))
    windows = byte_source(data, seed)
    params, trained_loss = trained_params(model, ops, windows, bptt_steps, seed)
    rows = []
    for epoch in range(epochs):
        group_windows = np.repeat(windows(population // group_size, tokens + 1), group_size, axis=0)
        rows.append(compare(model, ops, ops.to_host(params), cfg_args, epoch, group_windows))
    print_table(rows, list(rows[0]))
    extra = {"model": f"{dim}x{depth}", "params": model.n_params, **cfg_args, "bptt_steps": bptt_steps,
             "trained_loss_bits": trained_loss, "data": data}
    print(f"wrote {write_result('tf32_fitness', chosen.device_name, rows, extra)}")


if __name__ == "__main__":
    app()
