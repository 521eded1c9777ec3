"""EGGROLL population evaluation: member-tokens/s of `IntEggroll.evaluate` (one `egg_epoch` call per
evaluation) with perturbations (noise regenerated inside the kernel) against the same call without
perturbation (plain batched inference of the same model), per population.

    python -m bench.throughput.eggroll --depth 6 --dim 256 --populations 1024,8192,32768
    python -m bench.throughput.eggroll --model transformer --depth 1 --dim 32 --head-dim 16

d-eggs' own sizes are --depth 4 --dim 256 --head-dim 64 --vocab-size 8192 --tokens 64, its population
chunk 40960 (bench/gpu/steps.py runs them on a GPU).

Only `evaluate` is timed: the byte windows (on the host, uploaded by `evaluate` as in training) and
the hidden states (on the device) are made before the timed region, and the device is synchronised
before each clock reading. ratio = perturbed member-tokens/s ÷ plain member-tokens/s, the measure
behind the EGGROLL paper's 91% (noise stored) and 69% (noise generated on the fly) of inference
throughput. Memory is that of one more perturbed evaluation, outside the timed runs
(training/memory.py says what each figure measures).

On the CPU the rows also give the int8 MAC rate of the twin: matmul MACs per member-token
(EGG: n_layer * 12 * D^2 + 256 * D; transformer: its matrices, the tied head V * D and the attention's
2 * D per layer and earlier position, averaged over the window) plus, when perturbed, the rank-1 terms
(x . B and the scaling by A: d_in + d_out per matmul, and the embedding row's), against the CPU's
int8 dot-product peak (bench/throughput/cpu_int8_peak.py: stated from the clock, and measured), in all and per
core (the rate divided by the threads the twin runs on): the unit in which the EGG's twin and the
transformer's compare.
"""

from dataclasses import replace

import numpy as np
import typer

from bench.report import median_seconds, print_table, write_result
from eggnog.runtime.cli import cli_help, user_errors

app = typer.Typer(add_completion=False, pretty_exceptions_enable=False, rich_markup_mode=None)


def macs_per_token(model, perturbed, tokens, transformer):
    """Integer multiply-adds of one member reading one token: the matmuls (the transformer's embedding
    is also its head; the EGG's is a lookup), the transformer's attention, and the rank-1 terms."""
    products = [t for t in model.tensors if t.kind == "matrix" or (transformer and t.kind == "embedding")]
    total = sum(t.size for t in products)
    width = model.tensors[0].shape[1]  # the embedding's
    if transformer:
        total += model.cfg.n_layer * 2 * width * (tokens + 1) // 2
    if perturbed:
        total += sum(t.shape[0] + t.shape[1] for t in products) + width + 1
    return total


@app.command(help=cli_help(__doc__))
@user_errors
def main(model_name: str = typer.Option("egg", "--model", help="egg or transformer (d-eggs' model)."),
         depth: int = typer.Option(1, "--depth", "--n-layer", help="Blocks."),
         dim: int = typer.Option(64, "--dim", "--n-embd", help="Width."),
         head_dim: int = typer.Option(16, help="Transformer head width."),
         vocab_size: int = typer.Option(256, help="Transformer vocabulary (d-eggs: 8192)."),
         populations: str = typer.Option("64,256,1024", help="Comma-separated population sizes."),
         tokens: int = typer.Option(16, help="Bytes each member reads per evaluation."), repeat: int = 3,
         backend: str = typer.Option(None, help="auto, cpu or cuda.")):
    from eggnog.evolution.eggroll import IntEggroll
    from eggnog.evolution.es_trainer import EsRunConfig
    from eggnog.evolution.transformer_es_config import TransformerEsRunConfig
    from eggnog.kernels.core.backend import select_backend
    from eggnog.runtime.errors import BadInput
    from eggnog.training.memory import MemoryMeter

    try:
        sizes = [int(p) for p in populations.split(",")]
    except ValueError:
        raise BadInput(f"--populations {populations!r} is not a comma-separated list of integers") from None
    if repeat < 1 or tokens < 1:
        raise BadInput(f"--repeat and --tokens must be at least 1, not {repeat} and {tokens}")
    if model_name not in ("egg", "transformer"):
        raise BadInput(f"unknown --model {model_name!r}: choose egg or transformer")
    chosen = select_backend(backend)
    extra_flags = {"head_dim": head_dim, "vocab_size": vocab_size} if model_name == "transformer" else {}
    config_cls = TransformerEsRunConfig if model_name == "transformer" else EsRunConfig
    base = config_cls(depth=depth, dim=dim, tokens_per_update=tokens, group_size=2, **extra_flags)
    model = base.build_model()
    vocab = getattr(model.cfg, "vocab", 256)
    params = model.init_params(0)
    peak = None
    if chosen.name == "cpu":
        from bench.throughput.cpu_int8_peak import peaks

        peak = peaks()
    rows, meter = [], None
    for population in sizes:
        cfg = replace(base, population=population)
        cfg.check()
        strategy = IntEggroll(model, cfg, chosen, params, 0)
        windows = np.random.default_rng(0).integers(1, vocab, (population, tokens + 1)).astype(model.token_dtype)
        layers, width = model.state_dims
        states = {p: chosen.zeros((layers, population, width), np.int8) for p in (True, False)}
        seconds = {p: median_seconds(lambda p=p: strategy.evaluate(windows, states[p], perturbed=p), repeat=repeat,
                                     sync=chosen.synchronize) for p in (True, False)}
        meter = meter or MemoryMeter(chosen)
        meter.reset()
        strategy.evaluate(windows, states[True])
        row = {"population": population, "tokens": tokens,
               "perturbed_tokens_per_s": round(population * tokens / seconds[True]),
               "plain_tokens_per_s": round(population * tokens / seconds[False]),
               "ratio": round(seconds[False] / seconds[True], 3)}
        if peak is not None:
            for p, name in ((True, "perturbed"), (False, "plain")):
                macs = macs_per_token(model, p, tokens, bool(extra_flags))
                gmacs = population * tokens * macs / seconds[p] / 1e9
                row[f"{name}_gmacs"] = round(gmacs, 1)
                row[f"{name}_gmacs_per_core"] = round(gmacs / peak["threads"], 1)
                row[f"{name}_pct_of_stated_peak"] = round(100 * gmacs / peak["stated_gmacs"], 1) \
                    if peak["stated_gmacs"] else None
                row[f"{name}_pct_of_measured_peak"] = round(100 * gmacs / peak["measured_gmacs"], 1)
        rows.append({**row, **meter.peaks()})
    meter.stop()
    columns = ["population", "tokens", "perturbed_tokens_per_s", "plain_tokens_per_s", "ratio"]
    if peak is not None:
        columns += ["perturbed_gmacs_per_core", "plain_gmacs_per_core", "perturbed_pct_of_stated_peak",
                    "perturbed_pct_of_measured_peak"]
        print(f"int8 peak: stated {peak['stated_gmacs']:.1f} GMAC/s ({peak['formula']}, {peak['clock_ghz']} GHz, "
              f"{peak['threads']} threads); measured {peak['measured_gmacs']} GMAC/s")
    print_table(rows, columns)
    label = f"{model_name} {depth}x{dim}" + (f" heads of {head_dim}, vocabulary {vocab_size}" if extra_flags else "")
    extra = {"model": label, "params": model.n_params, "backend": chosen.name, "repeat": repeat,
             "memory": meter.sources(),
             "macs_per_token": {name: macs_per_token(model, p, tokens, bool(extra_flags))
                                for name, p in (("plain", False), ("perturbed", True))}}
    if peak is not None:
        extra["int8_peak"] = peak
    path = write_result(f"eggroll_throughput-{model_name}{depth}x{dim}", chosen.device_name, rows, extra)
    print(f"wrote {path}")


if __name__ == "__main__":
    app()
