"""Every training run logs where a step's seconds went (evaluation, exchange, update: together at most
the step) and, where it logs tokens_per_s, exactly the tokens its step counts over the step's seconds."""

import pytest

from eggnog.corpus.reader import open_corpus
from eggnog.evolution.es_trainer import EsTrainer
from eggnog.evolution.float_es_trainer import FloatEsRunConfig, FloatEsTrainer
from eggnog.kernels.core.backend import Backend
from eggnog.runtime.rundir import read_jsonl
from eggnog.runtime.world import init_world
from eggnog.training.mingru.bptt import BpttRunConfig, BpttTrainer
from eggnog.zorn.rge.run import RgeRun, RgeRunConfig
from tests.es_helpers import tiny_config, tiny_corpus

CPU = Backend("cpu")
MINGRU = dict(dim=16, depth=1, val_rows=4, val_tokens=32, seed=2, validate_every=2, checkpoint_every=10)


def int_es(corpus):
    cfg = tiny_config(steps=3)
    return EsTrainer(cfg, init_world(), CPU, corpus), cfg.population * cfg.tokens_per_update


def float_es(corpus):
    cfg = FloatEsRunConfig(**MINGRU, population=8, group_size=4, tokens_per_update=16, steps=3).resolved()
    return FloatEsTrainer(cfg, init_world(), CPU, corpus), cfg.population * cfg.tokens_per_update


def bptt(corpus):
    cfg = BpttRunConfig(**MINGRU, chunk_size=16, context_chunks=2, batch_size=4, grad_accum=2, steps=3).resolved()
    return BpttTrainer(cfg, init_world(), CPU, corpus), cfg.batch_size * cfg.chunk_size * cfg.grad_accum


def cdrge(corpus):
    cfg = RgeRunConfig(hidden_size=8, num_heads=2, input_size=4, batch_size=4, probes=4, lr=0.05, steps=3,
                       checkpoint_every=10)
    return RgeRun(cfg, init_world(), CPU), None


@pytest.mark.parametrize("build", [int_es, float_es, bptt, cdrge])
def test_split_and_tokens_per_second(tmp_path, build):
    trainer, tokens = build(open_corpus(tiny_corpus(tmp_path)))
    run_dir = tmp_path / "run"
    (run_dir / "checkpoints").mkdir(parents=True)
    trainer.run(run_dir)
    records = read_jsonl(run_dir / "metrics.jsonl")
    assert len(records) == 3
    for r in records:
        step = r["step_s"] if "step_s" in r else r["s_per_step"]
        phases = [r["eval_s"], r["exchange_s"], r["update_s"]]
        assert min(phases) >= 0 and r["eval_s"] > 0
        assert sum(phases) <= step + 3e-6  # each figure is rounded to a microsecond
        if tokens is None:
            assert "tokens_per_s" not in r
        else:
            assert r["tokens_per_s"] == pytest.approx(tokens / step, rel=2e-3, abs=0.05)  # logged rounded to 0.1
