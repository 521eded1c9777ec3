"""MinGRU LM training by BPTT on the CPU, eggnog beside minGRU-pytorch, in one run on one machine:
seconds per optimiser step of the same model (minLM's: vocabulary 256, expansion 1.5, feed-forward
multiplier 4) on the same (batch, seq + 1) byte window.

    python -m bench.throughput.mingru_side_by_side --torch-python ENV/bin/python --configs 64x2:8x512,256x4:8x512
    python -m bench.throughput.mingru_side_by_side --backend cuda --configs 1024x8:8x2048  # 105M parameters, GPU

Configs are dim x depth : batch x seq. eggnog: MinGruModel.loss_and_grad on the CPU backend (the fp32
twins, BLAS capped as Backend does), the gradients flattened, an AdamW step (training/optimizers.py).
The peer: bench/peers/mingru_torch_step.py with `--torch-python` (minLM(return_loss=True), backward, AdamW).
Each figure is the median of --steps steps after --warmup; the sides run one after the other, each in a
process of its own for the peer. speedup = peer seconds / eggnog seconds (above 1: eggnog is faster).
With `--backend cuda` eggnog's step runs on the GPU, parameters, optimiser state and gradients resident
there, and the peer runs on the GPU too (`--device cuda`).
"""


import numpy as np
import typer

from bench.peers import FOLDER as PEERS
from bench.report import check_python, median_seconds, peer_result, print_table, write_result
from eggnog.runtime.cli import cli_help, user_errors
from eggnog.runtime.errors import BadInput

app = typer.Typer(add_completion=False, pretty_exceptions_enable=False, rich_markup_mode=None)



def parse_configs(text):
    try:
        configs = []
        for item in text.split(","):
            model, shape = item.split(":")
            dim, depth = (int(v) for v in model.split("x"))
            batch, seq = (int(v) for v in shape.split("x"))
            if min(dim, depth, batch, seq) < 1:
                raise ValueError
            configs.append((dim, depth, batch, seq))
        return configs
    except ValueError:
        raise BadInput(f"--configs {text!r} is not a list like 64x2:8x512 (dim x depth : batch x seq)") from None


def bptt_step(backend, dim, depth, batch, seq, precision="fp32"):
    """(model, step): one eggnog MinGRU BPTT step on a fixed (batch, seq + 1) window, AdamW resident on
    the backend, its products at `precision` (also what bench/gpu/profile.py profiles and the static
    report's goals trace)."""
    from eggnog.kernels.core.registry import ops_for
    from eggnog.models.mingru import MinGruConfig, MinGruModel
    from eggnog.training.optimizers import make_optimizer

    ops = ops_for(backend.name, precision)
    model = MinGruModel(MinGruConfig(dim, depth))
    optimizer = make_optimizer("adamw", ops.to_device(model.init_params(0)), 1e-3)
    window = np.random.default_rng(0).integers(0, 256, (batch, seq + 1)).astype(np.uint8)

    def step():
        _, grads, _ = model.loss_and_grad(ops, model.views(optimizer.train_params()), window[:, :-1], window[:, 1:])
        optimizer.step(model.flatten_on(grads, ops))

    return model, step


def eggnog_seconds(backend, dim, depth, batch, seq, steps, warmup):
    _, step = bptt_step(backend, dim, depth, batch, seq)
    return median_seconds(step, steps, warmup, backend.synchronize)


def torch_seconds(torch_python, dim, depth, batch, seq, steps, warmup, timeout, device="cpu"):
    command = [torch_python, str(PEERS / "mingru_torch_step.py"), "--dim", str(dim), "--depth", str(depth),
               "--batch", str(batch), "--seq", str(seq), "--steps", str(steps), "--warmup", str(warmup),
               "--device", device]
    got = peer_result(command, timeout)
    return got if isinstance(got, dict) else f"minGRU-pytorch {got}"


@app.command(help=cli_help(__doc__))
@user_errors
def main(configs: str = typer.Option("64x2:8x512,256x4:8x512", help="dim x depth : batch x seq, comma-separated."),
         steps: int = typer.Option(5, help="Timed steps per side."),
         warmup: int = typer.Option(1, help="Untimed steps first (compilation)."),
         torch_python: str = typer.Option(None, help="A Python with torch and minGRU-pytorch."),
         backend: str = typer.Option("cpu", help="cpu, or cuda for both steps on the GPU."),
         timeout: int = typer.Option(1800, help="Seconds the peer may take per config.")):
    chosen = parse_configs(configs)
    if steps < 1 or warmup < 0:
        raise BadInput("--steps must be positive and --warmup not negative")
    if torch_python is not None:
        check_python(torch_python, "--torch-python")
    from eggnog.kernels.core.backend import select_backend

    chosen_backend = select_backend(backend)
    rows = []
    for dim, depth, batch, seq in chosen:
        ours = eggnog_seconds(chosen_backend, dim, depth, batch, seq, steps, warmup)
        if torch_python:
            theirs = torch_seconds(torch_python, dim, depth, batch, seq, steps, warmup, timeout,
                                   "cuda" if chosen_backend.name == "cuda" else "cpu")
        else:
            theirs = "not run: no --torch-python given"
        row = {"model": f"{dim}x{depth}", "batch": batch, "seq": seq, "eggnog_s_per_step": round(ours, 4)}
        if isinstance(theirs, dict):
            row.update(peer_s_per_step=round(theirs["s_per_step"], 4), speedup=round(theirs["s_per_step"] / ours, 2),
                       peer_detail=theirs)
        else:
            row.update(peer_s_per_step=None, speedup=None, peer_why_not=theirs)
        rows.append(row)
    print_table(rows, ["model", "batch", "seq", "eggnog_s_per_step", "peer_s_per_step", "speedup"])
    for row in rows:
        if row.get("peer_why_not"):
            print(f"{row['model']}: {row['peer_why_not']}")
    extra = {"steps": steps, "warmup": warmup}
    print(f"wrote {write_result('mingru_side_by_side', chosen_backend.device_name, rows, extra)}")


if __name__ == "__main__":
    app()
