"""CD-RGE over 1, 2 and 4 ranks: in `seeds` mode (allgather of probe losses, every rank applies the
fused update) the parameters are bit-identical on every rank and for every rank count; in `reduce`
mode (sum of probes to rank 0, broadcast) every rank holds rank 0's parameters and rank counts agree
to fp32 rounding (the sum is taken in another order)."""

import numpy as np
import pytest

from eggnog.kernels.core.backend import Backend
from eggnog.zorn.rge.run import RgeRun, RgeRunConfig

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


def test_validation_curriculum_and_lr_search_agree_across_rank_counts(world, parallel_assert, across_rank_counts,
                                                                      shared_dir):
    """Validation rows split over ranks reduce to the 1-rank scores; the curriculum and the LR search
    make the same choices on every rank count; parameters stay bit-identical (seeds mode)."""
    from pathlib import Path

    from eggnog.runtime.rundir import read_jsonl

    cfg = RgeRunConfig(**{**CFG, "overfit": False, "steps": 6}, validate_every=3, val_samples=10, curriculum_max=7,
                       curriculum_patience=2, curriculum_threshold=1000.0, lr_search="0.01,0.5", lr_search_steps=2,
                       lr_search_rounds=1)

    def train(group, run_dir):
        run = RgeRun(cfg, group, Backend("cpu"))
        run.run(run_dir)
        return run.host_params()

    identical, results = across_rank_counts("schedules", train)
    parallel_assert(identical, "ranks of one run hold different parameters")
    agree = True
    if world.is_root:
        logs = {size: read_jsonl(Path(shared_dir) / f"schedules-{size}" / "metrics.jsonl") for size in results}
        one = logs[1]
        for log in logs.values():
            agree &= [r["lr"] for r in log] == [r["lr"] for r in one]
            agree &= [r.get("curriculum_raised_to") for r in log] == [r.get("curriculum_raised_to") for r in one]
            agree &= all(abs(r.get("val_loss", 0) - s.get("val_loss", 0)) < 1e-9 and
                         r.get("val_accuracy") == s.get("val_accuracy") for r, s in zip(log, one))
        agree &= all(np.array_equal(p, results[1]) for p in results.values())
    parallel_assert(world.bcast_json(bool(agree)), "rank counts disagree on validation, curriculum or lr search")
