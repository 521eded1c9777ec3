"""d-eggs' adaptive noise scaling (its ADAPTIVE_NOISE_MODE 1) for the EGG.

Every matrix and embedding row and column and every vector element has an int8 overlay, 64 at the
start. After each update an overlay whose row, column or element had a weight change gains 5, the
others lose 1, clipped to +-127. The forward scales that position's noise by clip(overlay, 0, 64) / 64
(kernels/noise/gains.py: off below 0, scaled down below 64, unscaled from 64). The vote ignores the
gains, as d-eggs' does, so a row whose noise is off can still move and bring its noise back.

The overlay is laid out as the gains (kernels/noise/gains.py): per tensor in id order, a vector's
elements, or a matrix's columns (d_in) then rows (d_out).
"""

import numpy as np

from eggnog.kernels.noise.gains import GAIN_ONE, gain_offsets

OVERLAY_START = 64
OVERLAY_GAIN = 5  # where a weight of the row / column / element changed
OVERLAY_DECAY = 1  # everywhere else
OVERLAY_LIMIT = 127


def layout_of(model):
    return [(t.name, t.shape, t.kind, t.offset) for t in model.tensors]


def initial_overlay(model):
    return np.full(gain_offsets(layout_of(model))[1], OVERLAY_START, np.int8)


def changed_positions(model, before, after):
    """bool per overlay position: did a weight of that row, column or element change?"""
    hits = []
    for t in model.tensors:
        changed = before[t.offset:t.offset + t.size] != after[t.offset:t.offset + t.size]
        if t.kind == "vector":
            hits.append(changed)
        else:
            grid = changed.reshape(t.shape)
            hits += [grid.any(axis=0), grid.any(axis=1)]
    return np.concatenate(hits)


def updated_overlay(overlay, model, before, after):
    step = np.where(changed_positions(model, before, after), OVERLAY_GAIN, -OVERLAY_DECAY)
    return np.clip(overlay.astype(np.int64) + step, -OVERLAY_LIMIT, OVERLAY_LIMIT).astype(np.int8)


def gains_of(overlay):
    return np.clip(overlay, 0, GAIN_ONE).astype(np.uint8)


def check_overlay(overlay, model):
    """A stored overlay must fit the model: the length of its gains."""
    expected = gain_offsets(layout_of(model))[1]
    return overlay.dtype == np.int8 and overlay.shape == (expected,)
