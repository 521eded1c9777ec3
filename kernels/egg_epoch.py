"""A whole EGG evaluation epoch in one call: every member of a population slice reads its byte window
through the (perturbed) EGG, and only the summed log-likelihood of each member comes back.

    egg_epoch(params, windows, states, prefixes, first_member, sigma_shift, perturbed) -> int64 (members,)

- params:   the flat int8 parameter buffer in the layout of `egg_layout` (tensor id = position);
- windows:  uint8 (members, T + 1); byte t is read, byte t + 1 is scored;
- states:   int8 (n_layer, members, dim), carried in and updated in place;
- prefixes: int64 (n_tensors,), the noise prefix of each tensor id at this epoch.

The reference is the per-op EGG step (egg_ops, int_matmul) looped over bytes. The CPU twin and the
CUDA kernel carry a tile of members through every byte and layer in one call, so nothing is launched
or forked per byte; all three agree bit for bit.
"""

import numpy as np

from eggnog.kernels.egg_ops import (reference_egg_clip_add, reference_egg_embedding, reference_egg_gru_forget,
                                    reference_egg_gru_output, reference_egg_l1_norm, reference_egg_loglik,
                                    reference_egg_vector)
from eggnog.kernels.int_matmul import reference_int_matmul
from eggnog.kernels.registry import op

VOCAB = 256
# Per-layer tensors, in tensor-id order after the embedding; ln_out and head follow the last layer.
LAYER_TENSORS = (("ln1", "vector", (1,)), ("gru.wf", "matrix", (1, 1)), ("gru.uf", "matrix", (1, 1)),
                 ("gru.wh", "matrix", (1, 1)), ("gru.uh", "matrix", (1, 1)), ("gru.bf", "vector", (1,)),
                 ("gru.bh", "vector", (1,)), ("ln2", "vector", (1,)), ("mlp.up", "matrix", (4, 1)),
                 ("mlp.down", "matrix", (1, 4)))
LN1, WF, UF, WH, UH, BF, BH, LN2, UP, DOWN = range(1, 11)  # offsets of a layer's tensor ids from 1 + 10 * layer


def egg_layout(n_layer, dim):
    """(name, shape, kind, offset) of every tensor, in tensor-id order."""
    specs = [("embedding", (VOCAB, dim), "embedding")]
    for layer in range(n_layer):
        specs += [(f"layers.{layer}.{name}", tuple(m * dim for m in mult), kind) for name, kind, mult in LAYER_TENSORS]
    specs += [("ln_out", (dim,), "vector"), ("head", (VOCAB, dim), "matrix")]
    out, offset = [], 0
    for name, shape, kind in specs:
        out.append((name, shape, kind, offset))
        offset += int(np.prod(shape))
    return out


def layer_tensor(layer, which):
    """Tensor id of a layer's tensor (which: LN1 ... DOWN)."""
    return 10 * layer + which


def head_tensors(n_layer):
    """Tensor ids of ln_out and head."""
    return 10 * n_layer + 1, 10 * n_layer + 2


def _case(rng, n_layer, dim, members, steps, first, sigma_shift, perturbed):
    from eggnog.kernels.rng_reference import gaussian_int8

    layout = egg_layout(n_layer, dim)
    n_params = layout[-1][3] + int(np.prod(layout[-1][1]))
    params = np.asarray(gaussian_int8((int(rng.integers(1 << 32)), 7), 0, n_params), dtype=np.int8)
    for name, shape, kind, offset in layout:
        if name.rsplit(".", 1)[-1].startswith("ln"):
            params[offset:offset + shape[0]] = 16 + rng.integers(-3, 4, shape[0])
    windows = rng.integers(1, 256, (members, steps + 1)).astype(np.uint8)
    windows[::3, 1] = 0  # documents start mid-window: states reset
    states = np.clip(np.rint(rng.normal(0, 40, (n_layer, members, dim))), -127, 127).astype(np.int8)
    prefixes = rng.integers(0, 1 << 32, len(layout)).astype(np.int64)
    return params, windows, states, prefixes, first, sigma_shift, perturbed


def _cases(rng):
    """Two layers, members off the GPU's member tile, odd first members, an unperturbed run."""
    yield _case(rng, 2, 64, 20, 3, 3, 4, True)
    yield _case(rng, 1, 64, 9, 2, 0, 0, False)


@op(cases=_cases)
def reference_egg_epoch(params, windows, states, prefixes, first_member, sigma_shift, perturbed=True):
    n_layer, members, dim = states.shape
    layout = egg_layout(n_layer, dim)

    def tensor(tid):
        _, shape, _, offset = layout[tid]
        return params[offset:offset + int(np.prod(shape))].reshape(shape)

    def mm(x, tid):
        return reference_int_matmul(x, tensor(tid), int(prefixes[tid]), first_member, sigma_shift, perturbed)

    vec = {tid: reference_egg_vector(tensor(tid), int(prefixes[tid]), first_member, members, sigma_shift, perturbed)
           for tid, (_, _, kind, _) in enumerate(layout) if kind == "vector"}
    ln_out, head = head_tensors(n_layer)
    total = np.zeros(members, np.int64)
    for t in range(windows.shape[1] - 1):
        tokens = np.ascontiguousarray(windows[:, t])
        states[:, tokens == 0] = 0
        x = reference_egg_embedding(tokens, tensor(0), int(prefixes[0]), first_member, sigma_shift, perturbed)
        for layer in range(n_layer):
            tid = lambda which: layer_tensor(layer, which)  # noqa: E731
            s = states[layer]
            h_in = reference_egg_l1_norm(x, vec[tid(LN1)])
            f, fh = reference_egg_gru_forget(mm(h_in, tid(WF)), mm(s, tid(UF)), vec[tid(BF)], s)
            h = reference_egg_gru_output(mm(h_in, tid(WH)), mm(fh, tid(UH)), vec[tid(BH)], f, s)
            states[layer] = h
            x = reference_egg_clip_add(x, h)
            up = mm(reference_egg_l1_norm(x, vec[tid(LN2)]), tid(UP))
            x = reference_egg_clip_add(x, mm(up, tid(DOWN)))
        logits = mm(reference_egg_l1_norm(x, vec[ln_out]), head)
        total += reference_egg_loglik(logits, np.ascontiguousarray(windows[:, t + 1]))
    return total
