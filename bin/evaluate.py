"""Bits/byte of any language-model checkpoint (EGG, d-eggs' transformer, MinGRU) on any corpus, beside
that split's baselines (unigram, bigram, gzip -9, xz -9). Rows of --tokens bytes are read from the
start of the split, each from a zero state, as validation reads them.

    python bin/evaluate.py runs/es-20261122-101500 --data corpus.h5
    python bin/evaluate.py runs/bptt-20261122-101500/checkpoints/best --split train --json
"""

import json
import sys
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import typer

from eggnog.runtime.cli import cli_help, user_errors

# plain click help: rich truncates long flag names at 80 columns
app = typer.Typer(add_completion=False, pretty_exceptions_enable=False, rich_markup_mode=None)
BASELINES = ("unigram_bpb", "bigram_bpb", "gzip_bpb", "xz_bpb")


def es_loss(kind, meta, arrays, record, data, split, rows, tokens, backend):
    from eggnog.evolution.es_trainer import EsRunConfig, val_loglik
    from eggnog.evolution.fitness import bits_per_byte
    from eggnog.evolution.transformer_es_config import TransformerEsRunConfig
    from eggnog.runtime.rundir import config_from, current_names

    cfg = config_from(TransformerEsRunConfig if kind == "transformer" else EsRunConfig,
                      current_names(meta.get("config", {})), {})
    corpus = cfg.open_data(data) if data else open_default()
    stream = split_of(corpus, split)
    rows, tokens = fitted(stream, rows, tokens)
    total = val_loglik(cfg.build_model(), cfg, backend, arrays["params"], record["step"], SimpleNamespace(val=stream),
                       np.arange(rows), tokens)
    return bits_per_byte(total, rows * tokens), corpus, rows, tokens, cfg.unit


def mingru_loss(meta, arrays, data, split, rows, tokens, backend):
    from eggnog.corpus.reader import open_corpus
    from eggnog.kernels.core.placement import kernels_for
    from eggnog.models.mingru import MinGruModel
    from eggnog.models.mingru_eval import val_bpb, val_windows
    from eggnog.runtime.world import init_world
    from eggnog.training.mingru.run import model_config_of

    corpus = open_corpus(data) if data else open_default()
    windows = val_windows(split_of(corpus, split), rows, tokens)  # shrunk to a small split as validation does
    rows, tokens = windows.shape[0], windows.shape[1] - 1
    model = MinGruModel(model_config_of(meta))
    loss = val_bpb(model, kernels_for(backend.name), arrays["params"], windows, init_world())
    return loss, corpus, rows, tokens, "bits/byte"


def recorded_corpus(meta):
    """The corpus the run trained on (None: the default corpus); BadInput when it is no longer there."""
    from eggnog.runtime.errors import BadInput

    recorded = meta.get("config", {}).get("data")
    if recorded and not Path(recorded).exists():
        raise BadInput(f"the run trained on {recorded!r}, which is not there from here: pass --data")
    return Path(recorded) if recorded else None


def open_default():
    from eggnog.corpus.default import default_corpus

    return default_corpus()


def split_of(corpus, split):
    from eggnog.runtime.errors import BadInput

    stream = getattr(corpus, split)
    if len(stream) < 2:
        raise BadInput(f"the corpus's {split} split has {len(stream)} byte(s): nothing to evaluate")
    return stream


def fitted(stream, rows, tokens):
    """As many rows (up to `rows`) of tokens + 1 as the split holds, shorter rows for a small split."""
    rows = max(1, min(rows, len(stream) // 2))
    return rows, max(1, min(tokens, len(stream) // rows - 1))


@app.command(help=cli_help(__doc__))
@user_errors
def main(
    checkpoint: Path = typer.Argument(..., help="Run directory (its latest checkpoint) or checkpoint file."),
    data: Path = typer.Option(None, help="Corpus (.bin/.h5/.zarr, or d-eggs' token folder).",
                              show_default="the corpus the run trained on"),
    split: str = typer.Option("val", help="val or train."),
    rows: int = typer.Option(64, help="Rows read, each from a zero state."),
    tokens: int = typer.Option(256, help="Bytes scored per row."),
    backend: str = typer.Option("cpu", help="auto, cpu or cuda."),
    as_json: bool = typer.Option(False, "--json", help="Print one JSON object."),
):
    from eggnog.kernels.core.backend import select_backend
    from eggnog.kernels.core.first_compile import compile_notice, first_step_done
    from eggnog.runtime.checkpoint import load_checkpoint, resolve_checkpoint
    from eggnog.runtime.errors import BadInput

    if split not in ("val", "train"):
        raise BadInput(f"--split must be val or train, got {split!r}")
    if rows < 1 or tokens < 1:
        raise BadInput(f"--rows and --tokens must be positive, got {rows} and {tokens}")
    arrays, record = load_checkpoint(checkpoint)
    meta = record.get("meta", {})
    kind = meta.get("model")
    data = data or recorded_corpus(meta)
    chosen = select_backend(backend)
    notice = compile_notice(f"evaluate {kind}") if kind in ("egg", "transformer", "mingru") else None
    if notice:
        print(notice, file=sys.stderr, flush=True)  # stderr: --json keeps stdout to one object
    if kind in ("egg", "transformer"):
        loss, corpus, rows, tokens, unit = es_loss(kind, meta, arrays, record, data, split, rows, tokens, chosen)
    elif kind == "mingru":
        loss, corpus, rows, tokens, unit = mingru_loss(meta, arrays, data, split, rows, tokens, chosen)
    else:
        raise BadInput(f"checkpoint holds a {kind!r} model; this script evaluates language models: egg, "
                       "transformer, mingru")
    first_step_done()
    stats = corpus.meta.get("splits", {}).get(split, {})
    result = {"checkpoint": str(resolve_checkpoint(checkpoint).resolve()), "model": kind, "step": record["step"],
              "split": split, "rows": rows, "tokens": tokens, "loss": round(loss, 5), "unit": unit,
              "baselines": {name[:-4]: stats[name] for name in BASELINES if name in stats}}
    if as_json:
        print(json.dumps(result))
        return
    print(f"{kind} at step {result['step']}: {loss:.4f} {unit} on the {split} split ({rows} rows of {tokens})")
    for name, value in result["baselines"].items():
        print(f"  {name:>8} baseline {value:.4f}")


if __name__ == "__main__":
    app()
