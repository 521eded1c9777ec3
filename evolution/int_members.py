"""The parameters of integer EGGROLL's members, written out: what `IntEggroll.ask` returns.

Member g belongs to pair p = g // 2 with sign s = +1 (even g) or -1 (odd g); its noise is the pair's
stream of each tensor (kernels/egg/int_matmul.py's docstring; the noise kind is the model's):

    vector v (n,)              v + (a1 * a2 * s) >> (4 + sigma_shift),  a1 = noise[0:n], a2 = noise[n:2n]
    matrix W (d_out, d_in)     W + (s * A B^T) >> (4 + sigma_shift),    B = noise[0:d_in], A = noise[d_in:]

each clipped to +-127, with adaptive-noise gains scaling a1, B and A first (kernels/noise/gains.py).
A vector's and an embedding row's member are exactly what the EGG's kernels evaluate (egg_vector,
egg_embedding). The fused matmul applies the same A and B to its input before shifting,
((x . B) * s A) >> shift, so it rounds once per product where the dense member rounds per weight:
its members are these noise rows, not this int8 matrix.
"""

import numpy as np

from eggnog.evolution.noise_overlay import layout_of
from eggnog.kernels.egg.int_math import FIXED_POINT
from eggnog.kernels.noise.gains import gain_offsets, gain_width, scaled_reference
from eggnog.kernels.noise.reference import member_noise_rows


def member_signs(first_member, count):
    """(pairs, signs) of members first_member .. first_member + count - 1."""
    members = first_member + np.arange(count, dtype=np.int64)
    return members >> 1, 1 - 2 * (members & 1)


def noise_rows(model, tensor, prefix, pairs, gain=None):
    """The noise a tensor's members draw from each pair's stream, int64: (a1, a2) for a vector,
    (A (pairs, d_out), B (pairs, d_in)) otherwise; `gain` (uint8, the tensor's gains) scales what the
    kernels scale."""
    if tensor.kind == "vector":
        n = tensor.shape[0]
        rows = member_noise_rows(prefix, pairs, 2 * n, model.noise_kind)
        first, second = rows[:, :n], rows[:, n:]
        return (first if gain is None else scaled_reference(first, gain)), second
    d_out, d_in = tensor.shape
    rows = member_noise_rows(prefix, pairs, d_in + d_out, model.noise_kind)
    if gain is not None:
        rows = scaled_reference(rows, gain)
    return rows[:, d_in:], rows[:, :d_in]


def perturbed_members(model, params, prefixes, first_member, count, sigma_shift, gains=None):
    """(count, n_params) int8: each member's flat parameters (`params`: the flat int8 host vector,
    `prefixes`: each tensor's noise prefix at the step, `gains`: the model's flat gains or None)."""
    pairs, signs = member_signs(first_member, count)
    shift = FIXED_POINT + sigma_shift
    offsets, _ = gain_offsets(layout_of(model))
    out = np.empty((count, model.n_params), np.int8)
    for t, at in zip(model.tensors, offsets):
        gain = None if gains is None else gains[at:at + gain_width(t.shape, t.kind)]
        first, second = noise_rows(model, t, prefixes[t.name], pairs, gain)
        if t.kind == "vector":
            delta = (first * second * signs[:, None]) >> shift
        else:
            delta = (signs[:, None, None] * first[:, :, None] * second[:, None, :]) >> shift
        weights = params[t.offset:t.offset + t.size].astype(np.int64)
        out[:, t.offset:t.offset + t.size] = np.clip(weights + delta.reshape(count, t.size), -127, 127)
    return out
