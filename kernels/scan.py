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
is sequential in float64; the CPU twin is sequential in fp32 per channel, parallel over channels.
Both twins agree with the reference to a relative 1e-5 (forward, also at T = 65,536) and to 1e-5 of
the gradients' scale (backward); shapes that do not fit raise BadInput.
"""

import math

import numba
import numpy as np

from eggnog.kernels.cuda_api import F32_2D, F32_3D, blocks, cuda, device_function, device_zeros, f64, kernel, require
from eggnog.kernels.registry import op

CHUNK = 64
FORWARD_TOLERANCE = (1e-5, 1e-6)  # h > 0: relative
BACKWARD_TOLERANCE = (1e-5, 1e-5)


def _build(jit):
    @jit
    def sigmoid(x):
        return np.float32(1.0) / (np.float32(1.0) + math.exp(-x))

    @jit
    def candidate(u):
        return u + np.float32(0.5) if u >= 0 else sigmoid(u)

    @jit
    def candidate_slope(u):
        if u >= 0:
            return np.float32(1.0)
        s = sigmoid(u)
        return s * (np.float32(1.0) - s)

    return sigmoid, candidate, candidate_slope


_sigmoid_cpu, _candidate_cpu, _candidate_slope_cpu = _build(numba.njit)
_sigmoid_gpu, _candidate_gpu, _candidate_slope_gpu = _build(device_function)


# ---- cases and shape checks ----------------------------------------------------------------------

def _sequences(rng):
    """(k, u, h0 or None): one step; three chunks with T not a multiple of CHUNK; and more than one
    block of 256 threads in every launch (batch * chunks * channels and batch * channels)."""
    for batch, steps, channels, carried in ((1, 1, 1, False), (2, 130, 3, True), (3, 65, 90, False)):
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


# ---- CPU twin (fp32, sequential over T, parallel over channels) ------------------------------------

@numba.njit(parallel=True)
def _cpu_forward(k, u, h0, h):
    batch, steps, channels = k.shape
    for bc in numba.prange(batch * channels):
        b, c = bc // channels, bc % channels
        state = h0[b, c]
        for t in range(steps):
            z = _sigmoid_cpu(k[b, t, c])
            state = _sigmoid_cpu(-k[b, t, c]) * state + z * _candidate_cpu(u[b, t, c])
            h[b, t, c] = state


@op
def cpu_scan_forward(k, u, h0=None):
    _check(k, u, h0, 3)
    h0 = np.zeros((k.shape[0], k.shape[2]), np.float32) if h0 is None else np.ascontiguousarray(h0, np.float32)
    h = np.empty(k.shape, dtype=np.float32)
    _cpu_forward(np.ascontiguousarray(k, np.float32), np.ascontiguousarray(u, np.float32), h0, h)
    return h


@numba.njit(parallel=True)
def _cpu_backward(grad_h, k, u, h, h0, dk, du, dh0):
    batch, steps, channels = k.shape
    for bc in numba.prange(batch * channels):
        b, c = bc // channels, bc % channels
        lam = np.float32(0.0)
        for t in range(steps - 1, -1, -1):
            if t + 1 < steps:
                lam = grad_h[b, t, c] + _sigmoid_cpu(-k[b, t + 1, c]) * lam
            else:
                lam = grad_h[b, t, c]
            z = _sigmoid_cpu(k[b, t, c])
            before = h[b, t - 1, c] if t > 0 else h0[b, c]
            dk[b, t, c] = z * (np.float32(1.0) - z) * lam * (_candidate_cpu(u[b, t, c]) - before)
            du[b, t, c] = lam * z * _candidate_slope_cpu(u[b, t, c])
        dh0[b, c] = _sigmoid_cpu(-k[b, 0, c]) * lam


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


# ---- CUDA: chunked forward ----------------------------------------------------------------------------

@device_function
def chunk_of_thread(i, n_chunks, channels):
    """(batch, chunk, channel) of thread i; channels vary fastest so loads coalesce."""
    return i // (channels * n_chunks), (i // channels) % n_chunks, i % channels


@kernel((F32_3D, F32_3D, F32_3D, F32_3D))
def forward_chunks_cuda(k, u, chunk_a, chunk_b):
    """Fold each chunk into the affine map state -> A * state + B."""
    batch, steps, channels = k.shape
    n_chunks = chunk_a.shape[1]
    i = cuda.grid(1)
    if i < batch * n_chunks * channels:
        b, j, c = chunk_of_thread(i, n_chunks, channels)
        prod = np.float32(1.0)
        acc = np.float32(0.0)
        for t in range(j * CHUNK, min(steps, (j + 1) * CHUNK)):
            a = _sigmoid_gpu(-k[b, t, c])
            prod *= a
            acc = a * acc + _sigmoid_gpu(k[b, t, c]) * _candidate_gpu(u[b, t, c])
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


@kernel((F32_3D, F32_3D, F32_3D, F32_3D))
def forward_apply_cuda(k, u, incoming, h):
    batch, steps, channels = k.shape
    n_chunks = incoming.shape[1]
    i = cuda.grid(1)
    if i < batch * n_chunks * channels:
        b, j, c = chunk_of_thread(i, n_chunks, channels)
        state = incoming[b, j, c]
        for t in range(j * CHUNK, min(steps, (j + 1) * CHUNK)):
            state = _sigmoid_gpu(-k[b, t, c]) * state + _sigmoid_gpu(k[b, t, c]) * _candidate_gpu(u[b, t, c])
            h[b, t, c] = state


@op
def cuda_scan_forward(k, u, h0=None):
    """k, u: (batch, T, channels) float32 (device or host); returns h on the device."""
    _check(k, u, h0, 3)
    batch, steps, channels = k.shape
    n_chunks = (steps + CHUNK - 1) // CHUNK
    h0 = device_zeros((batch, channels)) if h0 is None else h0
    chunk_a, chunk_b = cuda.device_array((batch, n_chunks, channels), np.float32), \
        cuda.device_array((batch, n_chunks, channels), np.float32)
    incoming = cuda.device_array((batch, n_chunks, channels), np.float32)
    h = cuda.device_array((batch, steps, channels), np.float32)
    forward_chunks_cuda[blocks(batch * n_chunks * channels)](k, u, chunk_a, chunk_b)
    forward_carry_cuda[blocks(batch * channels)](chunk_a, chunk_b, h0, incoming)
    forward_apply_cuda[blocks(batch * n_chunks * channels)](k, u, incoming, h)
    return h


@kernel((F32_2D, F32_2D, F32_2D, F32_2D))
def step_cuda(k, u, h_prev, h):
    """One step for generation: h = h_prev + z (g(u) - h_prev)."""
    i = cuda.grid(1)
    if i < k.size:
        b, c = i // k.shape[1], i % k.shape[1]
        z = _sigmoid_gpu(k[b, c])
        h[b, c] = h_prev[b, c] + z * (_candidate_gpu(u[b, c]) - h_prev[b, c])


@op
def cuda_scan_step(k, u, h_prev=None):
    _check(k, u, h_prev, 2)
    h_prev = device_zeros(k.shape) if h_prev is None else h_prev
    h = cuda.device_array(k.shape, np.float32)
    step_cuda[blocks(k.shape[0] * k.shape[1])](k, u, h_prev, h)
    return h


# ---- CUDA: chunked backward -----------------------------------------------------------------------------

@kernel((F32_3D, F32_3D, F32_3D, F32_3D))
def backward_chunks_cuda(grad_h, k, chunk_a, chunk_b):
    """Fold each chunk of the adjoint recurrence: lambda_start = A * lambda_after_chunk + B."""
    batch, steps, channels = k.shape
    n_chunks = chunk_a.shape[1]
    i = cuda.grid(1)
    if i < batch * n_chunks * channels:
        b, j, c = chunk_of_thread(i, n_chunks, channels)
        prod = np.float32(1.0)
        acc = np.float32(0.0)
        for t in range(min(steps, (j + 1) * CHUNK) - 1, j * CHUNK - 1, -1):
            a_next = _sigmoid_gpu(-k[b, t + 1, c]) if t + 1 < steps else np.float32(0.0)
            prod *= a_next
            acc = grad_h[b, t, c] + a_next * acc
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


@kernel((F32_3D, F32_3D, F32_3D, F32_3D, F32_2D, F32_3D, F32_3D, F32_3D, F32_2D))
def backward_apply_cuda(grad_h, k, u, h, h0, after, dk, du, dh0):
    batch, steps, channels = k.shape
    n_chunks = after.shape[1]
    i = cuda.grid(1)
    if i < batch * n_chunks * channels:
        b, j, c = chunk_of_thread(i, n_chunks, channels)
        lam = after[b, j, c]
        for t in range(min(steps, (j + 1) * CHUNK) - 1, j * CHUNK - 1, -1):
            a_next = _sigmoid_gpu(-k[b, t + 1, c]) if t + 1 < steps else np.float32(0.0)
            lam = grad_h[b, t, c] + a_next * lam
            z = _sigmoid_gpu(k[b, t, c])
            before = h[b, t - 1, c] if t > 0 else h0[b, c]
            dk[b, t, c] = z * (np.float32(1.0) - z) * lam * (_candidate_gpu(u[b, t, c]) - before)
            du[b, t, c] = lam * z * _candidate_slope_gpu(u[b, t, c])
        if j == 0:
            dh0[b, c] = _sigmoid_gpu(-k[b, 0, c]) * lam


@op
def cuda_scan_backward(grad_h, k, u, h, h0=None):
    _check(k, u, h0, 3, grad_h, h)
    batch, steps, channels = k.shape
    n_chunks = (steps + CHUNK - 1) // CHUNK
    h0 = device_zeros((batch, channels)) if h0 is None else h0
    shape = (batch, n_chunks, channels)
    chunk_a, chunk_b, after = (cuda.device_array(shape, np.float32) for _ in range(3))
    dk, du = cuda.device_array(k.shape, np.float32), cuda.device_array(k.shape, np.float32)
    dh0 = cuda.device_array((batch, channels), np.float32)
    backward_chunks_cuda[blocks(batch * n_chunks * channels)](grad_h, k, chunk_a, chunk_b)
    backward_carry_cuda[blocks(batch * channels)](chunk_a, chunk_b, after)
    backward_apply_cuda[blocks(batch * n_chunks * channels)](grad_h, k, u, h, h0, after, dk, du, dh0)
    return dk, du, dh0
