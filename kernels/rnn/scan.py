"""MinGRU recurrence h_t = a_t h_{t-1} + b_t with the gate math fused in (fp32, linear space):

    z = sigmoid(k),  a = 1 - z = sigmoid(-k),  b = z * g(u),  g(u) = u + 0.5 (u >= 0) else sigmoid(u)

Inputs are (batch, T, channels), channels contiguous; an optional carried state h0 (batch, channels)
is already positive (never passed through g again). The scan stays in linear space: the pairs
(a, b) are bounded, so nothing overflows (cumsum + logcumsumexp loses ~1e-2 relative accuracy at
T = 64K in fp32).

Parallel over T on the GPU in three launches: every chunk of CHUNK steps folds into one affine map
(A = prod a, B = its scan from 0); a sequential pass over chunks gives each chunk its incoming
state; every chunk then rescans itself from that state. The backward pass is the same scheme run in
reverse on the adjoint  lambda_t = G_t + a_{t+1} lambda_{t+1}, then

    dk_t = z_t (1 - z_t) lambda_t (g(u_t) - h_{t-1}),   du_t = lambda_t z_t g'(u_t),   dh0 = a_1 lambda_1.

Ops: scan_forward(k, u, h0=None) -> h; scan_backward(grad_h, k, u, h, h0=None) -> (dk, du, dh0);
scan_step(k, u, h_prev=None) -> h, one step of (batch, channels) for generation. The NumPy reference
is sequential in float64; the CPU twin is sequential in fp32 over T, vectorised over channels.
Both twins agree with the reference to a relative 1e-5 (forward, also at T = 65,536) and to 1e-5 of
the gradients' scale (backward); shapes that do not fit raise BadInput. The CUDA kernels build the
gates from one exp and one approximate reciprocal (rcp.approx, at most 1 ulp; no IEEE division), which
keeps them within a few ulp of the exact sigmoid: tests/gpu checks the same tolerances on hardware
(the simulator divides exactly).
"""

import math

import numba
import numpy as np

from eggnog.kernels.core.cpu_vector_math import exp32, sigmoid32
from eggnog.kernels.core.cuda_api import (
    F32_1D,
    F32_2D,
    F32_3D,
    I64,
    blocks,
    cuda,
    device_function,
    device_zeros,
    f64,
    flat,
    kernel,
    on_device,
    require,
)
from eggnog.kernels.core.cuda_fast_math import reciprocal_approx
from eggnog.kernels.core.loads import load_global_v4, store_global_f32x4
from eggnog.kernels.core.registry import op

CHUNK = 64
FORWARD_TOLERANCE = (1e-5, 1e-6)  # h > 0: relative
BACKWARD_TOLERANCE = (1e-5, 1e-5)


# ---- cases and shape checks ----------------------------------------------------------------------

def _sequences(rng):
    """(k, u, h0 or None): one step; three chunks with T not a multiple of CHUNK; and more than one
    block of 256 threads in every launch (batch * chunks * channels and batch * channels); then channels
    a multiple of 4 (the four-channel kernels): one step, and three chunks over more than one block."""
    for batch, steps, channels, carried in ((1, 1, 1, False), (2, 130, 3, True), (3, 65, 90, False),
                                            (1, 1, 4, True), (4, 129, 88, True)):
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


# ---- NumPy reference (float64, sequential) ---------------------------------------------------------

def _gates64(k, u):
    k, u = f64(k), f64(u)
    z = 1.0 / (1.0 + np.exp(-k))
    su = 1.0 / (1.0 + np.exp(-u))
    g = np.where(u >= 0, u + 0.5, su)
    dg = np.where(u >= 0, 1.0, su * (1.0 - su))
    return z, g, dg


@op(cases=_forward_cases, tolerance=FORWARD_TOLERANCE)
def reference_scan_forward(k, u, h0=None):
    _check(k, u, h0, 3)
    z, g, _ = _gates64(k, u)
    h = np.empty(z.shape, dtype=np.float64)
    state = np.zeros((z.shape[0], z.shape[2])) if h0 is None else f64(h0)
    for t in range(z.shape[1]):
        state = (1.0 - z[:, t]) * state + z[:, t] * g[:, t]
        h[:, t] = state
    return h


@op(cases=_step_cases, tolerance=FORWARD_TOLERANCE)
def reference_scan_step(k, u, h_prev=None):
    _check(k, u, h_prev, 2)
    z, g, _ = _gates64(k, u)
    return z * g if h_prev is None else f64(h_prev) + z * (g - f64(h_prev))


@op(cases=_backward_cases, tolerance=BACKWARD_TOLERANCE)
def reference_scan_backward(grad_h, k, u, h, h0=None):
    """(dk, du, dh0) of a loss whose gradient with respect to the outputs h is grad_h."""
    _check(k, u, h0, 3, grad_h, h)
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
    return dk, du, a[:, 0] * lam


# ---- CPU twin (fp32, sequential over T, parallel over (batch, channel tile)) -------------------------
# Each parallel iteration walks T for one batch row and a tile of channels, the channels innermost and
# contiguous, so the gate math (cpu_vector_math's exp, one division a gate) vectorises.

CPU_TILE = 256


@numba.njit(inline="always", error_model="numpy")
def _gates_cpu(kv):
    """(sigmoid(k), sigmoid(-k)) from one exp: no 1 - z cancellation."""
    t = exp32(-abs(kv))
    r = np.float32(1.0) / (np.float32(1.0) + t)
    return (r, t * r) if kv >= 0 else (t * r, r)


@numba.njit(inline="always", error_model="numpy")
def _candidate_cpu(uv):
    """(g(u), g'(u))."""
    s = sigmoid32(uv)
    return (uv + np.float32(0.5), np.float32(1.0)) if uv >= 0 else (s, s * (np.float32(1.0) - s))


@numba.njit(parallel=True, error_model="numpy", cache=True)
def _cpu_forward(k, u, h0, h):
    batch, steps, channels = k.shape
    tiles = (channels + CPU_TILE - 1) // CPU_TILE
    for bt in numba.prange(batch * tiles):
        b, c0 = bt // tiles, (bt % tiles) * CPU_TILE
        width = min(channels - c0, CPU_TILE)
        state = h0[b, c0:c0 + width].copy()
        for t in range(steps):
            kt, ut, ht = k[b, t, c0:c0 + width], u[b, t, c0:c0 + width], h[b, t, c0:c0 + width]
            for c in range(width):
                z, a = _gates_cpu(kt[c])
                g, _ = _candidate_cpu(ut[c])
                state[c] = a * state[c] + z * g
                ht[c] = state[c]


@op
def cpu_scan_forward(k, u, h0=None):
    _check(k, u, h0, 3)
    h0 = np.zeros((k.shape[0], k.shape[2]), np.float32) if h0 is None else np.ascontiguousarray(h0, np.float32)
    h = np.empty(k.shape, dtype=np.float32)
    _cpu_forward(np.ascontiguousarray(k, np.float32), np.ascontiguousarray(u, np.float32), h0, h)
    return h


@numba.njit(parallel=True, error_model="numpy", cache=True)
def _cpu_backward(grad_h, k, u, h, h0, dk, du, dh0):
    batch, steps, channels = k.shape
    tiles = (channels + CPU_TILE - 1) // CPU_TILE
    for bt in numba.prange(batch * tiles):
        b, c0 = bt // tiles, (bt % tiles) * CPU_TILE
        width = min(channels - c0, CPU_TILE)
        lam = np.zeros(width, np.float32)
        a_next = np.zeros(width, np.float32)  # sigmoid(-k) of step t + 1 (none after the last)
        for t in range(steps - 1, -1, -1):
            before = h[b, t - 1, c0:c0 + width] if t > 0 else h0[b, c0:c0 + width]
            kt, ut, gt = k[b, t, c0:c0 + width], u[b, t, c0:c0 + width], grad_h[b, t, c0:c0 + width]
            dkt, dut = dk[b, t, c0:c0 + width], du[b, t, c0:c0 + width]
            for c in range(width):
                z, a = _gates_cpu(kt[c])
                g, dg = _candidate_cpu(ut[c])
                lam[c] = gt[c] + a_next[c] * lam[c]
                dkt[c] = z * a * lam[c] * (g - before[c])
                dut[c] = lam[c] * z * dg
                a_next[c] = a
        dh0[b, c0:c0 + width] = a_next * lam


@op
def cpu_scan_backward(grad_h, k, u, h, h0=None):
    _check(k, u, h0, 3, grad_h, h)
    f32 = lambda x: np.ascontiguousarray(x, np.float32)  # noqa: E731
    h0 = np.zeros((k.shape[0], k.shape[2]), np.float32) if h0 is None else f32(h0)
    dk, du = np.empty(k.shape, np.float32), np.empty(k.shape, np.float32)
    dh0 = np.empty(h0.shape, np.float32)
    _cpu_backward(f32(grad_h), f32(k), f32(u), f32(h), h0, dk, du, dh0)
    return dk, du, dh0


@op
def cpu_scan_step(k, u, h_prev=None):
    _check(k, u, h_prev, 2)
    h = cpu_scan_forward(np.asarray(k, np.float32)[:, None, :], np.asarray(u, np.float32)[:, None, :], h_prev)
    return h[:, 0]


# ---- CUDA -------------------------------------------------------------------------------------------
# Each thread walks one chunk of one channel with a flat uint64 element index (unsigned: no negative-index
# wraparound code; the channel stride is added, never multiplied, in the loop). Steps go four at a time,
# loads first, so a thread has 8-10 independent loads in flight. The gates use one exp and one
# approximate reciprocal each (cuda_fast_math), never an IEEE division: t = exp(-|k|), r = 1 / (1 + t) give
# sigmoid(k) and sigmoid(-k) as r and t r, so no 1 - z cancellation and no overflow.

@device_function
def _gates_gpu(kv):
    """(sigmoid(k), sigmoid(-k))."""
    t = math.exp(-abs(kv))
    r = reciprocal_approx(np.float32(1.0) + t)
    return (r, t * r) if kv >= 0 else (t * r, r)


@device_function
def _candidate_fast(u):
    """(g(u), g'(u))."""
    if u >= 0:
        return u + np.float32(0.5), np.float32(1.0)
    t = math.exp(u)
    s = t * reciprocal_approx(np.float32(1.0) + t)
    return s, s * (np.float32(1.0) - s)


@device_function
def _step_terms(kv, uv):
    """(a, b) of h = a h_prev + b: a = sigmoid(-k), b = sigmoid(k) g(u)."""
    z, a = _gates_gpu(kv)
    g, _ = _candidate_fast(uv)
    return a, z * g


@device_function
def _fold(prod, acc, kv, uv):
    """A chunk's affine map (prod a, scan of b) extended by one step."""
    a, b = _step_terms(kv, uv)
    return prod * a, a * acc + b


@device_function
def _advance(state, kv, uv):
    a, b = _step_terms(kv, uv)
    return a * state + b


@device_function
def _four(x, i, s):
    return x[i], x[i + s], x[i + s + s], x[i + s + s + s]


@device_function
def chunk_start(i, n_chunks, steps, channels):
    """Flat index of the first element of thread i's chunk, the chunk's length, and (batch, chunk,
    channel); channels vary fastest over threads so loads coalesce."""
    b, j, c = i // (channels * n_chunks), (i // channels) % n_chunks, i % channels
    t0 = j * CHUNK
    return np.uint64((b * steps + t0) * channels + c), min(steps, t0 + CHUNK) - t0, b, j, c


@kernel((F32_1D, F32_1D, F32_3D, F32_3D, I64, I64))
def forward_chunks_cuda(k, u, chunk_a, chunk_b, steps, channels):
    """Fold each chunk into the affine map state -> A * state + B."""
    batch, n_chunks = chunk_a.shape[0], chunk_a.shape[1]
    i = cuda.grid(1)
    if i < batch * n_chunks * channels:
        e, n, b, j, c = chunk_start(i, n_chunks, steps, channels)
        s = np.uint64(channels)
        prod = np.float32(1.0)
        acc = np.float32(0.0)
        m = 0
        while m + 4 <= n:
            k0, k1, k2, k3 = _four(k, e, s)
            u0, u1, u2, u3 = _four(u, e, s)
            prod, acc = _fold(prod, acc, k0, u0)
            prod, acc = _fold(prod, acc, k1, u1)
            prod, acc = _fold(prod, acc, k2, u2)
            prod, acc = _fold(prod, acc, k3, u3)
            e += s + s + s + s
            m += 4
        while m < n:
            prod, acc = _fold(prod, acc, k[e], u[e])
            e += s
            m += 1
        chunk_a[b, j, c] = prod
        chunk_b[b, j, c] = acc


@kernel((F32_3D, F32_3D, F32_2D, F32_3D))
def forward_carry_cuda(chunk_a, chunk_b, h0, incoming):
    """The state entering every chunk: a sequential pass over chunks per (batch, channel)."""
    batch, n_chunks, channels = chunk_a.shape
    i = cuda.grid(1)
    if i < batch * channels:
        b, c = i // channels, i % channels
        state = h0[b, c]
        for j in range(n_chunks):
            incoming[b, j, c] = state
            state = chunk_a[b, j, c] * state + chunk_b[b, j, c]


@kernel((F32_1D, F32_1D, F32_3D, F32_1D, I64, I64))
def forward_apply_cuda(k, u, incoming, h, steps, channels):
    batch, n_chunks = incoming.shape[0], incoming.shape[1]
    i = cuda.grid(1)
    if i < batch * n_chunks * channels:
        e, n, b, j, c = chunk_start(i, n_chunks, steps, channels)
        s = np.uint64(channels)
        state = incoming[b, j, c]
        m = 0
        while m + 4 <= n:
            k0, k1, k2, k3 = _four(k, e, s)
            u0, u1, u2, u3 = _four(u, e, s)
            state = _advance(state, k0, u0)
            h[e] = state
            state = _advance(state, k1, u1)
            h[e + s] = state
            state = _advance(state, k2, u2)
            h[e + s + s] = state
            state = _advance(state, k3, u3)
            h[e + s + s + s] = state
            e += s + s + s + s
            m += 4
        while m < n:
            state = _advance(state, k[e], u[e])
            h[e] = state
            e += s
            m += 1


# ---- CUDA, four channels a thread (channels a multiple of 4): 16-byte loads and stores ------------------
# The same passes with each thread walking four adjacent channels of one chunk: one 16-byte load brings
# a step's k (or u, h, grad_h) of all four, so a warp moves 512 contiguous bytes an instruction and a
# step costs 2 (forward) or 4 (backward apply) load instructions per four elements instead of per one.

@device_function
def quad_start(i, n_chunks, steps, channels):
    """chunk_start for thread i over quads of channels: (flat index of its first element, the chunk's
    length, batch, chunk, first channel of the quad)."""
    quads = channels // 4
    b, j, q = i // (quads * n_chunks), (i // quads) % n_chunks, i % quads
    t0 = j * CHUNK
    return np.uint64((b * steps + t0) * channels + 4 * q), min(steps, t0 + CHUNK) - t0, b, j, 4 * q


@device_function
def _get4(row, c):
    """row[c:c + 4] of a per-chunk or per-batch row (chunk maps, carried states, h0)."""
    return row[c], row[c + 1], row[c + 2], row[c + 3]


@device_function
def _put4(row, c, v0, v1, v2, v3):
    row[c], row[c + 1], row[c + 2], row[c + 3] = v0, v1, v2, v3


@kernel((F32_1D, F32_1D, F32_3D, F32_3D, I64, I64))
def forward_chunks_quad_cuda(k, u, chunk_a, chunk_b, steps, channels):
    batch, n_chunks = chunk_a.shape[0], chunk_a.shape[1]
    i = cuda.grid(1)
    if i < batch * n_chunks * (channels // 4):
        e, n, b, j, c = quad_start(i, n_chunks, steps, channels)
        s = np.uint64(channels)
        one, zero = np.float32(1.0), np.float32(0.0)
        p0, p1, p2, p3, a0, a1, a2, a3 = one, one, one, one, zero, zero, zero, zero
        for _ in range(n):
            k0, k1, k2, k3 = load_global_v4(k, e)
            u0, u1, u2, u3 = load_global_v4(u, e)
            p0, a0 = _fold(p0, a0, k0, u0)
            p1, a1 = _fold(p1, a1, k1, u1)
            p2, a2 = _fold(p2, a2, k2, u2)
            p3, a3 = _fold(p3, a3, k3, u3)
            e += s
        _put4(chunk_a[b, j], c, p0, p1, p2, p3)
        _put4(chunk_b[b, j], c, a0, a1, a2, a3)


@kernel((F32_1D, F32_1D, F32_3D, F32_1D, I64, I64))
def forward_apply_quad_cuda(k, u, incoming, h, steps, channels):
    batch, n_chunks = incoming.shape[0], incoming.shape[1]
    i = cuda.grid(1)
    if i < batch * n_chunks * (channels // 4):
        e, n, b, j, c = quad_start(i, n_chunks, steps, channels)
        s = np.uint64(channels)
        h0, h1, h2, h3 = _get4(incoming[b, j], c)
        for _ in range(n):
            k0, k1, k2, k3 = load_global_v4(k, e)
            u0, u1, u2, u3 = load_global_v4(u, e)
            h0, h1 = _advance(h0, k0, u0), _advance(h1, k1, u1)
            h2, h3 = _advance(h2, k2, u2), _advance(h3, k3, u3)
            store_global_f32x4(h, np.int64(e), h0, h1, h2, h3)
            e += s


@op
def cuda_scan_forward(k, u, h0=None):
    """k, u: (batch, T, channels) float32 (device or host); returns h on the device."""
    _check(k, u, h0, 3)
    batch, steps, channels = k.shape
    n_chunks = (steps + CHUNK - 1) // CHUNK
    k, u = on_device(k, np.float32), on_device(u, np.float32)
    h0 = device_zeros((batch, channels)) if h0 is None else h0
    chunk_a, chunk_b = cuda.device_array((batch, n_chunks, channels), np.float32), \
        cuda.device_array((batch, n_chunks, channels), np.float32)
    incoming = cuda.device_array((batch, n_chunks, channels), np.float32)
    h = cuda.device_array((batch, steps, channels), np.float32)
    dims = (np.int64(steps), np.int64(channels))
    quad = channels % 4 == 0
    chunks, apply = (forward_chunks_quad_cuda, forward_apply_quad_cuda) if quad else \
        (forward_chunks_cuda, forward_apply_cuda)
    grid = blocks(batch * n_chunks * (channels // 4 if quad else channels))
    chunks[grid](flat(k), flat(u), chunk_a, chunk_b, *dims)
    forward_carry_cuda[blocks(batch * channels)](chunk_a, chunk_b, h0, incoming)
    apply[grid](flat(k), flat(u), incoming, flat(h), *dims)
    return h


@kernel((F32_2D, F32_2D, F32_2D, F32_2D))
def step_cuda(k, u, h_prev, h):
    """One step for generation: h = h_prev + z (g(u) - h_prev)."""
    i = cuda.grid(1)
    if i < k.size:
        b, c = i // k.shape[1], i % k.shape[1]
        z, _ = _gates_gpu(k[b, c])
        g, _ = _candidate_fast(u[b, c])
        h[b, c] = h_prev[b, c] + z * (g - h_prev[b, c])


@op
def cuda_scan_step(k, u, h_prev=None):
    _check(k, u, h_prev, 2)
    h_prev = device_zeros(k.shape) if h_prev is None else h_prev
    h = cuda.device_array(k.shape, np.float32)
    step_cuda[blocks(k.shape[0] * k.shape[1])](k, u, h_prev, h)
    return h


# ---- CUDA: chunked backward (steps from the end of each chunk; lambda needs a = sigmoid(-k) one step on)

@device_function
def _forget_after(k, e, s, last):
    """sigmoid(-k) of the step after element e (0 past the sequence's end)."""
    if last:
        return np.float32(0.0)
    _, a = _gates_gpu(k[e + s])
    return a


@device_function
def _four_back(x, i, s):
    return x[i], x[i - s], x[i - s - s], x[i - s - s - s]


@device_function
def _fold_back(prod, acc, a_next, gv, kv):
    """The adjoint's chunk map extended by one step back; also this step's a, for the step before."""
    _, a = _gates_gpu(kv)
    return prod * a_next, gv + a_next * acc, a


@device_function
def _adjoint_step(lam, a_next, gv, kv, uv, before):
    """One step back of the adjoint for one channel: (lambda_t, this step's a, dk_t, du_t)."""
    lam = gv + a_next * lam
    z, a = _gates_gpu(kv)
    g, dg = _candidate_fast(uv)
    return lam, a, z * (np.float32(1.0) - z) * lam * (g - before), lam * z * dg


@kernel((F32_1D, F32_1D, F32_3D, F32_3D, I64, I64))
def backward_chunks_cuda(grad_h, k, chunk_a, chunk_b, steps, channels):
    """Fold each chunk of the adjoint recurrence: lambda_start = A * lambda_after_chunk + B."""
    batch, n_chunks = chunk_a.shape[0], chunk_a.shape[1]
    i = cuda.grid(1)
    if i < batch * n_chunks * channels:
        e, n, b, j, c = chunk_start(i, n_chunks, steps, channels)
        s = np.uint64(channels)
        e += np.uint64(n - 1) * s  # the chunk's last element
        a_next = _forget_after(k, e, s, j * CHUNK + n >= steps)
        prod = np.float32(1.0)
        acc = np.float32(0.0)
        m = n
        while m >= 4:
            g0, g1, g2, g3 = _four_back(grad_h, e, s)
            k0, k1, k2, k3 = _four_back(k, e, s)
            prod, acc, a_next = _fold_back(prod, acc, a_next, g0, k0)
            prod, acc, a_next = _fold_back(prod, acc, a_next, g1, k1)
            prod, acc, a_next = _fold_back(prod, acc, a_next, g2, k2)
            prod, acc, a_next = _fold_back(prod, acc, a_next, g3, k3)
            e -= s + s + s + s  # wraps below the first element when the chunk is done: never read
            m -= 4
        while m > 0:
            prod, acc, a_next = _fold_back(prod, acc, a_next, grad_h[e], k[e])
            e -= s
            m -= 1
        chunk_a[b, j, c] = prod
        chunk_b[b, j, c] = acc


@kernel((F32_3D, F32_3D, F32_3D))
def backward_carry_cuda(chunk_a, chunk_b, after):
    """lambda just after every chunk (that is, at the next chunk's first step), from the end."""
    batch, n_chunks, channels = chunk_a.shape
    i = cuda.grid(1)
    if i < batch * channels:
        b, c = i // channels, i % channels
        lam = np.float32(0.0)
        for j in range(n_chunks - 1, -1, -1):
            after[b, j, c] = lam
            lam = chunk_a[b, j, c] * lam + chunk_b[b, j, c]


@kernel((F32_1D, F32_1D, F32_1D, F32_1D, F32_2D, F32_3D, F32_1D, F32_1D, F32_2D, I64, I64))
def backward_apply_cuda(grad_h, k, u, h, h0, after, dk, du, dh0, steps, channels):
    batch, n_chunks = after.shape[0], after.shape[1]
    i = cuda.grid(1)
    if i < batch * n_chunks * channels:
        e, n, b, j, c = chunk_start(i, n_chunks, steps, channels)
        s = np.uint64(channels)
        e += np.uint64(n - 1) * s
        a_next = _forget_after(k, e, s, j * CHUNK + n >= steps)
        lam = after[b, j, c]
        for m in range(n - 1, -1, -1):
            before = h[e - s] if j * CHUNK + m > 0 else h0[b, c]
            # this step's a is the step before's a_next
            lam, a_next, dkv, duv = _adjoint_step(lam, a_next, grad_h[e], k[e], u[e], before)
            dk[e] = dkv
            du[e] = duv
            e -= s
        if j == 0:
            dh0[b, c] = a_next * lam


@device_function
def _forget_after_quad(k, e, s, last):
    """_forget_after for four adjacent channels."""
    if last:
        zero = np.float32(0.0)
        return zero, zero, zero, zero
    k0, k1, k2, k3 = load_global_v4(k, e + s)
    return _gates_gpu(k0)[1], _gates_gpu(k1)[1], _gates_gpu(k2)[1], _gates_gpu(k3)[1]


@kernel((F32_1D, F32_1D, F32_3D, F32_3D, I64, I64))
def backward_chunks_quad_cuda(grad_h, k, chunk_a, chunk_b, steps, channels):
    batch, n_chunks = chunk_a.shape[0], chunk_a.shape[1]
    i = cuda.grid(1)
    if i < batch * n_chunks * (channels // 4):
        e, n, b, j, c = quad_start(i, n_chunks, steps, channels)
        s = np.uint64(channels)
        e += np.uint64(n - 1) * s  # the chunk's last step
        n0, n1, n2, n3 = _forget_after_quad(k, e, s, j * CHUNK + n >= steps)
        one, zero = np.float32(1.0), np.float32(0.0)
        p0, p1, p2, p3, a0, a1, a2, a3 = one, one, one, one, zero, zero, zero, zero
        for _ in range(n):
            g0, g1, g2, g3 = load_global_v4(grad_h, e)
            k0, k1, k2, k3 = load_global_v4(k, e)
            p0, a0, n0 = _fold_back(p0, a0, n0, g0, k0)
            p1, a1, n1 = _fold_back(p1, a1, n1, g1, k1)
            p2, a2, n2 = _fold_back(p2, a2, n2, g2, k2)
            p3, a3, n3 = _fold_back(p3, a3, n3, g3, k3)
            e -= s  # wraps below the first element when the chunk is done: never read
        _put4(chunk_a[b, j], c, p0, p1, p2, p3)
        _put4(chunk_b[b, j], c, a0, a1, a2, a3)


@kernel((F32_1D, F32_1D, F32_1D, F32_1D, F32_2D, F32_3D, F32_1D, F32_1D, F32_2D, I64, I64))
def backward_apply_quad_cuda(grad_h, k, u, h, h0, after, dk, du, dh0, steps, channels):
    batch, n_chunks = after.shape[0], after.shape[1]
    i = cuda.grid(1)
    if i < batch * n_chunks * (channels // 4):
        e, n, b, j, c = quad_start(i, n_chunks, steps, channels)
        s = np.uint64(channels)
        e += np.uint64(n - 1) * s
        n0, n1, n2, n3 = _forget_after_quad(k, e, s, j * CHUNK + n >= steps)
        l0, l1, l2, l3 = _get4(after[b, j], c)
        for m in range(n - 1, -1, -1):
            g0, g1, g2, g3 = load_global_v4(grad_h, e)
            k0, k1, k2, k3 = load_global_v4(k, e)
            u0, u1, u2, u3 = load_global_v4(u, e)
            if j * CHUNK + m > 0:
                b0, b1, b2, b3 = load_global_v4(h, e - s)
            else:
                b0, b1, b2, b3 = _get4(h0[b], c)
            l0, n0, dk0, du0 = _adjoint_step(l0, n0, g0, k0, u0, b0)
            l1, n1, dk1, du1 = _adjoint_step(l1, n1, g1, k1, u1, b1)
            l2, n2, dk2, du2 = _adjoint_step(l2, n2, g2, k2, u2, b2)
            l3, n3, dk3, du3 = _adjoint_step(l3, n3, g3, k3, u3, b3)
            store_global_f32x4(dk, np.int64(e), dk0, dk1, dk2, dk3)
            store_global_f32x4(du, np.int64(e), du0, du1, du2, du3)
            e -= s
        if j == 0:
            _put4(dh0[b], c, n0 * l0, n1 * l1, n2 * l2, n3 * l3)


@op
def cuda_scan_backward(grad_h, k, u, h, h0=None):
    _check(k, u, h0, 3, grad_h, h)
    batch, steps, channels = k.shape
    n_chunks = (steps + CHUNK - 1) // CHUNK
    grad_h, k, u, h = (on_device(a, np.float32) for a in (grad_h, k, u, h))
    h0 = device_zeros((batch, channels)) if h0 is None else h0
    shape = (batch, n_chunks, channels)
    chunk_a, chunk_b, after = (cuda.device_array(shape, np.float32) for _ in range(3))
    dk, du = cuda.device_array(k.shape, np.float32), cuda.device_array(k.shape, np.float32)
    dh0 = cuda.device_array((batch, channels), np.float32)
    dims = (np.int64(steps), np.int64(channels))
    quad = channels % 4 == 0
    chunks, apply = (backward_chunks_quad_cuda, backward_apply_quad_cuda) if quad else \
        (backward_chunks_cuda, backward_apply_cuda)
    grid = blocks(batch * n_chunks * (channels // 4 if quad else channels))
    chunks[grid](flat(grad_h), flat(k), chunk_a, chunk_b, *dims)
    backward_carry_cuda[blocks(batch * channels)](chunk_a, chunk_b, after)
    apply[grid](flat(grad_h), flat(k), flat(u), flat(h), h0, after, flat(dk), flat(du), dh0, *dims)
    return dk, du, dh0


# ---- roofline of the static report (kernels/STATIC_REPORT.md) -------------------------------------

_PASSES = {  # workload: (kernel, bytes per element, 32-bit words loaded per element); 1536 channels: quads
    "scan 8x4096x1536 forward: fold pass": ("forward_chunks_quad_cuda", 8, 2),
    "scan 8x4096x1536 forward: apply pass": ("forward_apply_quad_cuda", 12, 2),
    "scan 8x4096x1536 backward: fold pass": ("backward_chunks_quad_cuda", 8, 2),
    "scan 8x4096x1536 backward: apply pass": ("backward_apply_quad_cuda", 24, 4),
}
_CALLS = ("scan 8x4096x1536 forward", "scan 8x4096x1536 backward")  # the three launches of one call
ROOFLINE_WORKLOADS = tuple(_PASSES) + _CALLS


def roofline(workload, batch=8, steps=4096, channels=1536):
    """One pass of the chunked scan over 8 x 4096 x 1536 fp32 elements (400 MB per array: every pass
    streams from HBM). Bytes per element are the pass's own reads and writes (the per-chunk arrays add
    12 B per 64 elements, left out); a forward moves 20 B per element where one read of k, u and one write
    of h would be 12 B, a backward 32 B where 24 B would do. The reference is HBM bandwidth filled by
    the pass's own traffic; the issue ceiling counts the hot loop's instructions per element (elements
    per iteration read from the words its loads bring: four channels per 16-byte load). A whole call
    (cuda_scan_forward or _backward: fold, carry and apply launches) is what the static model predicts
    and the throughput benchmark measures."""
    if workload in _CALLS:
        return _call(workload, batch, steps, channels)
    kernel_name, moved, loads = _PASSES[workload]
    return {
        "name": f"{workload} ({kernel_name})",
        "kernel": f"{__name__}.{kernel_name}",
        "unit": "element",
        "ops_per_unit": 10,
        "compute_limit": None,
        "reference_limit": "hbm",
        "bytes_per_unit": {"hbm": moved},
        "loads_per_unit": loads,
        "basis": (f"{moved} B per element streamed from HBM, {loads} 32-bit words loaded per element (16-byte "
                  "loads of four channels); about 10 flops per element (no FLOP peak binds)."),
    }


def _call(workload, batch, steps, channels):
    forward = workload.endswith("forward")
    passes = [v for k, v in _PASSES.items() if k.startswith(workload + ":")]
    moved = sum(p[1] for p in passes)
    n_chunks = (steps + CHUNK - 1) // CHUNK
    one, per_chunk, per_batch = ((batch * steps * channels,), (batch, n_chunks, channels), (batch, channels))
    f32 = {shape: {"shape": shape, "dtype": "float32"} for shape in (one, per_chunk, per_batch)}
    dims = (steps, channels)
    (grid, threads), carry = blocks(batch * n_chunks * channels // 4), blocks(batch * channels)[0]
    if forward:
        kernels = (("forward_chunks_quad_cuda", grid, [f32[one], f32[one], f32[per_chunk], f32[per_chunk], *dims]),
                   ("forward_carry_cuda", carry, [f32[per_chunk]] * 2 + [f32[per_batch], f32[per_chunk]]),
                   ("forward_apply_quad_cuda", grid, [f32[one], f32[one], f32[per_chunk], f32[one], *dims]))
    else:
        kernels = (("backward_chunks_quad_cuda", grid, [f32[one], f32[one], f32[per_chunk], f32[per_chunk], *dims]),
                   ("backward_carry_cuda", carry, [f32[per_chunk]] * 3),
                   ("backward_apply_quad_cuda", grid, [f32[one]] * 4 + [f32[per_batch], f32[per_chunk], f32[one],
                                                                        f32[one], f32[per_batch], *dims]))
    return {
        "name": f"{workload}: fold, carry and apply launches",
        "kernel": None,
        "unit": "element",
        "ops_per_unit": 10,
        "compute_limit": None,
        "reference_limit": "hbm",
        "bytes_per_unit": {"hbm": moved},
        "basis": f"{moved} B per element streamed from HBM over the passes of one call.",
        "launches": [{"kernel": f"{__name__}.{name}", "grid": g, "block": threads, "args": args}
                     for name, g, args in kernels],
        "units": batch * steps * channels,
        "measured": {"benchmark": "scan_throughput", "ms_per_run": "ms",
                     "row": {"op": "forward" if forward else "backward", "shape": f"{batch}x{steps}x{channels}"}},
    }
