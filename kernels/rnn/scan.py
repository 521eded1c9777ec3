"""MinGRU recurrence h_t = a_t h_{t-1} + b_t with the gate math fused in (fp32, linear space):

    z = sigmoid(k),  a = 1 - z = sigmoid(-k),  b = z * g(u),  g(u) = u + 0.5 (u >= 0) else sigmoid(u)

Inputs are (batch, T, channels), channels contiguous; an optional carried state h0 (batch, channels)
is already positive (never passed through g again). The scan stays in linear space: the pairs
(a, b) are bounded, so nothing overflows (cumsum + logcumsumexp loses ~1e-2 relative accuracy at
T = 64K in fp32).

More in docs/internals.md (kernels/rnn/scan.py)."""

import math
from typing import Any

import numba
import numpy as np

from eggnog.kernels.core.array_types import Float32Array, Float64Array, FloatArray
from eggnog.kernels.core.cuda_api import (
    BOOL,
    F32_1D,
    F32_2D,
    I64,
    blocks,
    cuda,
    device_function,
    f64,
    flat,
    kernel,
    on_device,
    require,
)
from eggnog.kernels.core.cuda_fast_math import reciprocal_approx
from eggnog.kernels.core.placement import BackendArray
from eggnog.kernels.core.registry import op, registered
from eggnog.kernels.core.tuning import Tunable
from eggnog.kernels.rnn.scan_cpu import backward_loop, forward_loop
from eggnog.kernels.rnn.scan_layout import LANES, SLOT_VARIANTS, SLOTS, STEPS, plan
from eggnog.kernels.rnn.scan_roofline import ROOFLINE_WORKLOADS, roofline  # noqa: F401 (the static report's)

FORWARD_TOLERANCE = (1e-5, 1e-6)  # h > 0: relative
BACKWARD_TOLERANCE = (1e-5, 1e-5)
PAST_K = np.float32(-1e30)  # k of a step past the sequence: exp underflows to 0, so a = 1 and b = 0 exactly


# ---- cases and shape checks ----------------------------------------------------------------------

def _sequences(rng):
    """(k, u, h0 or None) covering the CUDA launch plans (scan_layout.plan): one step, one channel and
    four; three tiles (T not a multiple of 64) over 3 of a block's 4 channels; three channel groups,
    the last partial; and T cut into two segments of several tiles, without and with a carried state."""
    for batch, steps, channels, carried in ((1, 1, 1, False), (2, 130, 3, True), (3, 65, 90, False),
                                            (1, 1, 4, True), (2, 300, 40, False), (1, 260, 5, True)):
        k, u = (rng.normal(size=(batch, steps, channels)).astype(np.float32) for _ in range(2))
        h0 = np.abs(rng.normal(size=(batch, channels))).astype(np.float32) if carried else None
        yield k, u, h0


def _forward_cases(rng):
    for k, u, h0 in _sequences(rng):
        yield (k, u) if h0 is None else (k, u, h0)


def _backward_cases(rng):
    for k, u, h0 in _sequences(rng):
        h = reference_scan_forward(k, u, h0).astype(np.float32)
        grad_h = rng.normal(size=k.shape).astype(np.float32)
        yield (grad_h, k, u, h) if h0 is None else (grad_h, k, u, h, h0)


def _step_cases(rng):
    for batch, channels, carried in ((1, 1, False), (2, 5, True), (3, 100, True)):
        k, u = (rng.normal(size=(batch, channels)).astype(np.float32) for _ in range(2))
        yield (k, u, np.abs(rng.normal(size=(batch, channels))).astype(np.float32)) if carried else (k, u)


def _check(k, u, state, dims, *more):
    """k, u (and grad_h, h) of one shape with `dims` axes; the state, if any, (batch, channels)."""
    arrays = (k, u, *more)
    shapes = ", ".join(str(tuple(a.shape)) for a in arrays)
    require(len(k.shape) == dims and all(tuple(a.shape) == tuple(k.shape) for a in arrays),
            f"the scan takes arrays of one shape with {dims} axes, got {shapes}")
    if state is not None:
        want = (k.shape[0], k.shape[dims - 1])
        require(tuple(state.shape) == want, f"the scan's state is (batch, channels) {want}, got {tuple(state.shape)}")


def _check_out(out, *shapes, dtype=np.float32):
    """`out`: None, or one array of each of `shapes` (a tuple of them where there are several), of `dtype`
    (the reference: any float type)."""
    if out is None:
        return None
    arrays = out if isinstance(out, tuple) else (out,)
    got = ", ".join(f"{getattr(a, 'dtype', '?')} {tuple(getattr(a, 'shape', ()))}" for a in arrays)
    fits = [tuple(a.shape) == s and (a.dtype == dtype if dtype else a.dtype.kind == "f")
            for a, s in zip(arrays, shapes)]
    require(len(arrays) == len(shapes) and all(fits),
            f"the scan writes {np.dtype(dtype).name if dtype else 'float'} {', '.join(map(str, shapes))}, "
            f"got out={got}")
    return arrays


def _into(out, i, value):
    """value stored into out[i] (a host array) where out is given, else value itself."""
    if out is None:
        return value
    out[i][...] = value
    return out[i]


# ---- NumPy reference (float64, sequential) ---------------------------------------------------------

def _gates64(k, u):
    k, u = f64(k), f64(u)
    z = 1.0 / (1.0 + np.exp(-k))
    su = 1.0 / (1.0 + np.exp(-u))
    g = np.where(u >= 0, u + 0.5, su)
    dg = np.where(u >= 0, 1.0, su * (1.0 - su))
    return z, g, dg


SEQUENCE = "float[batch, steps, channels]"


@op(cases=_forward_cases, tolerance=FORWARD_TOLERANCE,
    args={"k": SEQUENCE, "u": SEQUENCE, "h0": "float[batch, channels] | None", "out": f"{SEQUENCE} | None"})
def reference_scan_forward(k: FloatArray, u: FloatArray, h0: FloatArray | None = None,
                           out: FloatArray | None = None) -> Float64Array:
    """h (batch, steps, channels), the MinGRU states after every step: h_t = (1 - z_t) h_{t-1} + z_t g(u_t)
    with z = sigmoid(k) (the gate math: this module's docstring). Float64 here; float32 on cpu and cuda.

    k: the gate pre-activations, u: the candidate pre-activations, both time-major within a batch row and
    channels contiguous. h0: the state entering step 0 (a previous call's last step, already positive:
    not passed through g again), or None for zeros. out: an array to write h into and return (on cuda a
    device array, so nothing is allocated), or None for a new one."""
    _check(k, u, h0, 3)
    out = _check_out(out, tuple(k.shape), dtype=None)
    z, g, _ = _gates64(k, u)
    h = np.empty(z.shape, dtype=np.float64)
    state = np.zeros((z.shape[0], z.shape[2])) if h0 is None else f64(h0)
    for t in range(z.shape[1]):
        state = (1.0 - z[:, t]) * state + z[:, t] * g[:, t]
        h[:, t] = state
    return _into(out, 0, h)


@op(cases=_step_cases, tolerance=FORWARD_TOLERANCE,
    args={"k": "float[batch, channels]", "u": "float[batch, channels]", "h_prev": "float[batch, channels] | None",
          "out": "float[batch, channels] | None"})
def reference_scan_step(k: FloatArray, u: FloatArray, h_prev: FloatArray | None = None,
                        out: FloatArray | None = None) -> Float64Array:
    """h (batch, channels): one step of the scan, for generating byte by byte: h = h_prev + z (g(u) - h_prev),
    z = sigmoid(k), equal to scan_forward over a sequence of one step.

    k, u: this step's gate and candidate pre-activations. h_prev: the state before it (scan_forward's last
    step or the previous scan_step's h), or None for zeros. out: an array to write h into and return, or
    None for a new one."""
    _check(k, u, h_prev, 2)
    out = _check_out(out, tuple(k.shape), dtype=None)
    z, g, _ = _gates64(k, u)
    return _into(out, 0, z * g if h_prev is None else f64(h_prev) + z * (g - f64(h_prev)))


# out is a tuple of three arrays (dk, du, dh0), which the grammar has no word for: _check_out checks it
@op(cases=_backward_cases, tolerance=BACKWARD_TOLERANCE,
    args={"grad_h": SEQUENCE, "k": SEQUENCE, "u": SEQUENCE, "h": SEQUENCE, "h0": "float[batch, channels] | None",
          "out": "any | None"})
def reference_scan_backward(grad_h: FloatArray, k: FloatArray, u: FloatArray, h: FloatArray,
                            h0: FloatArray | None = None,
                            out: Any = None) -> tuple[Float64Array, Float64Array, Float64Array]:
    """(dk, du, dh0): the gradients of a loss with respect to k and u (batch, steps, channels) and to the
    entering state h0 (batch, channels; returned even when h0 is None), by the reverse scan
    lambda_t = grad_h_t + a_{t+1} lambda_{t+1}, a = sigmoid(-k).

    grad_h: the loss's gradient with respect to every output h. k, u, h0: the forward's arguments; h: the
    forward's output (scan_forward(k, u, h0)), which gives each step's previous state. out: a tuple of three
    arrays (dk, du, dh0) to write into and return, or None for new ones."""
    _check(k, u, h0, 3, grad_h, h)
    out = _check_out(out, tuple(k.shape), tuple(k.shape), (k.shape[0], k.shape[2]), dtype=None)
    z, g, dg = _gates64(k, u)
    a = 1.0 - z
    batch, steps, channels = z.shape
    previous = np.concatenate([np.zeros((batch, 1, channels)) if h0 is None else f64(h0)[:, None],
                               f64(h)[:, :-1]], axis=1)
    lam = np.zeros((batch, channels))
    dk, du = np.empty_like(z), np.empty_like(z)
    for t in range(steps - 1, -1, -1):
        lam = f64(grad_h[:, t]) + (a[:, t + 1] * lam if t + 1 < steps else 0.0)
        dk[:, t] = z[:, t] * (1.0 - z[:, t]) * lam * (g[:, t] - previous[:, t])
        du[:, t] = lam * z[:, t] * dg[:, t]
    return _into(out, 0, dk), _into(out, 1, du), _into(out, 2, a[:, 0] * lam)


# ---- CPU twin (scan_cpu.py) ------------------------------------------------------------------------

def _f32(x):
    return np.ascontiguousarray(x, np.float32)


@op
def cpu_scan_forward(k: Float32Array, u: Float32Array, h0: Float32Array | None = None,
                     out: Float32Array | None = None) -> Float32Array:
    _check(k, u, h0, 3)
    out = _check_out(out, tuple(k.shape))
    h0 = np.zeros((k.shape[0], k.shape[2]), np.float32) if h0 is None else _f32(h0)
    h = np.empty(k.shape, dtype=np.float32) if out is None else out[0]
    forward_loop(_f32(k), _f32(u), h0, h)
    return h


@op
def cpu_scan_backward(grad_h: Float32Array, k: Float32Array, u: Float32Array, h: Float32Array,
                      h0: Float32Array | None = None,
                      out: Any = None) -> tuple[Float32Array, Float32Array, Float32Array]:
    _check(k, u, h0, 3, grad_h, h)
    out = _check_out(out, tuple(k.shape), tuple(k.shape), (k.shape[0], k.shape[2]))
    h0 = np.zeros((k.shape[0], k.shape[2]), np.float32) if h0 is None else _f32(h0)
    dk, du, dh0 = (np.empty(k.shape, np.float32), np.empty(k.shape, np.float32),
                   np.empty(h0.shape, np.float32)) if out is None else out
    backward_loop(_f32(grad_h), _f32(k), _f32(u), _f32(h), h0, dk, du, dh0)
    return dk, du, dh0


@op
def cpu_scan_step(k: Float32Array, u: Float32Array, h_prev: Float32Array | None = None,
                  out: Float32Array | None = None) -> Float32Array:
    _check(k, u, h_prev, 2)
    out = _check_out(out, tuple(k.shape))
    h = cpu_scan_forward(np.asarray(k, np.float32)[:, None, :], np.asarray(u, np.float32)[:, None, :], h_prev)
    return _into(out, 0, h[:, 0])


# ---- CUDA: gate math --------------------------------------------------------------------------------
# One exp and one approximate reciprocal a gate (cuda_fast_math), never an IEEE division:
# t = exp(-|k|), r = 1 / (1 + t) give sigmoid(k) and sigmoid(-k) as r and t r, so no 1 - z
# cancellation and no overflow.

@device_function
def _gates_gpu(kv):
    """(sigmoid(k), sigmoid(-k))."""
    t = math.exp(-abs(kv))
    r = reciprocal_approx(np.float32(1.0) + t)
    return (r, t * r) if kv >= 0 else (t * r, r)


@device_function
def _candidate_fast(u):
    """(g(u), g'(u)), without a branch: a warp's lanes take both signs of u."""
    t = math.exp(min(u, np.float32(0.0)))
    s = t * reciprocal_approx(np.float32(1.0) + t)  # sigmoid(u) where u < 0
    positive = u >= 0
    return (u + np.float32(0.5) if positive else s), (np.float32(1.0) if positive else s * (np.float32(1.0) - s))


@device_function
def _step_terms(kv, uv):
    """(a, b) of h = a h_prev + b: a = sigmoid(-k), b = sigmoid(k) g(u)."""
    z, a = _gates_gpu(kv)
    g, _ = _candidate_fast(uv)
    return a, z * g


# ---- CUDA: where a thread works (scan_layout.py) ------------------------------------------------------
# Element and shared-memory indices are unsigned (no negative-index wraparound code) and advance by
# adding the channel stride, never multiplying, inside the loops.

@device_function
def _place(slots, steps, channels, seg_len, per_row, first):
    """This thread's (slot along time, lane and block width in channels (unsigned), batch row, channel,
    whether the channel exists, flat index of (row, step 0, channel) (unsigned), segment start, segment
    end). Blocks of `slots` threads a channel run (row, channel group, segment), segments fastest: `per_row`
    segments launched from segment `first`. A lane past the last channel reads the last one (in bounds,
    never stored)."""
    width = cuda.blockDim.x // slots
    slot = cuda.threadIdx.x // width
    lane = cuda.threadIdx.x - slot * width
    pair = cuda.blockIdx.x // per_row
    segment = cuda.blockIdx.x - pair * per_row + first
    groups = (channels + width - 1) // width
    b = pair // groups
    c = (pair - b * groups) * width + lane
    row = np.uint64((np.int64(b) * steps) * channels + min(c, channels - 1))
    begin = segment * seg_len
    return (slot, np.uint64(lane), np.uint64(width), b, c, c < channels, row, begin,
            min(steps, begin + seg_len))


# ---- CUDA: forward ----------------------------------------------------------------------------------
# One template, two kernels a block size (slots threads a channel): the scan (start from the entering
# state, write h) and, for segmented calls, the fold (start from 0, also multiply the a's: the segment's
# map, left in h at its first two steps for the carry pass, which overwrites the first with the segment's
# entering state). Steps past the sequence's end take the identity map (a = 1, b = 0).

def _forward_template(fold, slots=SLOTS):
    skip = 1 if fold else 0  # the fold leaves out the last segment (its map is never needed)
    tile, parts = STEPS * slots, 2 * slots * LANES  # parts: shared words of the per-thread maps, two buffers

    def forward(k, u, h0, carried, h, steps, channels, seg_len, segments):
        slot, lane, width, b, c, live, row, begin, end = _place(slots, steps, channels, seg_len,
                                                                segments - skip, 0)
        tid, stride = np.uint64(cuda.threadIdx.x), np.uint64(channels)
        part_a = cuda.shared.array(parts, numba.float32)
        part_b = cuda.shared.array(parts, numba.float32)
        a = cuda.local.array(STEPS, numba.float32)
        bb = cuda.local.array(STEPS, numba.float32)
        one, zero = np.float32(1.0), np.float32(0.0)
        state, prod = zero, one
        if not fold:
            if segments > 1:
                state = h[row + np.uint64(begin) * stride]  # the carry pass's entering state
            elif carried:
                state = h0[b, min(c, channels - 1)]
        half = np.uint64(0)
        for t0 in range(begin, end, tile):
            first = t0 + slot * STEPS
            valid = np.int32(max(0, min(end - first, STEPS)))  # steps of this thread in the sequence
            base = row + np.uint64(first) * stride
            e = base
            for i in range(STEPS):  # loads first: 2 STEPS independent loads in flight
                kv, uv = PAST_K, zero
                if i < valid:
                    kv, uv = k[e], u[e]
                a[i], bb[i] = _step_terms(kv, uv)
                e += stride
            ta, tb = one, zero
            for i in range(STEPS):
                ta, tb = ta * a[i], a[i] * tb + bb[i]
            part_a[half + tid] = ta
            part_b[half + tid] = tb
            cuda.syncthreads()
            mine = state
            at = half + lane
            for q in range(slots):  # the state entering each slot: this tile's maps after the carry
                if q == slot:
                    mine = state
                qa = part_a[at]
                state = qa * state + part_b[at]
                if fold:
                    prod *= qa
                at += width
            if not fold:
                e = base
                for i in range(STEPS):
                    mine = a[i] * mine + bb[i]
                    if live and i < valid:
                        h[e] = mine
                    e += stride
            half = np.uint64(parts // 2) - half
        if fold and slot == 0 and live:
            h[row + np.uint64(begin) * stride] = prod
            h[row + np.uint64(begin + 1) * stride] = state

    forward.__name__ = forward.__qualname__ = _name("forward_fold_cuda" if fold else "forward_scan_cuda", slots)
    signature = (F32_1D, F32_1D, F32_2D, BOOL, F32_1D, I64, I64, I64, I64)
    return kernel(signature, block=slots * LANES, launch_bounds=_bounds(slots))(forward)


def _name(kernel_name, slots):
    """The default block size keeps the plain names (the static report's); the others are suffixed."""
    return kernel_name if slots == SLOTS else f"{kernel_name}_slots{slots}"


def _bounds(slots):
    """(most threads a block, blocks an SM): 768 threads an SM at every block size, 85 registers a thread."""
    return slots * LANES, max(1, 3 * SLOTS // slots)


VARIANTS = tuple(f"slots{n}" for n in SLOT_VARIANTS)
DEFAULT = f"slots{SLOTS}"
_FORWARD = {f"slots{n}": (n, _forward_template(False, n), _forward_template(True, n)) for n in SLOT_VARIANTS}
_, forward_scan_cuda, forward_fold_cuda = _FORWARD[DEFAULT]


@kernel((F32_1D, F32_2D, BOOL, I64, I64, I64, I64))
def forward_carry_cuda(h, h0, carried, steps, channels, seg_len, segments):
    """Each segment's map (A, B at its first two steps of h) -> the state entering it (at its first
    step), sequentially over segments per (batch, channel)."""
    i = cuda.grid(1)
    if i < h.size // steps:
        b, c = i // channels, i % channels
        state = h0[b, c] if carried else np.float32(0.0)
        for j in range(segments):
            at = (np.int64(b) * steps + j * seg_len) * channels + c
            if j + 1 < segments:  # the last segment is never folded
                ma, mb = h[at], h[at + channels]
                h[at] = state
                state = ma * state + mb
            else:
                h[at] = state


# ---- CUDA: backward ---------------------------------------------------------------------------------
# The forward's template run from each segment's end: a thread holds G, a, and the two factors of dk
# and du of its 8 steps; its map takes lambda after its last step (which needs a of the step after it,
# one more load of k) to lambda at its first. The fold leaves (A, B) in (dk, du) at the segment's first
# step, the carry pass overwrites dk there with lambda after the segment.

def _backward_template(fold, slots=SLOTS):
    skip = 1 if fold else 0  # the fold leaves out the first segment (its map is never needed)
    tile, parts = STEPS * slots, 2 * slots * LANES

    def backward(grad_h, k, u, h, h0, carried, dk, du, dh0, steps, channels, seg_len, segments):
        slot, lane, width, b, c, live, row, begin, end = _place(slots, steps, channels, seg_len,
                                                                segments - skip, skip)
        tid, stride = np.uint64(cuda.threadIdx.x), np.uint64(channels)
        part_a = cuda.shared.array(parts, numba.float32)
        part_b = cuda.shared.array(parts, numba.float32)
        gs = cuda.local.array(STEPS, numba.float32)
        a = cuda.local.array(STEPS, numba.float32)
        dks = cuda.local.array(STEPS, numba.float32)
        dus = cuda.local.array(STEPS, numba.float32)
        one, zero = np.float32(1.0), np.float32(0.0)
        lam, prod = zero, one
        if not fold and segments > 1:
            lam = dk[row + np.uint64(begin) * stride]  # the carry pass's lambda after this segment
        start = zero  # h before step 0
        if carried:
            start = h0[b, min(c, channels - 1)]
        half = np.uint64(0)
        last = begin + (end - begin - 1) // tile * tile
        for j in range((end - begin + tile - 1) // tile):  # counted up: the static model reads its trips
            first = last - j * tile + slot * STEPS
            valid = np.int32(max(0, min(end - first, STEPS)))  # steps of this thread in the sequence
            base = row + np.uint64(first) * stride
            after = zero  # a of the step after this thread's last (none past the sequence)
            if steps - first > STEPS:
                _, after = _gates_gpu(k[base + np.uint64(STEPS) * stride])
            e = base
            for i in range(STEPS):  # loads first: 4 STEPS + 1 independent loads in flight
                gv, kv, uv, before = zero, PAST_K, zero, start
                if i < valid:
                    gv, kv, uv = grad_h[e], k[e], u[e]
                    if i > 0 or first > 0:
                        before = h[e - stride]
                z, ai = _gates_gpu(kv)
                g, dg = _candidate_fast(uv)
                gs[i], a[i] = gv, ai
                dks[i] = z * ai * (g - before)
                dus[i] = z * dg
                e += stride
            ta, tb, an = one, zero, after
            for i in range(STEPS - 1, -1, -1):
                ta, tb, an = ta * an, gs[i] + an * tb, a[i]
            part_a[half + tid] = ta
            part_b[half + tid] = tb
            cuda.syncthreads()
            mine = lam
            at = half + lane + np.uint64(slots) * width
            for q in range(slots - 1, -1, -1):  # lambda after each slot: the later slots' maps after the carry
                if q == slot:
                    mine = lam
                at -= width
                qa = part_a[at]
                lam = qa * lam + part_b[at]
                if fold:
                    prod *= qa
            if not fold:
                an = after
                e = base + np.uint64(STEPS) * stride
                for i in range(STEPS - 1, -1, -1):
                    e -= stride
                    mine = gs[i] + an * mine
                    an = a[i]
                    if live and i < valid:
                        dk[e] = dks[i] * mine
                        du[e] = dus[i] * mine
                if live and first == 0:
                    dh0[b, c] = an * mine
            half = np.uint64(parts // 2) - half
        if fold and slot == 0 and live:
            dk[row + np.uint64(begin) * stride] = prod
            du[row + np.uint64(begin) * stride] = lam

    backward.__name__ = backward.__qualname__ = _name("backward_fold_cuda" if fold else "backward_scan_cuda", slots)
    signature = (F32_1D, F32_1D, F32_1D, F32_1D, F32_2D, BOOL, F32_1D, F32_1D, F32_2D, I64, I64, I64, I64)
    return kernel(signature, block=slots * LANES, launch_bounds=_bounds(slots))(backward)


_BACKWARD = {f"slots{n}": (n, _backward_template(False, n), _backward_template(True, n)) for n in SLOT_VARIANTS}
_, backward_scan_cuda, backward_fold_cuda = _BACKWARD[DEFAULT]
# every variant bound by name too: the PTX inventory finds kernels among module attributes
forward_scan_cuda_slots4, forward_fold_cuda_slots4 = _FORWARD["slots4"][1:]
forward_scan_cuda_slots16, forward_fold_cuda_slots16 = _FORWARD["slots16"][1:]
backward_scan_cuda_slots4, backward_fold_cuda_slots4 = _BACKWARD["slots4"][1:]
backward_scan_cuda_slots16, backward_fold_cuda_slots16 = _BACKWARD["slots16"][1:]


@kernel((F32_1D, F32_1D, I64, I64, I64, I64))
def backward_carry_cuda(dk, du, steps, channels, seg_len, segments):
    """Each segment's map (A in dk, B in du at its first step) -> lambda after it (in dk there), from
    the last segment back."""
    i = cuda.grid(1)
    if i < dk.size // steps:
        b, c = i // channels, i % channels
        lam = np.float32(0.0)
        for j in range(segments - 1, -1, -1):
            at = (np.int64(b) * steps + j * seg_len) * channels + c
            if j > 0:  # segment 0 is never folded
                ma, mb = dk[at], du[at]
                dk[at] = lam
                lam = ma * lam + mb
            else:
                dk[at] = lam


# ---- CUDA launchers ---------------------------------------------------------------------------------

def _device_out(out, i, shape):
    return cuda.device_array(shape, np.float32) if out is None else out[i]


@op
def cuda_scan_forward(k: BackendArray, u: BackendArray, h0: BackendArray | None = None,
                      out: BackendArray | None = None) -> BackendArray:
    """k, u: (batch, T, channels) float32 (device or host); returns h on the device (`out` if given), with
    the block size tuned for this GPU and shape (SCAN_FORWARD)."""
    return scan_forward_variant(SCAN_FORWARD.choose(k.shape), k, u, h0, out)


def scan_forward_variant(variant, k, u, h0=None, out=None):
    """cuda_scan_forward with the block size `variant` (one of VARIANTS)."""
    _check(k, u, h0, 3)
    out = _check_out(out, tuple(k.shape))
    batch, steps, channels = (int(n) for n in k.shape)
    k, u = on_device(k, np.float32), on_device(u, np.float32)
    h = _device_out(out, 0, (batch, steps, channels))
    if h.size == 0:
        return h
    slots, scan_cuda, fold_cuda = _FORWARD[variant]
    threads, groups, segments, seg_len = plan(batch, steps, channels, slots)
    carried = h0 is not None
    h0 = on_device(h0, np.float32) if carried else h.reshape(batch * steps, channels)  # never read then
    args = (flat(k), flat(u), h0, carried, flat(h), steps, channels, seg_len, segments)
    if segments > 1:
        fold_cuda[batch * groups * (segments - 1), threads](*args)
        forward_carry_cuda[blocks(batch * channels)](flat(h), h0, carried, steps, channels, seg_len, segments)
    scan_cuda[batch * groups * segments, threads](*args)
    return h


@op
def cuda_scan_backward(grad_h: BackendArray, k: BackendArray, u: BackendArray, h: BackendArray,
                       h0: BackendArray | None = None,
                       out: Any = None) -> tuple[BackendArray, BackendArray, BackendArray]:
    """(dk, du, dh0) on the device (`out`'s arrays if given), with the block size tuned for this GPU and
    shape (SCAN_BACKWARD)."""
    return scan_backward_variant(SCAN_BACKWARD.choose(k.shape), grad_h, k, u, h, h0, out)


def scan_backward_variant(variant, grad_h, k, u, h, h0=None, out=None):
    """cuda_scan_backward with the block size `variant` (one of VARIANTS)."""
    _check(k, u, h0, 3, grad_h, h)
    batch, steps, channels = (int(n) for n in k.shape)
    out = _check_out(out, (batch, steps, channels), (batch, steps, channels), (batch, channels))
    grad_h, k, u, h = (on_device(a, np.float32) for a in (grad_h, k, u, h))
    dk, du = _device_out(out, 0, (batch, steps, channels)), _device_out(out, 1, (batch, steps, channels))
    dh0 = _device_out(out, 2, (batch, channels))
    if dk.size == 0:
        return dk, du, dh0
    slots, scan_cuda, fold_cuda = _BACKWARD[variant]
    threads, groups, segments, seg_len = plan(batch, steps, channels, slots)
    carried = h0 is not None
    h0 = on_device(h0, np.float32) if carried else dh0  # never read then
    args = (flat(grad_h), flat(k), flat(u), flat(h), h0, carried, flat(dk), flat(du), dh0,
            steps, channels, seg_len, segments)
    if segments > 1:
        fold_cuda[batch * groups * (segments - 1), threads](*args)
        backward_carry_cuda[blocks(batch * channels)](flat(dk), flat(du), steps, channels, seg_len, segments)
    scan_cuda[batch * groups * segments, threads](*args)
    return dk, du, dh0


@kernel((F32_2D, F32_2D, F32_2D, BOOL, F32_2D))
def step_cuda(k, u, h_prev, carried, h):
    """One step for generation: h = h_prev + z (g(u) - h_prev), h_prev = 0 when not carried."""
    i = cuda.grid(1)
    if i < k.size:
        b, c = i // k.shape[1], i % k.shape[1]
        z, _ = _gates_gpu(k[b, c])
        g, _ = _candidate_fast(u[b, c])
        before = h_prev[b, c] if carried else np.float32(0.0)
        h[b, c] = before + z * (g - before)


@op
def cuda_scan_step(k: BackendArray, u: BackendArray, h_prev: BackendArray | None = None,
                   out: BackendArray | None = None) -> BackendArray:
    _check(k, u, h_prev, 2)
    out = _check_out(out, tuple(k.shape))
    k, u = on_device(k, np.float32), on_device(u, np.float32)
    h = _device_out(out, 0, tuple(int(n) for n in k.shape))
    carried = h_prev is not None
    step_cuda[blocks(k.shape[0] * k.shape[1])](k, u, on_device(h_prev, np.float32) if carried else k, carried, h)
    return h

# ---- tuning (kernels/core/tuning.py: python -m bench.gpu.tune) ------------------------------------------

_PROBLEMS = (("MinGRU LM 8 x 4096 x 1536", (8, 4096, 1536)), ("segmented scan 1 x 16384 x 128", (1, 16384, 128)))
_SMALL = ((2, 130, 3), (1, 260, 5), (3, 65, 90), (1, 520, 3))  # 3 tiles; 2 segments (of slots16 too); 3 groups


def _inputs(sizes, count):
    rng = np.random.default_rng(0)
    return [cuda.to_device(rng.normal(size=sizes).astype(np.float32)) for _ in range(count)]


def _run_forward(variant, sizes):
    k, u, h = _inputs(sizes, 3)
    return lambda: scan_forward_variant(variant, k, u, out=h)


def _run_backward(variant, sizes):
    grad_h, k, u, h, dk, du = _inputs(sizes, 6)
    dh0 = cuda.device_array((sizes[0], sizes[2]), np.float32)
    return lambda: scan_backward_variant(variant, grad_h, k, u, h, out=(dk, du, dh0))


SCAN_FORWARD = Tunable("scan_forward", VARIANTS, DEFAULT, _PROBLEMS, _run_forward, _SMALL)
SCAN_BACKWARD = Tunable("scan_backward", VARIANTS, DEFAULT, _PROBLEMS, _run_backward, _SMALL)
TUNABLES = (SCAN_FORWARD, SCAN_BACKWARD)

# the ops of this module by name, for callers: scan_backward(kernels, ...)
scan_backward = registered(reference_scan_backward)
scan_forward = registered(reference_scan_forward)
scan_step = registered(reference_scan_step)
