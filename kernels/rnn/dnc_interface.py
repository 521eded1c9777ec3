"""The DNC's interface vector cut into its heads, activations applied, in one launch each way (fp32):

    dnc_interface(iface, w)     iface (B, C), C = R W + 3 W + 1, columns [read keys R W | write key W |
                                erase W | add W | strength 1]
                                -> rk (B, R W), wk (B, W), erase = sigmoid (B, W), add = tanh (B, W),
                                   strength = sigmoid (B,)
    dnc_interface_backward(drk, dwk, derase, dadd, dstrength, erase, add, strength) -> diface (B, C)
                                the gradients joined back, through the activations (which take their
                                outputs: e (1 - e), 1 - a^2, s (1 - s))

Per step of the DNC this replaces five column copies and three activation launches forward, and three
activation-gradient launches and five copies backward. One GPU thread per element of iface; the
activations are the multi-head LSTM's (rnn/lstm.py: sigmoid by the approximate reciprocal on the GPU,
cpu_vector_math's on the CPU), so twins agree with the float64 reference to 1e-6 relative + 1e-6 absolute.
"""

import numba
import numpy as np

from eggnog.kernels.core.array_types import Float32Array, Float64Array, FloatArray
from eggnog.kernels.core.cpu_jit import parallel_jit
from eggnog.kernels.core.cuda_api import F32_1D, F32_2D, I64, blocks, cuda, device_function, f64, kernel, require
from eggnog.kernels.core.placement import BackendArray
from eggnog.kernels.core.registry import normal32, op, registered
from eggnog.kernels.rnn.lstm import cpu_sigmoid, cpu_tanh, gpu_sigmoid, gpu_tanh

TOLERANCE = (1e-6, 1e-6)


def _shapes():
    """(batch, reads, width): the smallest, and an interface over two blocks of 256 threads."""
    return ((1, 1, 1), (3, 2, 30))


def _forward_cases(rng):
    for batch, reads, w in _shapes():
        yield normal32(rng, batch, reads * w + 3 * w + 1, scale=2.0), w


def _backward_cases(rng):
    for batch, reads, w in _shapes():
        _, _, erase, add, strength = reference_dnc_interface(normal32(rng, batch, reads * w + 3 * w + 1, scale=2.0), w)
        yield (normal32(rng, batch, reads * w), normal32(rng, batch, w), normal32(rng, batch, w),
               normal32(rng, batch, w), normal32(rng, batch), erase.astype(np.float32), add.astype(np.float32),
               strength.astype(np.float32))


def _check(iface, w):
    require(len(iface.shape) == 2 and w >= 1 and iface.shape[1] > 3 * w + 1 and (iface.shape[1] - 3 * w - 1) % w == 0,
            f"a DNC interface of head width {w} has R {w} + 3 {w} + 1 columns, got shape {tuple(iface.shape)}")


def _check_backward(drk, dwk, derase, dadd, dstrength, erase, add, strength):
    batch, w = erase.shape
    shapes = [tuple(a.shape) for a in (drk, dwk, derase, dadd, dstrength, add, strength)]
    require(len(drk.shape) == 2 and drk.shape[0] == batch and drk.shape[1] % w == 0 and drk.shape[1] >= w
            and shapes[1:] == [(batch, w)] * 3 + [(batch,), (batch, w), (batch,)],
            f"dnc_interface_backward takes drk (B, R W), then (B, W) x 3, dstrength (B,), erase and add (B, W) "
            f"and strength (B,), got {shapes[0]}, {shapes[1:4]}, {shapes[4]}, {tuple(erase.shape)}, {shapes[5:]}")


@op(cases=_forward_cases, tolerance=TOLERANCE, args={"iface": "float[batch, _]", "w": "int"})
def reference_dnc_interface(iface: FloatArray,
                            w: int) -> tuple[Float64Array, Float64Array, Float64Array, Float64Array, Float64Array]:
    """(rk (batch, R w), wk (batch, w), erase (batch, w), add (batch, w), strength (batch,)): the interface
    vector cut into the read keys, the write key, the erase vector (sigmoid), the add vector (tanh) and the
    write strength (sigmoid); R, the number of read heads, follows from iface's width.

    iface: the controller's interface vectors, columns [read keys R w | write key w | erase w | add w |
    strength 1], so R w + 3 w + 1 of them (checked). w: the memory's word width (the head size)."""
    _check(iface, w)
    x = f64(iface)
    rw = x.shape[1] - 3 * w - 1
    sig = lambda v: 1.0 / (1.0 + np.exp(-v))  # noqa: E731
    return (x[:, :rw].copy(), x[:, rw:rw + w].copy(), sig(x[:, rw + w:rw + 2 * w]),
            np.tanh(x[:, rw + 2 * w:rw + 3 * w]), sig(x[:, -1]))


@op(cases=_backward_cases, tolerance=TOLERANCE,
    args={"drk": "float[batch, _]", "dwk": "float[batch, width]", "derase": "float[batch, width]",
          "dadd": "float[batch, width]", "dstrength": "float[batch]", "erase": "float[batch, width]",
          "add": "float[batch, width]", "strength": "float[batch]"})
def reference_dnc_interface_backward(drk: FloatArray, dwk: FloatArray, derase: FloatArray, dadd: FloatArray,
                                     dstrength: FloatArray, erase: FloatArray, add: FloatArray,
                                     strength: FloatArray) -> Float64Array:
    """diface (batch, R width + 3 width + 1): the gradient of dnc_interface's input, its five outputs'
    gradients joined back in the interface's column order, through the activations: e (1 - e) for erase,
    1 - a^2 for add, s (1 - s) for strength.

    drk, dwk, derase, dadd, dstrength: the loss's gradients with respect to the read keys (R width
    columns, a whole number of words), the write key, erase, add and strength. erase, add, strength:
    dnc_interface's activated outputs (the activations' derivatives are taken from them)."""
    _check_backward(drk, dwk, derase, dadd, dstrength, erase, add, strength)
    e, a, s = f64(erase), f64(add), f64(strength)
    return np.concatenate([f64(drk), f64(dwk), f64(derase) * e * (1.0 - e), f64(dadd) * (1.0 - a * a),
                           (f64(dstrength) * s * (1.0 - s))[:, None]], axis=1)


def _build(jit, sigmoid, tanh):
    @jit
    def forward_element(iface, rk, wk, erase, add, strength, w, i):
        """Element i of iface (row-major) to where it belongs."""
        cols = iface.shape[1]
        b, col = i // cols, i % cols
        rw = cols - 3 * w - 1
        v = iface[b, col]
        if col < rw:
            rk[b, col] = v
        elif col < rw + w:
            wk[b, col - rw] = v
        elif col < rw + 2 * w:
            erase[b, col - rw - w] = sigmoid(v)
        elif col < rw + 3 * w:
            add[b, col - rw - 2 * w] = tanh(v)
        else:
            strength[b] = sigmoid(v)

    @jit
    def backward_element(drk, dwk, derase, dadd, dstrength, erase, add, strength, diface, i):
        cols = diface.shape[1]
        b, col = i // cols, i % cols
        w = erase.shape[1]
        rw = cols - 3 * w - 1
        one = np.float32(1.0)
        if col < rw:
            diface[b, col] = drk[b, col]
        elif col < rw + w:
            diface[b, col] = dwk[b, col - rw]
        elif col < rw + 2 * w:
            e = erase[b, col - rw - w]
            diface[b, col] = derase[b, col - rw - w] * e * (one - e)
        elif col < rw + 3 * w:
            a = add[b, col - rw - 2 * w]
            diface[b, col] = dadd[b, col - rw - 2 * w] * (one - a * a)
        else:
            diface[b, col] = dstrength[b] * strength[b] * (one - strength[b])

    return forward_element, backward_element


_cpu_forward_element, _cpu_backward_element = _build(numba.njit, cpu_sigmoid, cpu_tanh)
_gpu_forward_element, _gpu_backward_element = _build(device_function, gpu_sigmoid, gpu_tanh)


def _outputs(empty, iface, w):
    batch, rw = iface.shape[0], iface.shape[1] - 3 * w - 1
    return (empty((batch, rw)), empty((batch, w)), empty((batch, w)), empty((batch, w)), empty((batch,)))


@parallel_jit
def _cpu_forward(iface, rk, wk, erase, add, strength, w):
    for i in numba.prange(iface.size):
        _cpu_forward_element(iface, rk, wk, erase, add, strength, w, i)


@parallel_jit
def _cpu_backward(drk, dwk, derase, dadd, dstrength, erase, add, strength, diface):
    for i in numba.prange(diface.size):
        _cpu_backward_element(drk, dwk, derase, dadd, dstrength, erase, add, strength, diface, i)


@op
def cpu_dnc_interface(iface: Float32Array,
                      w: int) -> tuple[Float32Array, Float32Array, Float32Array, Float32Array, Float32Array]:
    _check(iface, w)
    out = _outputs(lambda shape: np.empty(shape, np.float32), iface, w)
    _cpu_forward(iface, *out, np.int64(w))
    return out


@op
def cpu_dnc_interface_backward(drk: Float32Array, dwk: Float32Array, derase: Float32Array, dadd: Float32Array,
                               dstrength: Float32Array, erase: Float32Array, add: Float32Array,
                               strength: Float32Array) -> Float32Array:
    _check_backward(drk, dwk, derase, dadd, dstrength, erase, add, strength)
    diface = np.empty((erase.shape[0], drk.shape[1] + 3 * erase.shape[1] + 1), np.float32)
    _cpu_backward(drk, dwk, derase, dadd, dstrength, erase, add, strength, diface)
    return diface


@kernel((F32_2D, F32_2D, F32_2D, F32_2D, F32_2D, F32_1D, I64))
def dnc_interface_cuda(iface, rk, wk, erase, add, strength, w):
    i = cuda.grid(1)
    if i < iface.size:
        _gpu_forward_element(iface, rk, wk, erase, add, strength, w, i)


@kernel((F32_2D, F32_2D, F32_2D, F32_2D, F32_1D, F32_2D, F32_2D, F32_1D, F32_2D))
def dnc_interface_backward_cuda(drk, dwk, derase, dadd, dstrength, erase, add, strength, diface):
    i = cuda.grid(1)
    if i < diface.size:
        _gpu_backward_element(drk, dwk, derase, dadd, dstrength, erase, add, strength, diface, i)


@op
def cuda_dnc_interface(iface: BackendArray,
                       w: int) -> tuple[BackendArray, BackendArray, BackendArray, BackendArray, BackendArray]:
    _check(iface, w)
    out = _outputs(lambda shape: cuda.device_array(shape, np.float32), iface, w)
    dnc_interface_cuda[blocks(iface.size)](iface, *out, np.int64(w))
    return out


@op
def cuda_dnc_interface_backward(drk: BackendArray, dwk: BackendArray, derase: BackendArray, dadd: BackendArray,
                                dstrength: BackendArray, erase: BackendArray, add: BackendArray,
                                strength: BackendArray) -> BackendArray:
    _check_backward(drk, dwk, derase, dadd, dstrength, erase, add, strength)
    diface = cuda.device_array((erase.shape[0], drk.shape[1] + 3 * erase.shape[1] + 1), np.float32)
    dnc_interface_backward_cuda[blocks(diface.size)](drk, dwk, derase, dadd, dstrength, erase, add, strength, diface)
    return diface

# the ops of this module by name, for callers: dnc_interface(kernels, ...)
dnc_interface = registered(reference_dnc_interface)
dnc_interface_backward = registered(reference_dnc_interface_backward)
