"""The CD-RGE gossip island (`--trainer rge`): one zero-order step per train_step, float parameters
and optimiser state as flat arrays, exact save and restore; and its flags refused on
bin/train_gossip.py."""

import numpy as np
import pytest

from eggnog.kernels.core.backend import Backend
from eggnog.runtime.errors import BadInput
from eggnog.runtime.world import init_world
from eggnog.training.mingru.island import island_data_seed
from eggnog.zorn.rge.island import GossipRgeRunConfig, RgeIsland
from tests.helpers import assert_user_error, run_script

TINY = dict(input_size=8, hidden_size=8, num_heads=2, batch_size=4, probes=4, lr=0.3, sigma=0.01, seed=4)


def island(rank=0, **overrides):
    cfg = GossipRgeRunConfig(**{**TINY, **overrides})
    return RgeIsland(cfg, init_world(), Backend("cpu"), None, island_data_seed(cfg.seed, rank))


def test_train_step_moves_the_parameters():
    rge = island()
    before = rge.parameters()
    assert before.dtype == np.float32 and before.size == rge.n_params
    assert np.isfinite(rge.train_step()) and rge.step == 1
    assert not np.array_equal(rge.parameters(), before)
    assert np.isfinite(rge.validate()) and rge.best_val is not None
    assert rge.optimizer_state() == ({}, {})  # plain SGD keeps no state


def test_islands_share_the_start_and_draw_their_own_probes():
    first, second = island(rank=0), island(rank=1)
    assert np.array_equal(first.parameters(), second.parameters())
    first.train_step(), second.train_step()
    assert not np.array_equal(first.parameters(), second.parameters())


def test_parameters_and_state_round_trip():
    rge = island(optimizer="adam")
    rge.train_step()
    params, (arrays, scalars) = rge.parameters(), rge.optimizer_state()
    assert sorted(arrays) == ["m", "v"] and scalars == {"k": 1} and arrays["v"].any()
    blended = params + np.float32(0.25)
    rge.load(blended, arrays, scalars)
    assert np.array_equal(rge.parameters(), blended) and rge.step == 1
    got, got_scalars = rge.optimizer_state()
    assert all(np.array_equal(got[k], arrays[k]) for k in arrays) and got_scalars == scalars
    rge.load(params)  # a fresh optimiser
    assert not any(a.any() for a in rge.optimizer_state()[0].values())


def test_save_and_restore_are_exact(tmp_path):
    rge = island(optimizer="momentum")
    for _ in range(2):
        rge.train_step()
    rge.validate()
    path = rge.save(tmp_path / "checkpoints", "step-00000002-loss-5.0000.npz", {"gossip": {"ema_loss": 5.0}})
    params, meta = rge.checkpoint_parameters(path)
    assert np.array_equal(params, rge.parameters()) and meta["gossip"]["ema_loss"] == 5.0
    again = island(optimizer="momentum")
    assert again.restore(path)["gossip"]["ema_loss"] == 5.0
    assert again.step == 2 and again.best_val == rge.best_val
    assert np.array_equal(again.parameters(), rge.parameters())
    assert again.optimizer_state()[1] == rge.optimizer_state()[1]
    assert np.array_equal(again.optimizer_state()[0]["buf"], rge.optimizer_state()[0]["buf"])
    assert again.train_step() == rge.train_step()
    assert np.array_equal(again.parameters(), rge.parameters())
    other = island(model="mingru", dim=8, depth=1)
    with pytest.raises(BadInput, match="not a 'mingru' zero-order run"):
        other.checkpoint_parameters(path)


@pytest.mark.parametrize("args,fragment", [
    (["--trainer", "rge", "--solver", "bptt"], "--trainer rge trains without backpropagation"),
    (["--trainer", "rge", "--population", "8"], "--population does not apply to --trainer rge"),
])
def test_bad_rge_flags_are_refused(tmp_path, args, fragment):
    assert_user_error(run_script("train_gossip.py", "--run-dir", tmp_path / "run", *args), fragment)
    assert not (tmp_path / "run").exists()
