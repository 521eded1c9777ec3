"""The same seed gives bit-identical EGG parameters and states after N epochs on 1, 2 and 4 ranks
(ranks split the population and exchange only ternary-packed fitness signs); the same for d-eggs'
transformer."""

import os
from pathlib import Path

import numpy as np
import pytest

from eggnog.corpus.reader import open_corpus
from eggnog.evolution.es_trainer import EsTrainer
from eggnog.kernels.core.backend import Backend
from eggnog.runtime.checkpoint import load_checkpoint
from tests.es_helpers import tiny_config, tiny_corpus


@pytest.mark.parametrize("model,fast_fitness", [("egg", True), ("egg", False), ("transformer", True)])
def test_rank_count_invariance(world, shared_dir, parallel_assert, model, fast_fitness):
    corpus_path = world.root_first(lambda: tiny_corpus(shared_dir))
    results = {}
    for size in (1, 2, 4):
        if size > world.size:
            continue
        group = world.first_ranks(size)
        if group is not None:
            cfg = tiny_config(model, steps=4, fast_fitness=fast_fitness)
            run_dir = os.path.join(shared_dir, f"{model}-ranks-{size}-{fast_fitness}")
            if group.is_root:
                os.makedirs(os.path.join(run_dir, "checkpoints"))
            group.barrier()
            trainer = EsTrainer(cfg, group, Backend("cpu"), open_corpus(corpus_path))
            trainer.run(Path(run_dir))
        world.barrier(quiet=True)
        if world.is_root:
            results[size] = load_checkpoint(run_dir)[0]
    same = True
    if world.is_root:
        reference = results[1]
        for arrays in results.values():
            same &= np.array_equal(arrays["params"], reference["params"])
            same &= np.array_equal(arrays["states"], reference["states"])
        same &= len(results) == min(3, 1 + (world.size >= 2) + (world.size >= 4))
    parallel_assert(world.bcast_json(bool(same)))
