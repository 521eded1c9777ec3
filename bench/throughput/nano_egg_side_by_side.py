"""EGG population evaluation on the CPU, eggnog beside nano-egg's JAX, in one run on one machine:
member-tokens/s of a perturbed evaluation (what an EGGROLL epoch spends before its update) at each
configuration, and of the plain one (batched inference of the same model).

  python -m bench.throughput.nano_egg_side_by_side --nano-python ENV/bin/python --nano-egg NANO_EGG_DIR
  python -m bench.throughput.nano_egg_side_by_side --backend cuda --configs 6x256:32768 --nano-python PY --nano-egg DIR

eggnog: `IntEggroll.evaluate` on the CPU backend, or the GPU with `--backend cuda` (one epoch call:
every member, byte and layer, noise regenerated inside, log-likelihood sums back on the host); byte
windows and hidden states are made before the timed region, the states carry from call to call.
nano-egg: its `generate_thread`, vmapped, shard-mapped and jit-compiled as its `run_evolution` does,
one call until `block_until_ready` (bench/peers/nano_egg_driver.py, run with the Python given by
`--nano-python`, in a process of its own so that the two share nothing but the machine). Neither side
times compilation, a warm-up call, the fitness conversion or the update (nor, in nano-egg, the copy of
its 1 GiB noise table that its update makes every epoch).

Both read `--tokens` bytes per member (1..255, no state reset) per call; each figure is the median of
`--repeat` calls. speedup = eggnog perturbed ÷ nano-egg perturbed member-tokens/s; ratio = perturbed
÷ plain of one implementation. Without `--nano-python`/`--nano-egg`, or where the driver fails there,
only eggnog's figures and its perturbed/plain ratio are given, with the reason. The load average of
the machine is recorded before and after each side's measurement.
"""

import os
from pathlib import Path

import numpy as np
import typer

from bench.peers import FOLDER as PEERS
from bench.report import check_python, loadavg, peer_result, print_table, timed_runs, write_result
from eggnog.runtime.cli import cli_help, user_errors
from eggnog.runtime.errors import BadInput

DRIVER = PEERS / "nano_egg_driver.py"
TIMED = {
    "eggnog": "IntEggroll.evaluate(windows, states, perturbed) on the run's backend: one egg_epoch call over all "
              "members, bytes and layers (noise regenerated inside), scores copied to the host; windows and states "
              "made before; median of repeat calls after one warm-up",
    "nano_egg": "run.py's generate_thread under jax.vmap, shard_map and jax.jit as in run_evolution (states "
                "donated), compiled ahead; one call until block_until_ready, inputs and states already on the "
                "device; epoch given (perturbed) or None (plain); median of repeat calls after one warm-up; "
                "excludes compilation, fitness conversion, the update and its noise-table copy",
}

app = typer.Typer(add_completion=False, pretty_exceptions_enable=False, rich_markup_mode=None)


def parse_configs(text):
    """'1x64:512,6x256:128' -> [(1, 64, 512), (6, 256, 128)]."""
    try:
        configs = []
        for item in text.split(","):
            shape, population = item.split(":")
            depth, dim = shape.split("x")
            configs.append((int(depth), int(dim), int(population)))
    except ValueError:
        raise BadInput(f"--configs {text!r} is not a list like 1x64:512,6x256:128 (depth x dim : population)") \
            from None
    return configs


def seconds_of(fn, repeat, sync):
    return timed_runs(fn, repeat, 1, sync)  # one warm-up: compilation and first touch of the buffers


def median(times):
    return sorted(times)[len(times) // 2]


def eggnog_side(backend, depth, dim, population, tokens, repeat):
    from eggnog.evolution.eggroll import IntEggroll, IntEggrollConfig
    from eggnog.models.egg import EggConfig, EggModel

    model = EggModel(EggConfig(depth, dim))
    cfg = IntEggrollConfig(population=population, tokens_per_update=tokens)
    cfg.check()
    strategy = IntEggroll(model, cfg, backend, model.init_params(0), 0)
    windows = np.random.default_rng(0).integers(1, 256, (population, tokens + 1), dtype=np.uint8)
    out, before = {}, loadavg()
    for perturbed, name in ((True, "perturbed"), (False, "plain")):
        states = backend.zeros((depth, population, dim), np.int8)
        out[name] = seconds_of(lambda p=perturbed, s=states: strategy.evaluate(windows, s, perturbed=p), repeat,
                               backend.synchronize)
    out["loadavg"] = {"before": before, "after": loadavg()}
    return out


def nano_side(nano_python, nano_egg, depth, dim, population, tokens, repeat, timeout, platform="cpu"):
    """The driver's result, or a sentence saying why there is none."""
    command = [nano_python, str(DRIVER), "--nano-egg", nano_egg, "--depth", str(depth), "--dim", str(dim),
               "--population", str(population), "--tokens", str(tokens), "--repeat", str(repeat),
               "--platform", platform]
    load = loadavg()
    got = peer_result(command, timeout)
    if not isinstance(got, dict):
        return f"nano-egg {got}"
    return {**got, "loadavg": {"before": load, "after": loadavg()}}


def check_nano_options(nano_python, nano_egg):
    if (nano_python is None) != (nano_egg is None):
        raise BadInput("--nano-python and --nano-egg go together: give both to run nano-egg, or neither")
    if nano_egg is not None:
        if not (Path(nano_egg) / "run.py").is_file():
            raise BadInput(f"--nano-egg {nano_egg} holds no run.py (nano-egg's source folder is expected)")
        check_python(nano_python, "--nano-python")


def row_of(depth, dim, population, tokens, ours, theirs):
    rate = lambda times: round(population * tokens / median(times))  # noqa: E731
    row = {"model": f"egg {depth}x{dim}", "population": population, "tokens": tokens,
           "eggnog_perturbed_tokens_per_s": rate(ours["perturbed"]), "eggnog_plain_tokens_per_s": rate(ours["plain"]),
           "eggnog_ratio": round(median(ours["plain"]) / median(ours["perturbed"]), 3),
           "eggnog_seconds": {k: [round(t, 6) for t in ours[k]] for k in ("perturbed", "plain")},
           "eggnog_loadavg": ours["loadavg"]}
    if isinstance(theirs, str):
        return {**row, "nano_perturbed_tokens_per_s": None, "nano_plain_tokens_per_s": None, "nano_ratio": None,
                "speedup": None, "plain_speedup": None, "nano_note": theirs}
    modes = theirs["modes"]
    row.update(nano_perturbed_tokens_per_s=rate(modes["perturbed"]["seconds"]),
               nano_plain_tokens_per_s=rate(modes["plain"]["seconds"]),
               nano_ratio=round(median(modes["plain"]["seconds"]) / median(modes["perturbed"]["seconds"]), 3),
               nano_seconds={k: [round(t, 6) for t in v["seconds"]] for k, v in modes.items()},
               nano_compile_s={k: round(v["compile_s"], 1) for k, v in modes.items()},
               nano_loadavg={**theirs["loadavg"], **{k: v["loadavg"] for k, v in modes.items()}})
    row["speedup"] = round(row["eggnog_perturbed_tokens_per_s"] / row["nano_perturbed_tokens_per_s"], 2)
    row["plain_speedup"] = round(row["eggnog_plain_tokens_per_s"] / row["nano_plain_tokens_per_s"], 2)
    return row


@app.command(help=cli_help(__doc__))
@user_errors
def main(configs: str = typer.Option("1x64:512,6x256:128", help="depth x dim : population, comma-separated."),
         tokens: int = typer.Option(100, help="Bytes each member reads per evaluation."),
         repeat: int = typer.Option(3, help="Timed calls per figure (median), after one warm-up."),
         nano_python: str = typer.Option(None, help="Python of an environment where nano-egg's run.py imports."),
         nano_egg: str = typer.Option(None, help="nano-egg's source folder (holding run.py)."),
         nano_timeout: int = typer.Option(1800, help="Seconds allowed to nano-egg per configuration."),
         backend: str = typer.Option("cpu", help="cpu, or cuda for eggnog on the GPU (nano-egg's JAX takes the "
                                     "GPU where its Python has a CUDA jax).")):
    from eggnog.kernels.core.backend import select_backend

    shapes = parse_configs(configs)
    if repeat < 1 or tokens < 1:
        raise BadInput(f"--repeat and --tokens must be at least 1, not {repeat} and {tokens}")
    check_nano_options(nano_python, nano_egg)
    backend = select_backend(backend)
    start_load = loadavg()
    rows, nano_info = [], None
    for depth, dim, population in shapes:
        ours = eggnog_side(backend, depth, dim, population, tokens, repeat)
        theirs = nano_side(nano_python, nano_egg, depth, dim, population, tokens, repeat, nano_timeout,
                           "cuda" if backend.name == "cuda" else "cpu") \
            if nano_egg else "nano-egg is not installed (give --nano-python and --nano-egg to run it side by side)"
        if isinstance(theirs, dict):
            nano_info = {k: theirs[k] for k in ("jax", "python", "devices", "run_py_sha256", "stood_in")}
        rows.append(row_of(depth, dim, population, tokens, ours, theirs))
    notes = sorted({r["nano_note"] for r in rows if "nano_note" in r})
    for note in notes:
        print(note)
    columns = ["model", "population", "tokens", "eggnog_perturbed_tokens_per_s", "eggnog_plain_tokens_per_s",
               "eggnog_ratio"]
    if nano_info:
        columns += ["nano_perturbed_tokens_per_s", "nano_plain_tokens_per_s", "nano_ratio", "speedup"]
    print_table(rows, columns)
    extra = {"backend": backend.name, "repeat": repeat, "timed": TIMED, "nano_egg": nano_info, "notes": notes,
             "cpu_count": os.cpu_count(), "loadavg_start": start_load, "loadavg_end": loadavg()}
    path = write_result("nano_egg_side_by_side", backend.device_name, rows, extra)
    print(f"wrote {path}")


if __name__ == "__main__":
    app()
