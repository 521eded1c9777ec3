"""d-eggs' adaptive noise overlay: +5 where a row / column / element moved, -1 elsewhere, clipped to
+-127; gains clip(overlay, 0, 64); the strategy carries it and refuses one that does not fit."""

import numpy as np
import pytest

from eggnog.evolution.eggroll import IntEggroll
from eggnog.evolution.noise_overlay import changed_positions, gains_of, initial_overlay, updated_overlay
from eggnog.kernels.core.backend import Backend
from eggnog.kernels.noise.gains import gain_offsets
from eggnog.models.egg import EggConfig, EggModel
from eggnog.runtime.errors import BadInput
from tests.es_helpers import tiny_config

MODEL = EggModel(EggConfig(1, 8))


def offsets():
    at, total = gain_offsets([(t.name, t.shape, t.kind, t.offset) for t in MODEL.tensors])
    return {t.name: at[t.tensor_id] for t in MODEL.tensors}, total


def test_one_changed_weight_marks_its_row_and_column_or_its_element():
    start, total = offsets()
    before = MODEL.init_params(0)
    after = before.copy()
    up = MODEL.by_name["layers.0.mlp.up"]  # (32, 8): columns 0..7, then rows 0..31
    after[up.offset + 5 * 8 + 3] += 1  # row 5, column 3
    bias = MODEL.by_name["layers.0.gru.bf"]
    after[bias.offset + 6] -= 1
    hits = changed_positions(MODEL, before, after)
    assert hits.shape == (total,) and hits.sum() == 3
    assert hits[start[up.name] + 3] and hits[start[up.name] + 8 + 5] and hits[start[bias.name] + 6]

    overlay = initial_overlay(MODEL)
    assert overlay.dtype == np.int8 and np.all(overlay == 64)
    once = updated_overlay(overlay, MODEL, before, after)
    assert sorted(set(once.tolist())) == [63, 69] and np.count_nonzero(once == 69) == 3


def test_overlay_clips_at_127_both_ways_and_gains_follow_d_eggs():
    params = MODEL.init_params(0)
    moved = params + np.int8(1)
    high = np.full(initial_overlay(MODEL).size, 125, np.int8)
    assert np.all(updated_overlay(high, MODEL, params, moved) == 127)
    assert np.all(updated_overlay(-high - 2, MODEL, params, params) == -127)
    overlay = np.array([-127, -1, 0, 1, 32, 63, 64, 65, 127], np.int8)
    assert gains_of(overlay).tolist() == [0, 0, 0, 1, 32, 63, 64, 64, 64]


def test_a_strategy_starts_at_64_updates_its_overlay_and_refuses_one_that_does_not_fit():
    cfg = tiny_config(adaptive_noise=True, population=8, alpha=0.2)
    model = EggModel(cfg.model())
    strategy = IntEggroll(model, cfg, Backend("numpy"), model.init_params(3), 3)
    assert np.all(strategy.overlay == 64)
    before = strategy.host_params()
    strategy.update(np.array([1, -1, 0, 1], np.int8))
    assert np.array_equal(strategy.overlay, updated_overlay(initial_overlay(model), model, before,
                                                            strategy.host_params()))
    assert np.array_equal(strategy.host_optimizer_state()["noise_overlay"], strategy.overlay)
    with pytest.raises(BadInput, match="overlay does not fit"):
        IntEggroll(model, cfg, Backend("numpy"), model.init_params(3), 3, optimizer_state={"noise_overlay": np.zeros(5,
                                                                                                                     np.int8)})
