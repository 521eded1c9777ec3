"""A whole EGG evaluation epoch in one call: every member of a population slice reads its byte window
through the (perturbed) EGG, and only the summed log-likelihood of each member comes back.

    egg_epoch(params, windows, states, prefixes, first_member, sigma_shift, perturbed, gains) -> int64 (members,)

- params:   the flat int8 parameter buffer in the layout of `layout.egg_layout` (tensor id = position);
- windows:  uint8 (members, T + 1); byte t is read, byte t + 1 is scored;
- states:   int8 (n_layer, members, dim), carried in and updated in place;
- prefixes: int64 (n_tensors,), the noise prefix of each tensor id at this epoch;
- gains:    None, or uint8 noise gains of every tensor, in tensor-id order (kernels/noise/gains.py).

The reference is the per-op EGG step (member_ops, int_matmul) looped over bytes. The CPU twin and the
CUDA kernel carry a tile of members through every byte and layer in one call, so nothing is launched
or forked per byte; all three agree bit for bit.
"""

import numpy as np

from eggnog.kernels.core.array_types import Int8Array, Int64Array, UInt8Array
from eggnog.kernels.core.cuda_api import on_device
from eggnog.kernels.core.placement import BackendArray, Kernels, to_host
from eggnog.kernels.core.registry import op, registered
from eggnog.kernels.egg import epoch_cpu, epoch_cuda
from eggnog.kernels.egg.int_matmul import int_matmul
from eggnog.kernels.egg.layout import BF, BH, DOWN, LN1, LN2, UF, UH, UP, WF, WH, egg_layout, head_tensors, layer_tensor
from eggnog.kernels.egg.layout import VOCAB as VOCAB_SIZE
from eggnog.kernels.egg.member_ops import (
    egg_clip_add,
    egg_embedding,
    egg_gru_forget,
    egg_gru_output,
    egg_l1_norm,
    egg_loglik,
    egg_reset,
    egg_vector,
)
from eggnog.kernels.noise.gains import gain_offsets, random_gains


def _case(rng, n_layer, dim, members, steps, first, sigma_shift, perturbed, gains=False):
    from eggnog.kernels.noise.reference import gaussian_int8

    layout = egg_layout(n_layer, dim)
    n_params = layout[-1][3] + int(np.prod(layout[-1][1]))
    params = np.asarray(gaussian_int8((int(rng.integers(1 << 32)), 7), 0, n_params), dtype=np.int8)
    for name, shape, _kind, offset in layout:
        if name.rsplit(".", 1)[-1].startswith("ln"):
            params[offset:offset + shape[0]] = 16 + rng.integers(-3, 4, shape[0])
    windows = rng.integers(1, 256, (members, steps + 1)).astype(np.uint8)
    windows[::3, 0] = 0  # documents start: states reset
    states = np.clip(np.rint(rng.normal(0, 40, (n_layer, members, dim))), -127, 127).astype(np.int8)
    prefixes = rng.integers(0, 1 << 32, len(layout)).astype(np.int64)
    case = params, windows, states, prefixes, first, sigma_shift, perturbed
    return case + (random_gains(rng, gain_offsets(layout)[1]),) if gains else case


def _cases(rng):
    """The fused CUDA kernel at its smallest width (one simulated block of 256 threads): two layers with noise
    gains, members off its 128-member tile, an odd first member; then an unperturbed run carrying states over
    two bytes. Then the fallback's width, without and with gains. (The fused kernel's code without gains runs,
    perturbed, in tests/test_kernel_variants_egg.py: every variant is that code at another row tile.)"""
    yield _case(rng, 2, 64, 20, 1, 3, 4, True, gains=True)
    yield _case(rng, 1, 64, 9, 2, 0, 0, False)
    yield _case(rng, 1, 8, 9, 2, 3, 4, True)
    yield _case(rng, 1, 8, 9, 2, 3, 4, True, gains=True)


def per_op_byte(ops, tokens, states, embed, mm, vec):
    """One byte for every member, op by op: the EGG's forward, written once (the model's `step` and
    `per_op_epoch` call it). `embed(tokens)` the embedding, `mm(x, tid)` the product with tensor `tid`,
    `vec(tid)` the members' copy of vector `tid`. Each layer's state is replaced by its new value;
    returns the logits."""
    n_layer = len(states)
    x = embed(tokens)
    for layer in range(n_layer):
        tid = lambda which: layer_tensor(layer, which)  # noqa: E731
        s = states[layer]
        egg_reset(ops, s, tokens)
        h_in = egg_l1_norm(ops, x, vec(tid(LN1)))
        f, fh = egg_gru_forget(ops, mm(h_in, tid(WF)), mm(s, tid(UF)), vec(tid(BF)), s)
        h = egg_gru_output(ops, mm(h_in, tid(WH)), mm(fh, tid(UH)), vec(tid(BH)), f, s)
        states[layer] = h
        x = egg_clip_add(ops, x, h)
        x = egg_clip_add(ops, x, mm(mm(egg_l1_norm(ops, x, vec(tid(LN2))), tid(UP)), tid(DOWN)))
    ln_out, head = head_tensors(n_layer)
    return mm(egg_l1_norm(ops, x, vec(ln_out)), head)


def per_op_epoch(ops, params, windows, states, prefixes, first_member, sigma_shift, perturbed, host, gains=None):
    """The epoch as a sequence of per-op calls (`ops`: member_ops and int_matmul of one backend), one
    byte at a time, over `windows` as (T + 1, members) columns; `host` brings a backend array to NumPy.
    The reference, and the CUDA fallback for widths the fused kernel does not take."""
    n_layer, members, dim = states.shape
    layout = egg_layout(n_layer, dim)
    gain_at = gain_offsets(layout)[0]

    def tensor(tid):
        _, shape, _, offset = layout[tid]
        return params[offset:offset + int(np.prod(shape))].reshape(shape)

    def gain(tid):
        if gains is None:
            return None
        end = gain_at[tid + 1] if tid + 1 < len(layout) else gains.shape[0]
        return gains[gain_at[tid]:end]

    def mm(x, tid):
        return int_matmul(ops, x, tensor(tid), int(prefixes[tid]), first_member, sigma_shift, perturbed, gain(tid))

    vec = {tid: egg_vector(ops, tensor(tid), int(prefixes[tid]), first_member, members, sigma_shift, perturbed,
                           gain(tid))
           for tid, (_, _, kind, _) in enumerate(layout) if kind == "vector"}
    total = np.zeros(members, np.int64)
    embed = lambda tokens: egg_embedding(ops, tokens, tensor(0), int(prefixes[0]), first_member,  # noqa: E731
                                         sigma_shift, perturbed, gain(0))
    for t in range(windows.shape[0] - 1):
        logits = per_op_byte(ops, windows[t], states, embed, mm, vec.__getitem__)
        total += host(egg_loglik(ops, logits, windows[t + 1]))
    return total


REFERENCE = Kernels("numpy")  # the per-op step on each op's NumPy reference


# sizes from layout.egg_layout: 513 D + n_layer (12 D^2 + 4 D) parameters, 10 n_layer + 3 tensors, and
# gains (noise/gains.py) D + 256 for the embedding and head each, D for ln_out, 22 D per layer
@op(cases=_cases, args={"params": "int8[513 * dim + n_layer * (12 * dim * dim + 4 * dim)]",
                        "windows": "uint8[members, window]", "states": "int8[n_layer, members, dim]",
                        "prefixes": "int64[10 * n_layer + 3]", "first_member": "int", "sigma_shift": "int",
                        "perturbed": "bool", "gains": "uint8[3 * dim + 512 + 22 * n_layer * dim] | None"})
def reference_egg_epoch(params: Int8Array, windows: UInt8Array, states: Int8Array, prefixes: Int64Array,
                        first_member: int, sigma_shift: int, perturbed: bool = True,
                        gains: UInt8Array | None = None) -> Int64Array:
    """int64 (members,): each member's log-likelihood (1/16 bit, `egg_loglik`) summed over its window,
    reading byte t and scoring byte t + 1 through the EGG with its own EGGROLL perturbation; `states` are
    carried in and left holding each layer's state after the last byte (in place).

    params: the model's flat int8 buffer in `layout.egg_layout(n_layer, dim)` order (models/egg.py).
    windows: one byte window per member (window - 1 bytes are read); a 0 byte starts a document and
    zeroes that member's states. states: the hidden state of every layer and member.
    prefixes: the noise key of each tensor at this noise epoch, in tensor-id order (the values of
    `model.prefixes(seed, epoch)`). first_member: the population index of row 0; member g uses pair
    g // 2's noise stream of each tensor, with sign +1 for even g and -1 for odd.
    sigma_shift: each perturbation is divided by 2**(4 + sigma_shift). perturbed: False runs the
    unperturbed model for every row. gains: the adaptive-noise gains of every tensor in tensor-id order
    (kernels/noise/gains.py; from the strategy's overlay), or None."""
    columns = np.ascontiguousarray(windows.T)  # (T + 1, members): one contiguous row per byte
    return per_op_epoch(REFERENCE, params, columns, states, prefixes, first_member, sigma_shift, perturbed,
                        np.asarray, gains)


@op
def cuda_egg_epoch(params: BackendArray, windows: BackendArray, states: BackendArray, prefixes: BackendArray,
                   first_member: int, sigma_shift: int, perturbed: bool = True,
                   gains: BackendArray | None = None) -> BackendArray:
    """The fused kernel where the width allows (epoch_cuda.fused_width), else the per-op kernels."""
    cuda = epoch_cuda.cuda
    if epoch_cuda.fused_width(states.shape[2]):
        windows, prefixes = on_device(windows), on_device(prefixes)
        out = epoch_cuda.run_epoch(params, windows, states, prefixes, first_member, sigma_shift, perturbed, gains)
        return out.copy_to_host()
    from eggnog.kernels.core.placement import kernels_for

    columns = cuda.to_device(np.ascontiguousarray(to_host(windows).T))
    gains = None if gains is None else on_device(gains)
    return per_op_epoch(kernels_for("cuda"), params, columns, states, to_host(prefixes), first_member, sigma_shift,
                        perturbed, to_host, gains)


def kept_bytes_per_member(n_layer, dim):
    """Device bytes per member the fused kernel keeps from one epoch to the next (kernels/egg/scratch.py):
    half a pair's noise rows and the perturbed vectors; 0 on the per-op path."""
    plan = epoch_cuda.Plan(n_layer, dim)
    return (plan.noise_len + 1) // 2 + plan.vec_tensor.size * dim if epoch_cuda.fused_width(dim) else 0


def device_bytes_per_member(n_layer, dim, steps):
    """Device bytes `cuda_egg_epoch` takes per member besides its window and states: the fused kernel's
    half of a pair's noise rows, perturbed vectors and score; the per-op path's vectors, window columns and
    one byte's activations (the residual, GRU and MLP outputs, the products' int64 sums, two bytes' logits)."""
    if epoch_cuda.fused_width(dim):
        return kept_bytes_per_member(n_layer, dim) + 8
    return epoch_cuda.Plan(n_layer, dim).vec_tensor.size * dim + steps + 1 + 12 * dim + 2 * VOCAB_SIZE + 32


@op
def cpu_egg_epoch(params: Int8Array, windows: UInt8Array, states: Int8Array, prefixes: Int64Array, first_member: int,
                  sigma_shift: int, perturbed: bool = True, gains: UInt8Array | None = None) -> Int64Array:
    """The CPU twin (epoch_cpu): tiles of members in parallel, bytes and layers inside."""
    n_layer, _, dim = states.shape
    layers = [[layer_tensor(layer, which) for which in (LN1, WF, UF, WH, UH, BF, BH, LN2, UP, DOWN)]
              for layer in range(n_layer)]
    return epoch_cpu.run_epoch(params, windows, states, prefixes, first_member, sigma_shift, perturbed,
                               egg_layout(n_layer, dim), layers, (0, *head_tensors(n_layer)), gains)

# the ops of this module by name, for callers: egg_epoch(kernels, ...)
egg_epoch = registered(reference_egg_epoch)
