"""The integer transformer (models/egg_transformer.py) over a population for one window of tokens:
every member reads its window with its own KV cache and perturbation; only each member's summed
log-likelihood (1/16 bit) and its d-eggs proxy loss come back.

    transformer_epoch(params, windows, prefixes, first_member, spec, perturbed) -> int64 (members, 2)

- windows: uint8 or int32 (members, T + 1) tokens; token t is read at position t, token t + 1 scored;
- prefixes: int64 (n_tensors,), each tensor's noise prefix at this epoch;
- spec: int64 layout.SPEC_FIELDS (the model's sizes and shifts, the noise scales and kind).

More in docs/internals.md (kernels/transformer/epoch.py)."""

from types import SimpleNamespace

import numpy as np

from eggnog.kernels.core.array_types import Int8Array, Int32Array, Int64Array, UInt8Array
from eggnog.kernels.core.cuda_api import on_device
from eggnog.kernels.core.placement import BackendArray
from eggnog.kernels.core.registry import op, registered
from eggnog.kernels.egg.int_math import EXP2, FIXED_POINT
from eggnog.kernels.egg.member_ops import py_floor_log2_x16
from eggnog.kernels.noise.reference import member_noise_rows
from eggnog.kernels.transformer import epoch_cpu, epoch_cuda
from eggnog.kernels.transformer.layout import (
    DOWN,
    DOWN_BIAS,
    EMBEDDING,
    EMBEDDING_BIAS,
    INIT_MLP,
    LAYER_MLP,
    LN1_W,
    LN_W,
    MAX_UNIT,
    NOISE_KINDS,
    SPEC_FIELDS,
    UP,
    UP_BIAS,
    K,
    O,
    Q,
    V,
    layer_tensor,
    tensor_table,
    transformer_layout,
)
from eggnog.kernels.transformer.tables import EXP_LUT, GELU_LUT, ROPE_SCALE_BIT, SOFTMAX_SCALE_BIT, rope_table

# ---- the NumPy reference ------------------------------------------------------------------------

def _clip(a):
    return np.clip(a, -MAX_UNIT, MAX_UNIT)


def rescale(y):
    """Each row to max |.| 127: y * 127 // max|y| (0 for an all-zero row)."""
    top = np.abs(y).max(axis=1, keepdims=True)
    return np.where(top > 0, (y * MAX_UNIT) // np.maximum(top, 1), 0)


class _Reference:
    def __init__(self, params, prefixes, first_member, members, spec, perturbed):
        self.p, self.prefixes, self.spec, self.perturbed = params.astype(np.int64), prefixes, spec, perturbed
        (self.n_layer, self.dim, self.head_dim, self.vocab, self.s_attn, self.s_qkv, self.s_out, self.s_logit,
         self.s_up, self.s_down, sigma_shift, self.v_shift, self.kind) = (int(v) for v in spec)
        self.m_shift = FIXED_POINT + sigma_shift
        self.table = tensor_table(spec)
        g = first_member + np.arange(members)
        self.pairs, self.sign = g >> 1, (1 - 2 * (g & 1))[:, None]

    def noise(self, tid, count):
        return member_noise_rows(int(self.prefixes[tid]), self.pairs, count, self.kind)

    def vector(self, tid):
        at, n, _ = self.table[tid]
        w = np.broadcast_to(self.p[at:at + n], (self.pairs.size, n))
        if not self.perturbed:
            return w
        noise = self.noise(tid, 2 * n)
        return _clip(w + ((noise[:, :n] * noise[:, n:] * self.sign) >> self.v_shift))

    def mm(self, x, tid):
        at, d_in, d_out = self.table[tid]
        acc = x @ self.p[at:at + d_in * d_out].reshape(d_out, d_in).T
        if self.perturbed:
            noise = self.noise(tid, d_in + d_out)
            s = (x * noise[:, :d_in]).sum(axis=1, keepdims=True)
            acc = acc + ((s * noise[:, d_in:] * self.sign) >> self.m_shift)
        return acc

    def ln(self, x, w_tid):
        w, b = self.vector(w_tid), self.vector(w_tid + 1)
        mean = np.maximum(np.abs(x).sum(axis=1, keepdims=True) // self.dim, 1)
        return _clip((x * w) // mean + b)

    def mlp(self, x, first):
        h = self.ln(x, first + LN_W)
        u = GELU_LUT[_clip((self.mm(h, first + UP) + self.vector(first + UP_BIAS)) >> self.s_up) + 128]
        z = (self.mm(u, first + DOWN) >> self.s_down) + self.vector(first + DOWN_BIAS)
        return rescale(x + z)

    def rope(self, u, rows):
        m = u.shape[0]
        pairs = u.reshape(m, self.dim // self.head_dim, self.head_dim // 2, 2)
        c, s = rows[:, 0][None, None, :], rows[:, 1][None, None, :]
        a, b = pairs[..., 0], pairs[..., 1]
        out = np.stack([(a * c - b * s) >> ROPE_SCALE_BIT, (a * s + b * c) >> ROPE_SCALE_BIT], axis=-1)
        return out.reshape(m, self.dim)

    def attention(self, q, keys, values):
        """q (M, D); keys, values (M, t + 1, D): each head's weighted mean of the values."""
        m, heads, hd = q.shape[0], self.dim // self.head_dim, self.head_dim
        qh = q.reshape(m, heads, 1, hd)
        kh = keys.reshape(m, -1, heads, hd).transpose(0, 2, 1, 3)
        vh = values.reshape(m, -1, heads, hd).transpose(0, 2, 1, 3)
        scores = (qh * kh).sum(axis=3) >> self.s_attn  # (M, heads, t + 1)
        w = EXP_LUT[np.minimum(scores.max(axis=2, keepdims=True) - scores, EXP_LUT.size - 1)]
        out = (w[..., None] * vh).sum(axis=2) // w.sum(axis=2)[..., None]
        return out.reshape(m, self.dim)

    def embed(self, tokens):
        at, dim, vocab = self.table[EMBEDDING]
        x = self.p[at:at + vocab * dim].reshape(vocab, dim)[tokens] + self.vector(EMBEDDING_BIAS)
        if self.perturbed:
            noise = self.noise(EMBEDDING, dim + vocab)
            a = noise[np.arange(tokens.size), dim + tokens][:, None]
            x = x + ((a * noise[:, :dim] * self.sign) >> self.m_shift)
        return _clip(x)

    def head(self, h):
        """Unclipped logits: the embedding (vocab, dim) is the head's matrix, with its noise (B over
        dim, A over tokens)."""
        return self.mm(h, EMBEDDING) >> self.s_logit


def loglik(logits, targets):
    """The EGG's exact log-likelihood (1/16 bit) of each row's target over int8 logits, any vocabulary."""
    y = logits + 128
    sums = EXP2[y].sum(axis=1)
    log_term = np.array([py_floor_log2_x16(int(s)) for s in sums], np.int64) - 64
    return y[np.arange(len(y)), targets] - log_term


def proxy_loss(logits, targets):
    """d-eggs' integer loss of each row's target over unclipped logits (the module docstring)."""
    top = logits.max(axis=1)
    sums = EXP_LUT[np.minimum(top[:, None] - logits, EXP_LUT.size - 1)].sum(axis=1)
    log2 = np.array([py_floor_log2_x16(int(s)) >> 4 for s in sums], np.int64)
    return 8 * (log2 - SOFTMAX_SCALE_BIT) + top - logits[np.arange(len(logits)), targets]


def _cases(rng):
    """Two heads of 4 over dim 8, two layers, members off any block, an odd first member; one
    unperturbed run; gaussian noise and a vocabulary above 256 symbols."""
    for n_layer, dim, head_dim, vocab, members, steps, first, noise, perturbed in (
            (2, 8, 4, 256, 3, 3, 3, "uniform", True), (1, 8, 8, 256, 2, 2, 0, "uniform", False),
            (1, 12, 4, 300, 2, 2, 1, "gaussian", True)):
        # shifts (attn, qkv, out, logit, mlp up, mlp down) for these widths; sigma shift 1, vector shift 2
        spec = np.array([n_layer, dim, head_dim, vocab, 8, 3, 4, 4, 4, 5, 1, 2, NOISE_KINDS[noise]], np.int64)
        layout = transformer_layout(SimpleNamespace(n_layer=n_layer, dim=dim, vocab=vocab))
        n_params = layout[-1][3] + int(np.prod(layout[-1][1]))
        params = np.clip(rng.integers(-15, 16, n_params) * 4 + rng.integers(-3, 4, n_params), -127, 127)
        for name, shape, _, offset in layout:
            if name.endswith(".weight"):  # LN weights near 1.0
                params[offset:offset + shape[0]] = 16 + rng.integers(-3, 4, shape[0])
        windows = rng.integers(0, vocab, (members, steps + 1)).astype(np.int32)
        prefixes = rng.integers(0, 1 << 32, len(layout)).astype(np.int64)
        yield params.astype(np.int8), windows, prefixes, first, spec, perturbed


def _forward(params, windows, prefixes, first_member, spec, perturbed, keys=None, values=None, position=0):
    """(each member's summed (log-likelihood, proxy loss), each member's logits at the window's last
    position). Token t of a window is read at position + t with the KV cache keys, values (n_layer,
    members, positions, dim), filled below `position` and written in place (empty where not given)."""
    windows = np.asarray(windows, np.int64)
    members, steps = windows.shape[0], windows.shape[1] - 1
    r = _Reference(np.asarray(params), np.asarray(prefixes), first_member, members, np.asarray(spec), perturbed)
    if keys is None:
        keys = np.zeros((r.n_layer, members, steps, r.dim), np.int64)
        values = np.zeros_like(keys)
    rope = rope_table(keys.shape[2], r.head_dim)
    total = np.zeros((members, 2), np.int64)
    for t in range(position, position + steps):
        x = r.mlp(r.embed(windows[:, t - position]), INIT_MLP)
        for layer in range(r.n_layer):
            h = r.ln(x, layer_tensor(layer, LN1_W))
            q, k, v = (r.mm(h, layer_tensor(layer, which)) >> r.s_qkv for which in (Q, K, V))
            keys[layer, :, t] = rescale(r.rope(k, rope[t]))
            values[layer, :, t] = rescale(v)
            attended = r.attention(rescale(r.rope(q, rope[t])), keys[layer, :, :t + 1], values[layer, :, :t + 1])
            x = rescale(x + (r.mm(attended, layer_tensor(layer, O)) >> r.s_out))
            x = r.mlp(x, layer_tensor(layer, LAYER_MLP))
        h = r.ln(x, layer_tensor(r.n_layer, 0))  # ln_f follows the last layer
        raw = r.head(h)
        logits = _clip(raw)
        total[:, 0] += loglik(logits, windows[:, t + 1 - position])
        total[:, 1] += proxy_loss(raw, windows[:, t + 1 - position])
    return total, logits


SPEC = f"int64[{len(SPEC_FIELDS)}]"  # the declaration of a spec argument: one value per layout.SPEC_FIELDS


# params' and prefixes' lengths follow spec's values (the layout), which the grammar cannot name
@op(cases=_cases, args={"params": "int8[n_params]", "windows": "uint8/int32[members, window]",
                        "prefixes": "int64[n_tensors]", "first_member": "int", "spec": SPEC,
                        "perturbed": "bool"})
def reference_transformer_epoch(params: Int8Array, windows: UInt8Array | Int32Array, prefixes: Int64Array,
                                first_member: int, spec: Int64Array, perturbed: bool = True) -> Int64Array:
    """int64 (members, 2): for each member, column 0 its log-likelihood (1/16 bit, the EGG's exact integer
    one over the clipped logits) summed over its window, column 1 its summed d-eggs proxy loss over the
    unclipped logits; token t is read at position t (a fresh KV cache per member) and token t + 1 scored.

    params: the model's flat int8 buffer in `layout.transformer_layout` order (models/egg_transformer.py).
    windows: one window of tokens per member (window - 1 are read), each below the vocabulary.
    prefixes: the noise key of each tensor in tensor-id order at this noise epoch
    (`model.prefixes(seed, epoch)`). first_member: the population index of row 0; member g uses pair
    g // 2's noise stream of each tensor (the spec's noise kind), sign +1 for even g and -1 for odd.
    spec: `layout.make_spec`, the sizes, shifts, noise scales and kind in layout.SPEC_FIELDS order.
    perturbed: False runs the unperturbed model for every row."""
    return _forward(params, windows, prefixes, first_member, spec, perturbed)[0]


# ---- the logits after a context, for generation -----------------------------------------------------

def _context_window(context):
    """A one-member window that reads every context token (the token after it is never scored)."""
    return np.append(np.asarray(context, np.int32), np.int32(0))[None, :]


def _logit_cases(rng):
    for params, windows, _, _, spec, _ in _cases(rng):
        yield params, windows[0, :-1], spec


# params' length follows spec's values (the layout), which the grammar cannot name
@op(cases=_logit_cases, args={"params": "int8[n_params]", "context": "uint8/int32[n]", "spec": SPEC})
def reference_transformer_last_logits(params: Int8Array, context: UInt8Array | Int32Array,
                                      spec: Int64Array) -> Int64Array:
    """int64 (vocab,): the clipped logits of the unperturbed model after reading every token of `context`
    (positions 0 .. n - 1) from an empty KV cache, for sampling the token that follows it.

    params: the model's flat int8 buffer (`layout.transformer_layout`). context: the tokens read.
    spec: `layout.make_spec`, the model's sizes and shifts (layout.SPEC_FIELDS)."""
    window = _context_window(context)
    return _forward(params, window, np.zeros(len(tensor_table(spec)), np.int64), 0, spec, False)[1][0]


@op
def cpu_transformer_epoch(params: Int8Array, windows: UInt8Array | Int32Array, prefixes: Int64Array, first_member: int,
                          spec: Int64Array, perturbed: bool = True) -> Int64Array:
    return epoch_cpu.run_epoch(params, windows, prefixes, first_member, spec, perturbed)[0]


@op
def cpu_transformer_last_logits(params: Int8Array, context: UInt8Array | Int32Array, spec: Int64Array) -> Int64Array:
    window = _context_window(context)
    return epoch_cpu.run_epoch(params, window, np.zeros(len(tensor_table(spec)), np.int64), 0, spec, False)[1][0]


@op
def cuda_transformer_epoch(params: BackendArray, windows: BackendArray, prefixes: BackendArray, first_member: int,
                           spec: BackendArray, perturbed: bool = True) -> BackendArray:
    out, _ = epoch_cuda.run_epoch(on_device(params), on_device(windows, np.int32), on_device(prefixes, np.int64),
                                  first_member, spec, perturbed)
    return out.copy_to_host()


@op
def cuda_transformer_last_logits(params: BackendArray, context: BackendArray, spec: BackendArray) -> BackendArray:
    window = on_device(_context_window(context))
    _, logits = epoch_cuda.run_epoch(on_device(params), window, on_device(np.zeros(len(tensor_table(spec)), np.int64)),
                                     0, spec, False, keep_logits=True)
    return logits.copy_to_host()[0].astype(np.int64)

# the ops of this module by name, for callers: transformer_epoch(kernels, ...)
transformer_epoch = registered(reference_transformer_epoch)
transformer_last_logits = registered(reference_transformer_last_logits)
