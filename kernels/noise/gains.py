"""Per-position noise gains of the EGG forward (d-eggs' adaptive noise scaling).

A gain g in [0, 64] scales one noise value n of a tensor's stream to (n * g) >> 6 (floor), before the
member's sign is applied; g = 64 leaves n as it is, so a run whose gains are all 64 is bit-identical
to one without gains. A tensor's gains follow its noise stream:

    matrix W (d_out, d_in), embedding (V, D):  gain[0:d_in] scales B (columns), gain[d_in:] A (rows)
    vector (n,):                               gain[0:n] scales a1 (elements); a2 is never scaled

The gains come from the strategy's overlay (evolution/noise_overlay.py).
"""

import numpy as np

GAIN_ONE = 64
GAIN_SHIFT = 6


def gain_width(shape, kind):
    """Gains of one tensor: its elements for a vector, columns + rows otherwise."""
    return shape[0] if kind == "vector" else shape[-1] + shape[0]


def gain_offsets(layout):
    """Offset of each tensor's gains in the flat gain array of a model, and the total length;
    `layout`: (name, shape, kind, offset) per tensor id (egg_layout)."""
    offsets, at = [], 0
    for _, shape, kind, _ in layout:
        offsets.append(at)
        at += gain_width(shape, kind)
    return np.array(offsets, np.int64), at


def scaled_reference(noise, gain):
    """NumPy: noise (..., w) scaled by gain (w,) as int64."""
    return (np.asarray(noise, np.int64) * np.asarray(gain, np.int64)) >> GAIN_SHIFT


def kernel_args(gain):
    """(gain array, scaled flag) for a CPU kernel: an empty array and False without gains."""
    if gain is None:
        return np.zeros(1, np.uint8), False
    return np.ascontiguousarray(gain, np.uint8), True


def device_args(gain):
    """(device gain array, scaled flag) for a CUDA kernel."""
    from eggnog.kernels.core.cuda_api import on_device

    array, scaled = kernel_args(gain) if not hasattr(gain, "copy_to_host") else (gain, True)
    return on_device(array), scaled


def random_gains(rng, width):
    """Test cases: gains over the whole range, with the ends 0 and 64 present."""
    gain = rng.integers(0, GAIN_ONE + 1, width).astype(np.uint8)
    gain[:2] = (0, GAIN_ONE)
    return gain
