"""Table 1 of the zero-order RNN paper: seconds per step and peak memory of BPTT and CD-RGE (96 and
512 probes) on the paper's multi-head LSTMs (100k ... 1.1B parameters), in series and distributed
(`reduce` and `seeds`), printed beside the authors' corrected A40 numbers, with JSON and a PNG chart
in bench/results/.

    python -m bench.zorn_paper.table1 --sizes 100k,1M            # what fits on a CPU in reasonable time
    python -m bench.zorn_paper.table1 --sizes 100k,1M,10M,100M,1.1B --ranks 8 --backend cuda

Every cell runs twice, each time in its own processes (bench/zorn_paper/table1_cell.py; distributed cells under
`mpiexec -n --ranks`), on one fixed batch of --batch-size sequences of 2 + 10 tokens: once timing
--steps steps after --warmup (seconds per step and its split into eval, exchange and update), once
measuring memory over one step after --warmup (peak of the process and of its own arrays, per rank;
training/memory.py says what each figure is on the CPU and on a GPU). A cell is skipped, with the
reason recorded, when its estimated memory exceeds what the device has free, when it has no such
form (BPTT is not distributed), or when its estimated run time (one timed forward pass times the
passes of its steps) exceeds --max-cell-seconds. Distributed cells on one device (all ranks sharing
one GPU, or the CPU) are labelled so: they measure the algorithm and its communication, not a
multi-GPU speed-up.
"""

import json
import os
import shutil
import subprocess
import sys

import typer

from bench.report import check_python, peer_result, print_table, write_result
from bench.zorn_paper.table1_grid import METHODS, MODES, SIZES, a40_seconds, fits, torch_loop_command
from eggnog.runtime.cli import cli_help, user_errors

app = typer.Typer(add_completion=False, pretty_exceptions_enable=False, rich_markup_mode=None)
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _choices(text, allowed, flag):
    from eggnog.runtime.errors import BadInput

    chosen = [x.strip() for x in text.split(",") if x.strip()]
    bad = [x for x in chosen if x not in allowed]
    if bad or not chosen:
        raise BadInput(f"--{flag} {text!r}: choose from {', '.join(allowed)}")
    return chosen


def available_bytes(backend):
    """Free memory of the device cells will run on."""
    if backend == "cuda":
        out = subprocess.run([sys.executable, "-c", "from eggnog.kernels.core.cuda_api import cuda; "
                              "print(cuda.current_context().get_memory_info()[0])"],
                             capture_output=True, text=True, cwd=ROOT, timeout=300)
        return int(out.stdout.strip())
    with open("/proc/meminfo") as f:
        info = dict(line.split(":", 1) for line in f)
    return int(info["MemAvailable"].split()[0]) * 1024


def run_cell(size, method, mode, ranks, args, backend, timeout, measure):
    steps = args["steps"] if measure == "time" else 1
    command = [sys.executable, "-m", "bench.zorn_paper.table1_cell", "--size", size, "--method", method,
               "--mode", mode, "--measure", measure, "--steps", str(steps), "--warmup", str(args["warmup"]),
               "--batch-size", str(args["batch_size"]), "--task", args["task"], "--backend", backend,
               "--max-seconds", str(timeout)]
    env = dict(os.environ, EGGNOG_PROGRESS="0",
               PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    if mode != "series":
        env["NUMBA_NUM_THREADS"] = str(max(1, (os.cpu_count() or 1) // ranks))
        command = [shutil.which("mpiexec") or "mpiexec", "-n", str(ranks)] + command
    try:
        out = subprocess.run(command, capture_output=True, text=True, env=env, timeout=2 * timeout + 300)
    except subprocess.TimeoutExpired:
        return {"skipped": f"ran far past its estimate (--max-cell-seconds {timeout})"}
    lines = [line for line in out.stdout.splitlines() if line.startswith("{")]
    if out.returncode or not lines:
        return {"skipped": f"failed (exit {out.returncode}): " + (out.stderr.strip().splitlines() or ["?"])[-1]}
    return json.loads(lines[-1])


def torch_peer(torch_python, size, method, args, device, timeout):
    """The plain PyTorch loop on the same cell, on the same device; its JSON or a sentence saying why
    there is none."""
    steps, warmup = (args["steps"], args["warmup"]) if METHODS[method] == 0 else (2, 1)  # a CD-RGE step takes seconds
    return peer_result(torch_loop_command(torch_python, size, method, args["batch_size"], steps, warmup, device),
                       timeout)


def peer_columns(torch_python, size, method, args, device, timeout, ours):
    """torch_s_per_step and speed_vs_torch (torch seconds / eggnog seconds: above 1, eggnog is faster), or
    torch_why_not."""
    if not torch_python:
        return {"torch_why_not": "not run: no --torch-python given"}
    got = torch_peer(torch_python, size, method, args, device, 3 * timeout)
    if not isinstance(got, dict):
        return {"torch_why_not": f"torch {got}"}
    return {"torch_s_per_step": got["s_per_step"], "speed_vs_torch": round(got["s_per_step"] / ours, 3),
            "torch_loss_first_bits": got["loss_first_bits"], "torch_loss_after_bits": got["loss_after_bits"]}


def largest_mib(per_rank):
    known = [v for v in per_rank or [] if v is not None]
    return round(max(known) / 2**20) if known else "-"


def chart(rows, path):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4.5))
    sizes = list(SIZES)
    for method, mode in sorted({(r["method"], r["mode"]) for r in rows}):
        ours = [(sizes.index(r["size"]), r["s_per_step"]) for r in rows
                if r["method"] == method and r["mode"] == mode and r.get("s_per_step")]
        if ours:
            ax.plot(*zip(*ours), marker="o", label=f"{method} {mode} (ours)")
    for method, kind in sorted({(r["method"], "series" if r["mode"] == "series" else "distributed") for r in rows}):
        a40 = [(i, a40_seconds(s, method, kind)) for i, s in enumerate(sizes) if a40_seconds(s, method, kind)]
        if a40:
            label = f"{method} {kind}{' x8' if kind == 'distributed' else ''} (A40, paper)"
            ax.plot(*zip(*a40), linestyle="--", marker="x", alpha=0.6, label=label)
    ax.set_xticks(range(len(sizes)), sizes)
    ax.set_yscale("log")
    ax.set_xlabel("LSTM parameters")
    ax.set_ylabel("seconds per step")
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


@app.command(help=cli_help(__doc__))
@user_errors
def main(sizes: str = "100k,1M", methods: str = "bptt,cdrge96,cdrge512", modes: str = "series,reduce,seeds",
         ranks: int = 4, steps: int = 5, warmup: int = 1, batch_size: int = 1024, task: str = "char_lm",
         max_cell_seconds: int = 900, backend: str = typer.Option(None, help="auto, cpu or cuda."),
         torch_python: str = typer.Option(None, help="A Python with torch: the plain PyTorch loop runs beside each "
                                          "series cell, on the same device.")):
    from eggnog.kernels.core.backend import resolve_name
    from eggnog.runtime.errors import BadInput

    chosen_sizes, chosen_methods = _choices(sizes, list(SIZES), "sizes"), _choices(methods, list(METHODS), "methods")
    chosen_modes = _choices(modes, MODES, "modes")
    if ranks < 2 or steps < 5 or warmup < 1 or batch_size < 1 or max_cell_seconds < 1:
        raise BadInput("need --ranks >= 2, --steps >= 5 (a median of at least five), --warmup >= 1, "
                       "--batch-size >= 1 and --max-cell-seconds >= 1")
    if torch_python is not None:
        check_python(torch_python, "--torch-python")
    device = resolve_name(backend)
    free = available_bytes(device)
    args = {"steps": steps, "warmup": warmup, "batch_size": batch_size, "task": task}
    shared = "ranks share the CPU" if device == "cpu" else "ranks share one GPU"
    rows = []
    for method in chosen_methods:
        for mode in chosen_modes:
            for size in chosen_sizes:
                row = {"size": size, "method": method, "mode": mode, "ranks": 1 if mode == "series" else ranks,
                       "a40_s_per_step": a40_seconds(size, method, mode)}
                ok, gib = fits(size, method, batch_size, free if mode == "series" else free // ranks)
                if method == "bptt" and mode != "series":
                    row["skipped"] = "BPTT has no distributed form here"
                elif not ok:
                    row["skipped"] = f"needs about {gib} GiB per process, more than is free"
                else:
                    row.update(run_cell(size, method, mode, ranks, args, device, max_cell_seconds, "time"))
                    if "skipped" not in row:
                        memory = run_cell(size, method, mode, ranks, args, device, max_cell_seconds, "memory")
                        if "skipped" in memory:
                            row["memory_skipped"] = memory["skipped"]
                        else:
                            row.update({k: v for k, v in memory.items() if k not in row})
                if mode != "series":
                    row["note"] = shared
                elif "s_per_step" in row:
                    row.update(peer_columns(torch_python, size, method, args, device, max_cell_seconds,
                                            row["s_per_step"]))
                rows.append(row)
                print(json.dumps(row), flush=True)
    table = [{"method": r["method"], "mode": r["mode"], "size": r["size"],
              "s_per_step": round(r["s_per_step"], 4) if "s_per_step" in r else "-",
              "A40": r["a40_s_per_step"] if r["a40_s_per_step"] is not None else "-",
              "torch_s": round(r["torch_s_per_step"], 4) if "torch_s_per_step" in r else "-",
              "speed_vs_torch": r.get("speed_vs_torch", "-"),
              "process_MiB": largest_mib(r.get("peak_process_bytes")), "own_MiB": largest_mib(r.get("peak_own_bytes")),
              "note": r.get("skipped", r.get("memory_skipped", r.get("note", "")))} for r in rows]
    print_table(table, ["method", "mode", "size", "s_per_step", "A40", "torch_s", "speed_vs_torch", "process_MiB",
                        "own_MiB", "note"])
    for note in sorted({r["torch_why_not"] for r in rows if "torch_why_not" in r}):
        print(f"PyTorch peer: {note}")
    print("memory: the largest over ranks; the JSON has every rank's")
    device_name = next((r["device"] for r in rows if "device" in r), device)
    extra = {"batch_size": batch_size, "task": task, "steps": steps, "warmup": warmup, "memory_steps": 1,
             "a40_source": "authors' corrected README table (A40 46 GB, distributed = 8 GPUs)"}
    path = write_result("table1", device_name, rows, extra)
    chart(rows, path.with_suffix(".png"))
    print(f"wrote {path} and {path.with_suffix('.png').name}")


if __name__ == "__main__":
    app()
