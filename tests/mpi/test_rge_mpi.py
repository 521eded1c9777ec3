"""CD-RGE over 1, 2 and 4 ranks: in `seeds` mode (allgather of probe losses, every rank applies the
fused update) the parameters are bit-identical on every rank and for every rank count; in `reduce`
mode (sum of probes to rank 0, broadcast) every rank holds rank 0's parameters and rank counts agree
to fp32 rounding (the sum is taken in another order)."""

import numpy as np
import pytest

from eggnog.kernels.backend import Backend
from eggnog.zorn.rge_run import RgeRun, RgeRunConfig

CFG = dict(hidden_size=8, num_heads=2, input_size=4, batch_size=4, probes=8, lr=0.05, sigma=0.01, steps=3,
           checkpoint_every=3, overfit=True)


@pytest.mark.parametrize("mode,optimizer", [("seeds", "sgd"), ("seeds", "adam"), ("reduce", "sgd")])
def test_rank_counts(world, parallel_assert, across_rank_counts, mode, optimizer):
    def train(group, run_dir):
        run = RgeRun(RgeRunConfig(**CFG, dist_mode=mode, optimizer=optimizer), group, Backend("cpu"))
        run.run(run_dir)
        return run.host_params()

    identical, results = across_rank_counts(f"{mode}-{optimizer}", train)
    parallel_assert(identical, "ranks of one run hold different parameters")
    agree = True
    if world.is_root:
        same = np.array_equal if mode == "seeds" else (lambda a, b: np.allclose(a, b, rtol=0, atol=1e-6))
        agree = all(same(p, results[1]) for p in results.values())
    parallel_assert(world.bcast_json(bool(agree)), f"{mode}: rank counts disagree")
