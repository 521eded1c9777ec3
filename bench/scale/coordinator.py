"""Scale model of the TCP coordinator: how many GPUs one coordinator keeps busy.

Measured: the coordinator's own seconds per request and per result on one core
(bench/scale/coordinator_service.py: a real coordinator, in-process fake workers returning pre-computed
fitness), at several chunk sizes of d-eggs' transformer (no member states travel) and of the EGG
(1,536 bytes of states per member travel both ways), fitted as a + b x bytes. Not measured: a GPU's
chunk time, taken from the static report's roofline rate (an upper bound of speed, so the coordinator
looks busier than it will be) until a GPU measures one.

Model, per chunk of c members: T = c x tokens / rate on one GPU; the coordinator spends s = request +
result on it, so N GPUs keep it busy a fraction rho = N s / T. Below 1, a GPU waits s plus the M/D/1
queue rho s / (2 (1 - rho)) per chunk; at 1 and above the coordinator is the bottleneck and each GPU
gets T / (N s) of its time. The population is taken as 4 chunks per GPU a step (fewer chunks than
GPUs leave GPUs idle whatever the coordinator does). The network is a second ceiling: the
coordinator's link carries N x 2 x states / T bytes per second.

    python -m bench.scale.coordinator
"""

import contextlib
import io
from dataclasses import replace

import numpy as np
import typer

from bench.report import RESULTS, print_table, write_result
from bench.scale.coordinator_service import measure
from bench.static_report.written import newest_report, read_report, row_named
from eggnog.evolution.es_trainer import EsRunConfig
from eggnog.evolution.transformer_es_config import TransformerEsRunConfig
from eggnog.runtime.cli import cli_help, user_errors

app = typer.Typer(add_completion=False, pretty_exceptions_enable=False, rich_markup_mode=None)
GPUS = (8, 64, 512, 4096)
MEASURED_CHUNKS = {"transformer": (64, 512, 4096, 40960), "egg": (64, 512, 4096)}
CHUNKS = (64, 512, 4096, 40960)
ROUNDS = 4  # chunks per GPU a step in the model's population, so every GPU has work
NIC_BYTES_S = 12.5e9  # one 100 Gb/s link at the coordinator


def models():
    """(name, config at d-eggs' population, static-report row prefix, tokens per member per step)."""
    deggs = TransformerEsRunConfig(depth=4, dim=256, head_dim=64, tokens_per_update=64, vocab_size=8192,
                                   population=327680, population_chunk=40960, group_size=2, mode="coordinator")
    egg = EsRunConfig(depth=6, dim=256, tokens_per_update=64, population=327680, population_chunk=40960,
                      group_size=2, mode="coordinator")
    return [("transformer", deggs, "d-eggs 4x256"), ("egg", egg, "EGG 6x256, population 32768: fused")]


def fit(rows, key):
    """(a, b) of seconds = a + b x bytes, least squares."""
    x = np.array([r["bytes"] for r in rows], float)
    y = np.array([r[key] for r in rows], float)
    if np.ptp(x) == 0:
        return float(y.mean()), 0.0
    b, a = np.polyfit(x, y, 1)
    return float(max(a, 0.0)), float(max(b, 0.0))


def utilisation(gpus, chunk_s, service_s, net_s):
    """(how busy the coordinator is, the fraction of GPU time spent computing), every GPU with work."""
    rho = gpus * service_s / chunk_s
    if rho >= 1:
        return rho, chunk_s / (gpus * service_s)
    wait = service_s + rho * service_s / (2 * (1 - rho))
    return rho, min(chunk_s / (chunk_s + wait), chunk_s / max(gpus * net_s, chunk_s))


def measured(name, cfg, chunks, workers):
    rows = []
    for chunk in chunks:
        sized = replace(cfg, population=16 * chunk, population_chunk=chunk, steps=1000)
        with contextlib.redirect_stdout(io.StringIO()):  # the coordinator's own step lines
            m = measure(sized, None, workers=workers)
        rows.append({"model": name, "chunk": chunk, "bytes": m["job_bytes"] + m["result_bytes"],
                     "request_us": round(m["request_s"] * 1e6, 1), "result_us": round(m["result_s"] * 1e6, 1),
                     "messages_per_s": round(2 / (m["request_s"] + m["result_s"]))})
        print(f"measured {name} chunk {chunk}: {rows[-1]}", flush=True)
    return rows


def per_member(cfg, rate):
    """(GPU seconds, bytes through the coordinator) per member of a chunk."""
    return cfg.tokens_per_update / rate, 2 * int(np.prod(cfg.build_model().state_dims)) + 0.1


def modelled(name, cfg, rate, service, chunks):
    """Per GPU count and chunk size, with a population of ROUNDS chunks per GPU a step."""
    (a, b), (member_s, member_bytes) = service, per_member(cfg, rate)
    rows = []
    for chunk in chunks:
        chunk_s, moved = chunk * member_s, chunk * member_bytes
        service_s = a + b * moved
        for gpus in GPUS:
            rho, used = utilisation(gpus, chunk_s, service_s, moved / NIC_BYTES_S)
            rows.append({"model": name, "gpus": gpus, "chunk": chunk, "population": ROUNDS * gpus * chunk,
                         "chunk_ms": round(chunk_s * 1e3, 3), "service_us": round(service_s * 1e6, 1),
                         "coordinator_busy": round(rho, 3), "gpu_utilisation": round(used, 3)})
    return rows


def smallest_chunk(name, cfg, rate, service, gpus, busy=0.5):
    """The smallest chunk keeping N GPUs' coordinator under `busy`: N (a + b m c) / (c t) < busy gives
    c > N a / (busy t - N b m); None where the bytes alone keep it busier (busy t <= N b m)."""
    (a, b), (member_s, member_bytes) = service, per_member(cfg, rate)
    room = busy * member_s - gpus * b * member_bytes
    return None if room <= 0 else int(np.ceil(gpus * a / room))


def plot(rows, path):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = sorted({r["model"] for r in rows})
    fig, axes = plt.subplots(1, len(names), figsize=(5.5 * len(names), 4), squeeze=False)
    for ax, name in zip(axes[0], names):
        for chunk in sorted({r["chunk"] for r in rows if r["model"] == name}):
            mine = [r for r in rows if r["model"] == name and r["chunk"] == chunk]
            ax.plot([r["gpus"] for r in mine], [r["gpu_utilisation"] for r in mine], marker="o", label=f"chunk {chunk}")
        ax.set(xscale="log", xlabel="GPUs", ylabel="GPU time spent computing", ylim=(0, 1.05), title=name)
        ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


@app.command(help=cli_help(__doc__))
@user_errors
def main(workers: int = typer.Option(8, help="Fake workers the coordinator serves while measured."),
         report: str = typer.Option(None, help="A static report's JSON for the GPU rates (default: the newest).")):
    _, roofline = read_report(report or newest_report())
    service_rows, model_rows, fits, smallest = [], [], {}, {}
    for name, cfg, row_prefix in models():
        measured_rows = measured(name, cfg, MEASURED_CHUNKS[name], workers)
        service_rows += measured_rows
        fits[name] = fit([{"bytes": r["bytes"], "s": (r["request_us"] + r["result_us"]) / 1e6} for r in measured_rows],
                         "s")
        rate = row_named(roofline, row_prefix)["units_per_s"]
        model_rows += modelled(name, cfg, rate, fits[name], CHUNKS)
        for gpus in GPUS:
            smallest[f"{name} on {gpus} GPUs"] = smallest_chunk(name, cfg, rate, fits[name], gpus)
    print_table(service_rows, list(service_rows[0]))
    print()
    print_table(model_rows, list(model_rows[0]))
    for key, chunk in smallest.items():
        print(f"{key}: " + (f"chunks of at least {chunk:,} members keep the coordinator under half busy" if chunk
                            else "no chunk size keeps the coordinator under half busy (its bytes alone)"))
    extra = {"fits_seconds_per_chunk": {k: {"a": a, "b_per_byte": b} for k, (a, b) in fits.items()},
             "nic_bytes_per_s": NIC_BYTES_S, "smallest_chunk_under_half_busy": smallest, "modelled": model_rows,
             "gpu_rates": "static report roofline (upper bounds), one H100 each"}
    path = write_result("coordinator_scale", "cpu", service_rows, extra)
    plot(model_rows, RESULTS / path.name.replace(".json", ".png"))
    print(f"wrote {path} and its plot")


if __name__ == "__main__":
    app()
