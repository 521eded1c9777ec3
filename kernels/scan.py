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

The NumPy reference is sequential in float64; the CPU twin is sequential in fp32 per channel,
parallel over channels. Both twins agree with the reference to a relative 1e-5 at T = 65,536.
"""

import math

import numba
import numpy as np

from eggnog.kernels.cuda_api import cuda, device_function, kernel

CHUNK = 64


def build(jit):
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


cpu_sigmoid, cpu_candidate, cpu_candidate_slope = build(numba.njit)
gpu_sigmoid, gpu_candidate, gpu_candidate_slope = build(device_function)


# ---- NumPy reference (float64, sequential) ---------------------------------------------------------

def _gates64(k, u):
    k, u = np.asarray(k, np.float64), np.asarray(u, np.float64)
    z = 1.0 / (1.0 + np.exp(-k))
    su = 1.0 / (1.0 + np.exp(-u))
    g = np.where(u >= 0, u + 0.5, su)
    dg = np.where(u >= 0, 1.0, su * (1.0 - su))
    return z, g, dg


def reference_forward(k, u, h0=None):
    z, g, _ = _gates64(k, u)
    h = np.empty(z.shape, dtype=np.float64)
    state = np.zeros((z.shape[0], z.shape[2])) if h0 is None else np.asarray(h0, np.float64)
    for t in range(z.shape[1]):
        state = (1.0 - z[:, t]) * state + z[:, t] * g[:, t]
        h[:, t] = state
    return h


def reference_step(k, u, h_prev=None):
    z, g, _ = _gates64(k, u)
    return z * g if h_prev is None else h_prev + z * (g - np.asarray(h_prev, np.float64))


def reference_backward(grad_h, k, u, h, h0=None):
    """(dk, du, dh0) of a loss whose gradient with respect to the outputs h is grad_h."""
    z, g, dg = _gates64(k, u)
    a = 1.0 - z
    batch, steps, channels = z.shape
    previous = np.concatenate([np.zeros((batch, 1, channels)) if h0 is None else
                               np.asarray(h0, np.float64)[:, None], np.asarray(h, np.float64)[:, :-1]], axis=1)
    lam = np.zeros((batch, channels))
    dk, du = np.empty_like(z), np.empty_like(z)
    for t in range(steps - 1, -1, -1):
        lam = np.asarray(grad_h[:, t], np.float64) + (a[:, t + 1] * lam if t + 1 < steps else 0.0)
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
            z = cpu_sigmoid(k[b, t, c])
            state = cpu_sigmoid(-k[b, t, c]) * state + z * cpu_candidate(u[b, t, c])
            h[b, t, c] = state


def cpu_forward(k, u, h0=None):
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
                lam = grad_h[b, t, c] + cpu_sigmoid(-k[b, t + 1, c]) * lam
            else:
                lam = grad_h[b, t, c]
            z = cpu_sigmoid(k[b, t, c])
            before = h[b, t - 1, c] if t > 0 else h0[b, c]
            dk[b, t, c] = z * (np.float32(1.0) - z) * lam * (cpu_candidate(u[b, t, c]) - before)
            du[b, t, c] = lam * z * cpu_candidate_slope(u[b, t, c])
        dh0[b, c] = cpu_sigmoid(-k[b, 0, c]) * lam


def cpu_backward(grad_h, k, u, h, h0=None):
    f32 = lambda x: np.ascontiguousarray(x, np.float32)  # noqa: E731
    h0 = np.zeros((k.shape[0], k.shape[2]), np.float32) if h0 is None else f32(h0)
    dk, du = np.empty(k.shape, np.float32), np.empty(k.shape, np.float32)
    dh0 = np.empty(h0.shape, np.float32)
    _cpu_backward(f32(grad_h), f32(k), f32(u), f32(h), h0, dk, du, dh0)
    return dk, du, dh0


def cpu_step(k, u, h_prev=None):
    h0 = None if h_prev is None else np.asarray(h_prev, np.float32)[:, None, :][:, 0]
    return cpu_forward(np.asarray(k, np.float32)[:, None, :], np.asarray(u, np.float32)[:, None, :], h0)[:, 0]


# ---- CUDA: chunked forward ----------------------------------------------------------------------------

F32_3D = numba.float32[:, :, ::1]
F32_2D = numba.float32[:, ::1]


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
            a = gpu_sigmoid(-k[b, t, c])
            prod *= a
            acc = a * acc + gpu_sigmoid(k[b, t, c]) * gpu_candidate(u[b, t, c])
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
            state = gpu_sigmoid(-k[b, t, c]) * state + gpu_sigmoid(k[b, t, c]) * gpu_candidate(u[b, t, c])
            h[b, t, c] = state


def _launch(n):
    return (n + 127) // 128, 128


def _device_zeros(shape):
    return cuda.to_device(np.zeros(shape, dtype=np.float32))


def cuda_forward(k, u, h0=None):
    """k, u: (batch, T, channels) float32 (device or host); returns h on the device."""
    batch, steps, channels = k.shape
    n_chunks = (steps + CHUNK - 1) // CHUNK
    h0 = _device_zeros((batch, channels)) if h0 is None else h0
    chunk_a, chunk_b = cuda.device_array((batch, n_chunks, channels), np.float32), \
        cuda.device_array((batch, n_chunks, channels), np.float32)
    incoming = cuda.device_array((batch, n_chunks, channels), np.float32)
    h = cuda.device_array((batch, steps, channels), np.float32)
    forward_chunks_cuda[_launch(batch * n_chunks * channels)](k, u, chunk_a, chunk_b)
    forward_carry_cuda[_launch(batch * channels)](chunk_a, chunk_b, h0, incoming)
    forward_apply_cuda[_launch(batch * n_chunks * channels)](k, u, incoming, h)
    return h


@kernel((F32_2D, F32_2D, F32_2D, F32_2D))
def step_cuda(k, u, h_prev, h):
    """One step for generation: h = h_prev + z (g(u) - h_prev)."""
    i = cuda.grid(1)
    if i < k.size:
        b, c = i // k.shape[1], i % k.shape[1]
        z = gpu_sigmoid(k[b, c])
        h[b, c] = h_prev[b, c] + z * (gpu_candidate(u[b, c]) - h_prev[b, c])


def cuda_step(k, u, h_prev=None):
    h_prev = _device_zeros(k.shape) if h_prev is None else h_prev
    h = cuda.device_array(k.shape, np.float32)
    step_cuda[_launch(k.shape[0] * k.shape[1])](k, u, h_prev, h)
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
            a_next = gpu_sigmoid(-k[b, t + 1, c]) if t + 1 < steps else np.float32(0.0)
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
            a_next = gpu_sigmoid(-k[b, t + 1, c]) if t + 1 < steps else np.float32(0.0)
            lam = grad_h[b, t, c] + a_next * lam
            z = gpu_sigmoid(k[b, t, c])
            before = h[b, t - 1, c] if t > 0 else h0[b, c]
            dk[b, t, c] = z * (np.float32(1.0) - z) * lam * (gpu_candidate(u[b, t, c]) - before)
            du[b, t, c] = lam * z * gpu_candidate_slope(u[b, t, c])
        if j == 0:
            dh0[b, c] = gpu_sigmoid(-k[b, 0, c]) * lam


def cuda_backward(grad_h, k, u, h, h0=None):
    batch, steps, channels = k.shape
    n_chunks = (steps + CHUNK - 1) // CHUNK
    h0 = _device_zeros((batch, channels)) if h0 is None else h0
    shape = (batch, n_chunks, channels)
    chunk_a, chunk_b, after = (cuda.device_array(shape, np.float32) for _ in range(3))
    dk, du = cuda.device_array(k.shape, np.float32), cuda.device_array(k.shape, np.float32)
    dh0 = cuda.device_array((batch, channels), np.float32)
    backward_chunks_cuda[_launch(batch * n_chunks * channels)](grad_h, k, chunk_a, chunk_b)
    backward_carry_cuda[_launch(batch * channels)](chunk_a, chunk_b, after)
    backward_apply_cuda[_launch(batch * n_chunks * channels)](grad_h, k, u, h, h0, after, dk, du, dh0)
    return dk, du, dh0
