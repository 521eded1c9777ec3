"""Table 1's CD-RGE series cells on the CPU, eggnog beside a plain PyTorch loop, in one run on one
machine: seconds per step of the same LSTM with the same batch size and probe count.

    python -m bench.zorn_paper.table1_side_by_side --torch-python ENV/bin/python --sizes 100k --probes 96

eggnog: bench/zorn_paper/table1_cell.py (`train_rge` steps: probes evaluated one after another on the CPU
backend, the fused update). The peer: bench/peers/table1_torch_loop.py run with `--torch-python` (a plain
PyTorch loop: in-place perturbation, one forward per sign, all cores). Each side runs in a process of
its own, one after the other; the load average is recorded around each. ratio = eggnog seconds per
step / PyTorch seconds per step (below 1: eggnog is faster). Without `--torch-python`, or where the
loop fails there, only eggnog's figure is given, with the reason.
"""

import os
import sys
from pathlib import Path

import typer

from bench.report import check_python, loadavg, peer_result, print_table, write_result
from bench.zorn_paper.table1_grid import LR, SIZES, torch_loop_command
from eggnog.runtime.cli import cli_help, user_errors
from eggnog.runtime.errors import BadInput

app = typer.Typer(add_completion=False, pretty_exceptions_enable=False, rich_markup_mode=None)

ROOT = Path(__file__).resolve().parents[2]


def eggnog_side(size, probes, batch, steps, warmup, timeout):
    env = dict(os.environ, EGGNOG_PROGRESS="0",
               PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    command = [sys.executable, "-m", "bench.zorn_paper.table1_cell", "--size", size, "--method", f"cdrge{probes}",
               "--mode", "series", "--measure", "time", "--steps", str(steps), "--warmup", str(warmup),
               "--batch-size", str(batch), "--max-seconds", str(timeout)]
    before = loadavg()
    return {"result": peer_result(command, timeout, env, "failed"), "loadavg": {"before": before, "after": loadavg()}}


def torch_side(torch_python, size, probes, batch, steps, warmup, timeout):
    command = torch_loop_command(torch_python, size, f"cdrge{probes}", batch, steps, warmup)
    before = loadavg()
    return {"result": peer_result(command, timeout), "loadavg": {"before": before, "after": loadavg()}}


@app.command(help=cli_help(__doc__))
@user_errors
def main(sizes: str = typer.Option("100k", help="Table 1 sizes, comma-separated."),
         probes: int = typer.Option(96, help="Probes per step: 96 or 512 (the Table 1 columns)."),
         batch: int = typer.Option(1024, help="Sequences per batch."),
         steps: int = typer.Option(2, help="Timed steps per side."),
         warmup: int = typer.Option(1, help="Untimed steps first."),
         torch_python: str = typer.Option(None, help="A Python with torch, to run the PyTorch loop."),
         timeout: int = typer.Option(1800, help="Seconds a side may take.")):
    chosen = [s.strip() for s in sizes.split(",") if s.strip()]
    if not chosen or any(s not in SIZES for s in chosen):
        raise BadInput(f"--sizes {sizes!r}: choose from {', '.join(SIZES)}")
    if probes not in LR:
        raise BadInput(f"--probes must be 96 or 512 (the Table 1 columns), got {probes}")
    if min(batch, steps) < 1 or warmup < 0:
        raise BadInput("--batch and --steps must be positive and --warmup not negative")
    if torch_python is not None:
        check_python(torch_python, "--torch-python")
    rows = []
    for size in chosen:
        ours = eggnog_side(size, probes, batch, steps, warmup, timeout)
        theirs = torch_side(torch_python, size, probes, batch, steps, warmup, timeout) if torch_python else \
            {"result": "not run: no --torch-python given"}
        row = {"size": size, "probes": probes, "batch": batch, "eggnog_loadavg": ours["loadavg"],
               "torch_loadavg": theirs.get("loadavg")}
        for side, got in (("eggnog", ours["result"]), ("torch", theirs["result"])):
            if isinstance(got, dict):
                row[f"{side}_s_per_step"] = round(got["s_per_step"], 3)
                row[f"{side}_detail"] = got
            else:
                row[f"{side}_s_per_step"] = None
                row[f"{side}_why_not"] = got
        both = row["eggnog_s_per_step"] and row["torch_s_per_step"]
        row["ratio"] = round(row["eggnog_s_per_step"] / row["torch_s_per_step"], 3) if both else None
        rows.append(row)
    print_table(rows, ["size", "probes", "batch", "eggnog_s_per_step", "torch_s_per_step", "ratio"])
    for row in rows:
        for side in ("eggnog", "torch"):
            if row.get(f"{side}_why_not"):
                print(f"{row['size']} {side}: {row[f'{side}_why_not']}")
    path = write_result("table1_side_by_side", "cpu", rows, {"steps": steps, "warmup": warmup})
    print(f"wrote {path}")


if __name__ == "__main__":
    app()
