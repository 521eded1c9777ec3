"""A tiny corpus and run configuration for EGGROLL training tests."""

import sysconfig
from pathlib import Path

from eggnog.corpus.prepare import prepare
from eggnog.evolution.es_trainer import EsRunConfig

TINY = dict(depth=1, dim=8, population=8, group_size=2, tokens_per_update=8, steps=6, validate_every=2,
            checkpoint_every=3, val_rows=4, val_tokens=16, seed=3)


def tiny_corpus(directory):
    """A small real-text corpus: the stdlib json package."""
    source = Path(sysconfig.get_paths()["stdlib"]) / "json"
    out = Path(directory) / "json.bin"
    if not out.exists():
        prepare([str(source)], out, val_fraction=0.3)
    return out


def tiny_config(model="egg", **overrides):
    """The tiny run of the EGG, or of d-eggs' transformer (two heads of 4)."""
    if model == "transformer":
        from eggnog.evolution.transformer_es_config import TransformerEsRunConfig

        return TransformerEsRunConfig(**{**TINY, "head_dim": 4, "tokens_per_update": 6, **overrides})
    return EsRunConfig(**{**TINY, **overrides})
