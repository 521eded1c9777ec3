"""MinGRU runs split over 1, 2 and 4 ranks: every rank of a run holds the same parameters bit for
bit (one allreduce or one allgather of losses, then the same update everywhere), and runs with
different rank counts agree to fp32 rounding (float sums taken in another order). BPTT runs once with
AdamW and once with SGD: Adam's step hardly changes when every gradient is scaled alike, SGD's scales
with it, so SGD is what shows a gradient summed over ranks but not divided by their number."""

import numpy as np
import pytest

from eggnog.corpus.reader import open_corpus
from eggnog.evolution.float_es_trainer import FloatEsRunConfig, FloatEsTrainer
from eggnog.kernels.core.backend import Backend
from eggnog.training.mingru.bptt import BpttRunConfig, BpttTrainer
from tests.es_helpers import tiny_corpus

SMALL = dict(dim=8, depth=1, val_rows=4, val_tokens=16, seed=4, validate_every=2, checkpoint_every=2)
RUNS = {
    "bptt": (BpttTrainer, BpttRunConfig(**SMALL, chunk_size=8, context_chunks=2, batch_size=4, steps=3,
                                        optimizer="adamw", lr=1e-3)),
    "bptt-sgd": (BpttTrainer, BpttRunConfig(**SMALL, chunk_size=8, context_chunks=2, batch_size=4, steps=3,
                                            optimizer="sgd", lr=0.1)),
    "es": (FloatEsTrainer, FloatEsRunConfig(**SMALL, population=8, group_size=2, tokens_per_update=8, steps=3,
                                            lr=1e-3)),
}


@pytest.mark.parametrize("kind", sorted(RUNS))
def test_ranks_agree_and_rank_counts_match(world, shared_dir, parallel_assert, across_rank_counts, kind):
    corpus_path = world.root_first(lambda: tiny_corpus(shared_dir))
    trainer_cls, cfg = RUNS[kind]

    def train(group, run_dir):
        trainer = trainer_cls(cfg.resolved(), group, Backend("cpu"), open_corpus(corpus_path))
        trainer.run(run_dir)
        return (trainer.optimizer if kind.startswith("bptt") else trainer.strategy.optimizer).train_params()

    identical, results = across_rank_counts(kind, train)
    parallel_assert(identical, "ranks of one run hold different parameters")
    close = True
    if world.is_root:
        close = all(np.allclose(p, results[1], rtol=0, atol=1e-5) for p in results.values())
    parallel_assert(world.bcast_json(bool(close)), "rank counts disagree beyond fp32 rounding")
