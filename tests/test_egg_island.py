"""The integer EGGROLL gossip island (`--trainer egg`): one EGGROLL step per train_step, its weights
as a float vector and back (rounded half to even, clipped to [-127, 127]), AdamW state as flat
arrays, exact save and restore; and the flags refused on bin/train_gossip.py."""

import numpy as np
import pytest

from eggnog.corpus.reader import open_corpus
from eggnog.evolution.egg_island import EggIsland, GossipEggRunConfig, to_int8
from eggnog.evolution.eggroll import OPTIMIZER_ARRAYS
from eggnog.kernels.core.backend import Backend
from eggnog.kernels.core.placement import to_host
from eggnog.runtime.world import init_world
from eggnog.training.mingru.island import island_data_seed
from tests.es_helpers import TINY, tiny_corpus
from tests.helpers import assert_user_error, run_script

TINY_EGG = {k: v for k, v in TINY.items() if k != "checkpoint_every"}


def island(tmp_path, rank=0, **overrides):
    cfg = GossipEggRunConfig(**{**TINY_EGG, **overrides})
    return EggIsland(cfg, init_world(), Backend("cpu"), open_corpus(tiny_corpus(tmp_path)),
                     island_data_seed(cfg.seed, rank))


def test_train_step_moves_the_weights(tmp_path):
    egg = island(tmp_path)
    before = egg.parameters()
    assert before.dtype == np.float32 and before.size == egg.n_params
    assert np.isfinite(egg.train_step()) and egg.step == 1
    assert not np.array_equal(egg.parameters(), before)
    assert np.isfinite(egg.validate())


def test_adamw_state_travels_as_float_arrays(tmp_path):
    egg = island(tmp_path, optimizer="adamw")
    arrays, scalars = egg.optimizer_state()  # zeros before the first update, as the update would start
    assert sorted(arrays) == sorted(OPTIMIZER_ARRAYS) and scalars == {} and not any(a.any() for a in arrays.values())
    egg.train_step()
    arrays, _ = egg.optimizer_state()
    assert all(a.dtype == np.float32 and a.size == egg.n_params for a in arrays.values())
    assert arrays["opt_v"].any()


def test_islands_share_the_start_and_draw_their_own_noise(tmp_path):
    first, second = island(tmp_path, rank=0), island(tmp_path, rank=1)
    assert np.array_equal(first.parameters(), second.parameters())
    first.train_step(), second.train_step()
    assert not np.array_equal(first.parameters(), second.parameters())


def test_parameters_and_state_round_trip(tmp_path):
    egg = island(tmp_path, optimizer="adamw")
    egg.train_step()
    params, (arrays, scalars) = egg.parameters(), egg.optimizer_state()
    states = to_host(egg.trainer.states).copy()
    egg.load(params, arrays, scalars)
    assert np.array_equal(egg.parameters(), params) and egg.step == 1
    assert all(np.array_equal(egg.optimizer_state()[0][k], arrays[k]) for k in arrays)
    assert np.array_equal(to_host(egg.trainer.states), states)  # the members' states stay the island's own
    egg.load(params)  # a fresh optimiser: zero state
    assert not any(a.any() for a in egg.optimizer_state()[0].values())


def test_the_adaptive_noise_overlay_stays_the_islands_own_through_a_merge(tmp_path):
    egg = island(tmp_path, adaptive_noise=True, alpha=0.2)
    egg.train_step()
    overlay = egg.trainer.strategy.overlay.copy()
    assert egg.optimizer_state() == ({}, {}) and np.any(overlay != 64)  # it never travels
    egg.load(egg.parameters() + 1)
    assert np.array_equal(egg.trainer.strategy.overlay, overlay)


def test_ztest_has_no_optimizer_state(tmp_path):
    egg = island(tmp_path)
    egg.train_step()
    assert egg.optimizer_state() == ({}, {})


def test_a_blended_vector_is_rounded_half_to_even_and_clipped(tmp_path):
    egg = island(tmp_path)
    blended = np.zeros(egg.n_params, dtype=np.float32)
    blended[:8] = [2.5, 3.5, -2.5, 0.49, -0.51, 126.7, 200.0, -300.0]
    egg.load(blended)
    assert egg.parameters()[:8].tolist() == [2, 4, -2, 0, -1, 127, 127, -127]
    assert np.array_equal(to_int8(blended), egg.parameters().astype(np.int8))
    assert egg.parameters().min() >= -127


def test_save_and_restore_are_exact(tmp_path):
    egg = island(tmp_path, optimizer="adamw")
    for _ in range(2):
        egg.train_step()
    egg.validate()
    path = egg.save(tmp_path / "rank-00" / "checkpoints", "step-00000002-loss-5.0000.npz",
                    {"gossip": {"ema_loss": 5.0}})
    assert path.name == "step-00000002-loss-5.0000.npz" and (path.parent / "latest").is_file()
    params, meta = egg.checkpoint_parameters(path)
    assert np.array_equal(params, egg.parameters()) and meta["gossip"]["ema_loss"] == 5.0
    again = island(tmp_path, optimizer="adamw")
    meta = again.restore(path)
    assert meta["gossip"]["ema_loss"] == 5.0 and again.step == 2 and again.trainer.best_val == egg.trainer.best_val
    assert np.array_equal(again.parameters(), egg.parameters())
    assert all(np.array_equal(again.optimizer_state()[0][k], v) for k, v in egg.optimizer_state()[0].items())
    assert np.array_equal(to_host(again.trainer.states), to_host(egg.trainer.states))
    assert again.train_step() == egg.train_step()
    assert np.array_equal(again.parameters(), egg.parameters())


@pytest.mark.parametrize("args,fragment", [
    (["--trainer", "egg", "--mode", "coordinator"], "--mode coordinator does not apply to a gossip run"),
    (["--trainer", "lstm"], "unknown trainer 'lstm': choose bptt or egg"),
    (["--population", "8"], "--population does not apply to --trainer bptt"),
])
def test_bad_trainer_flags_are_refused(tmp_path, args, fragment):
    assert_user_error(run_script("train_gossip.py", "--run-dir", tmp_path / "run", *args), fragment)
    assert not (tmp_path / "run").exists()
