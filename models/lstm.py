"""The multi-head LSTM language model of the zero-order RNN paper (Chaubard & Kochenderfer, "Scaling
Recurrent Neural Networks to a Billion Parameters with Zero-Order Optimization", 2025; the authors'
code is sisl/zero_order_rnn), in the form of NX-AI's FlashRNN (a block-diagonal recurrence per head),
fp32, over one flat parameter vector (tests/data/lstm_zorn_code9.npz holds the authors' module's
outputs that it is tested against):

    x = embed[inputs]                                   (V -> E)
    Wx = x @ W_in = (embed @ W_in)[inputs]              a (V, 4H) table, columns [4, N, D], read by
                                                        the recurrent kernel row by token
    per step: raw = Wx_t + R h_{t-1} (block-diagonal per head) + b
              c = sigmoid(f) c + sigmoid(i) tanh(z),  h = sigmoid(o) tanh(c)     (gates i, f, z, o)
    logits = h @ W_proj^T + b_proj

from states0 = (h0, c0), shared by every row of the batch. Tensors are stored in the order of the
reference's `model.parameters()` (W_in, R, b, states0, W_proj, b_proj, embed), which fixes the
per-tensor noise keys of the zero-order methods; states0 is part of theta (the reference counts it
in P but never trains it with BPTT; here its gradient is returned like any other).

    P = V E + 4 E H + 4 H^2 / N + 4 H + 2 H + V H + V

The loss is the mask-weighted mean cross-entropy in bits over the positions of a TaskBatch with
mask 1. Backends: "numpy" (float64 references), "cpu" (fp32 twins), "cuda" (kernels). Internally
the sequence is time-major (row t * B + b), so every step reads contiguous (B, .) slices.
"""

import math
from dataclasses import asdict, dataclass

import numpy as np

from eggnog.kernels.core.registry import BACKENDS, ops_for
from eggnog.kernels.layers.weighted_sums import weighted_means
from eggnog.models.flat_params import FlatParams
from eggnog.runtime.errors import BadInput


@dataclass(frozen=True)
class LstmConfig:
    vocab_size: int = 100
    input_size: int = 100
    hidden_size: int = 240
    num_heads: int = 12

    @property
    def head_size(self):
        return self.hidden_size // self.num_heads

    def check(self):
        for name in ("vocab_size", "input_size", "hidden_size", "num_heads"):
            value = getattr(self, name)
            if not isinstance(value, (int, np.integer)) or value < 1:
                raise BadInput(f"LSTM {name.replace('_', '-')} must be a positive integer, got {value!r}")
        if self.vocab_size > 256:
            raise BadInput(f"LSTM vocab-size must be at most 256 (tokens are bytes), got {self.vocab_size}")
        if self.hidden_size % self.num_heads:
            raise BadInput(f"LSTM hidden-size {self.hidden_size} is not divisible by num-heads {self.num_heads}")
        return self


def tensor_specs(cfg):
    """(name, shape, kind, init std) in storage order; std 0 means zeros."""
    v, e, h, n, d = cfg.vocab_size, cfg.input_size, cfg.hidden_size, cfg.num_heads, cfg.head_size
    return [("W_in", (e, 4 * h), "matrix", 1.0 / math.sqrt(e)),
            ("R", (4, n, d, d), "heads", 1.0 / math.sqrt(d)),
            ("b", (4, n, d), "vector", 0.0),
            ("states0", (2, n, d), "state", 0.0),
            ("W_proj", (v, h), "matrix", 1.0 / math.sqrt(d)),
            ("b_proj", (v,), "vector", 0.0),
            ("embed", (v, e), "matrix", 1.0)]


def _ops(backend):
    if backend not in BACKENDS:
        raise BadInput(f"unknown backend {backend!r}: choose numpy, cpu or cuda")
    return ops_for(backend)


class LstmModel(FlatParams):
    def __init__(self, cfg: LstmConfig):
        self.cfg = cfg.check()
        super().__init__(tensor_specs(cfg))

    def architecture(self):
        return {"model": "lstm", "total_params": self.n_params,
                "config": {**asdict(self.cfg), "head_size": self.cfg.head_size},
                "tensors": self.tensor_table()}

    def init_params(self, seed):
        """N(0, 1) scaled per tensor (W_in 1/sqrt(E), R and W_proj 1/sqrt(D), embed 1), zeros for b,
        states0 and b_proj; drawn tensor by tensor in storage order from one generator."""
        rng = np.random.default_rng(seed)
        flat = np.zeros(self.n_params, np.float32)
        for name, shape, _, std in self.specs:
            start, _ = self.offsets[name]
            if std:
                n = math.prod(shape)
                flat[start:start + n] = rng.standard_normal(n, dtype=np.float32) * np.float32(std)
        return flat

    # ---- forward / backward ----------------------------------------------------------------------
    def _check_tokens(self, *arrays):
        for a in arrays:
            a = np.asarray(a)
            if a.ndim != 2 or a.shape[0] < 1 or a.shape[1] < 1:
                raise BadInput(f"LSTM batches must be non-empty (B, T) arrays, got shape {a.shape}")
            if a.max() >= self.cfg.vocab_size or a.min() < 0:
                raise BadInput(f"token id {int(a.max())} is outside the LSTM vocabulary of {self.cfg.vocab_size}")

    def _params(self, ops, flat):
        if ops.name == "cuda" and hasattr(flat, "copy_to_host"):
            return self.views(flat)
        return self.views(ops.to_device(np.asarray(flat, ops.dtype)))

    def forward(self, ops, p, inputs, keep=False):
        """Logits (T * B, V), time-major, for token ids `inputs` (B, T); plus a cache for `backward`."""
        cfg = self.cfg
        batch, steps = np.asarray(inputs).shape
        h = cfg.hidden_size
        time_major = np.ascontiguousarray(np.asarray(inputs).T)
        table = ops.lstm_input_projection(p["embed"], p["W_in"])
        # rows go as a host array: the op checks them there and copies them to the device itself
        hs, cs, gates = ops.lstm_forward(table, time_major.astype(np.int32), p["R"],
                                         p["b"].reshape(4 * h), p["states0"].reshape(2, h), keep)
        hflat = hs[1:].reshape(steps * batch, h)
        logits = ops.add_bias(ops.matmul(hflat, p["W_proj"]), p["b_proj"])
        cache = None
        if keep:  # the tokens go to the device only for backward's embedding gradient
            cache = dict(tokens=ops.to_device(time_major.astype(np.uint8).reshape(-1)), hs=hs, cs=cs, gates=gates,
                         hflat=hflat, shape=(batch, steps))
        return logits, cache

    def backward(self, ops, p, cache, dlogits):
        """Named gradients (on the backend) of the loss whose logit gradient is `dlogits` (full BPTT)."""
        cfg = self.cfg
        batch, steps = cache["shape"]
        h = cfg.hidden_size
        g = {"b_proj": ops.column_sum(dlogits)}
        dh_out, g["W_proj"] = ops.matmul_backward(dlogits, cache["hflat"], p["W_proj"])
        draw, g["R"], dh0, dc0 = ops.lstm_backward(dh_out.reshape(steps, batch, h), p["R"], cache["hs"],
                                                   cache["cs"], cache["gates"])
        draw = draw.reshape(steps * batch, 4 * h)
        g["b"] = ops.column_sum(draw)
        g["states0"] = (ops.column_sum(dh0), ops.column_sum(dc0))  # its two rows, as parts (flat_params)
        dtable = ops.embedding_backward(draw, cache["tokens"], cfg.vocab_size)
        g["embed"], g["W_in"] = ops.lstm_input_projection_backward(dtable, p["embed"], p["W_in"])
        return g

    def _check_batch(self, batch):
        shape = np.asarray(batch.inputs).shape
        if np.asarray(batch.targets).shape != shape or np.asarray(batch.mask).shape != shape:
            raise BadInput("inputs, targets and mask of a batch must have the same (B, T) shape")
        self._check_tokens(batch.inputs, batch.targets)
        if not np.asarray(batch.mask, np.float64).sum() > 0:
            raise BadInput("the batch has no position with mask 1, so its loss is undefined")

    @staticmethod
    def _time_major_targets(batch):
        """(mask float64, targets uint8) of a batch, flat in the model's time-major row order."""
        return (np.ascontiguousarray(np.asarray(batch.mask, np.float64).T).reshape(-1),
                np.ascontiguousarray(np.asarray(batch.targets, np.uint8).T).reshape(-1))

    def _masked(self, ops, logits, batch):
        """(loss, logit gradient of the unweighted mean, per-row weights turning it into the masked one)."""
        mask, targets = self._time_major_targets(batch)
        total = mask.sum()
        rows, dlogits = ops.cross_entropy(logits, ops.to_device(targets))
        loss = float(weighted_means(ops, rows, mask)[0])
        return loss, dlogits, mask * (mask.size / total)

    def loss(self, backend, flat, batch):
        """Mask-weighted mean cross-entropy (bits) of a TaskBatch."""
        ops = _ops(backend)
        self._check_batch(batch)
        logits, _ = self.forward(ops, self._params(ops, flat), batch.inputs)
        return self._masked(ops, logits, batch)[0]

    def probe_losses(self, backend, theta, keys, alphas, distribution, batch):
        """Mask-weighted mean cross-entropy (bits) at theta + alpha_i z_i for every probe i (z_i from
        stream key keys[i], kernels/noise/perturb.py), in one pass over the batch. The P probes run as the
        P N heads of one LSTM (R is block-diagonal, so they never mix) with the input tables and the
        output projections as batched products. Each probe's tensors are drawn from its key at their
        offsets in theta straight into (P, ...) arrays, so every loss is `loss` of that perturbed
        vector up to fp32 summation order. Host float64 losses (P,)."""
        ops = _ops(backend)
        self._check_batch(batch)
        cfg = self.cfg
        v, e, h, n, d = cfg.vocab_size, cfg.input_size, cfg.hidden_size, cfg.num_heads, cfg.head_size
        probes = len(keys)
        if not hasattr(theta, "copy_to_host"):  # the perturbation ops take float32 on every backend
            theta = np.ascontiguousarray(theta, np.float32) if ops.name != "cuda" else ops.to_device(theta)
        t = {}
        for name, shape, *_ in self.specs:
            start, _ = self.offsets[name]
            size = math.prod(shape)
            t[name] = ops.empty((probes, size), np.float32)
            for i in range(probes):
                ops.perturbed_copy(theta[start:start + size], t[name][i], (int(keys[i][0]), int(keys[i][1])),
                                   float(alphas[i]), distribution, start)
        inputs = np.asarray(batch.inputs)
        rows, steps = inputs.shape
        # probe p's head k becomes head p N + k: every [4, N, D] column block gets the probe axis after the gate
        table = ops.bmm(t["embed"].reshape(probes, v, e), t["W_in"].reshape(probes, e, 4 * h))
        table = ops.swap_leading(table.reshape(probes, v * 4, h)).reshape(v, 4 * probes * h)
        r = ops.swap_leading(t["R"].reshape(probes, 4, n * d * d)).reshape(4, probes * n, d, d)
        bias = ops.swap_leading(t["b"].reshape(probes, 4, h)).reshape(4 * probes * h)
        states0 = ops.swap_leading(t["states0"].reshape(probes, 2, h)).reshape(2, probes * h)
        time_major = np.ascontiguousarray(inputs.T).astype(np.int32)
        hs, _, _ = ops.lstm_forward(table, time_major, r, bias, states0, False)
        hp = ops.swap_leading(hs[1:].reshape(steps * rows, probes, h))  # (P, T B, H)
        logits = ops.bmm(hp, t["W_proj"].reshape(probes, v, h), False, True)
        logits = ops.member_affine(logits, ops.to_device(np.ones((probes, v), np.float32)),
                                   t["b_proj"].reshape(probes, v))
        mask, targets = self._time_major_targets(batch)
        per_row, _ = ops.cross_entropy(logits.reshape(probes * steps * rows, v),
                                       ops.to_device(np.tile(targets, probes)))
        return weighted_means(ops, per_row, mask, probes)

    def loss_and_grad(self, backend, flat, batch, on_device=False):
        """(loss, flat float32 gradient) by full BPTT: on the host, or with `on_device` where the backend
        keeps it (a device array on the GPU, which `flat` may be too)."""
        ops = _ops(backend)
        self._check_batch(batch)
        p = self._params(ops, flat)
        logits, cache = self.forward(ops, p, batch.inputs, keep=True)
        loss, dlogits, weights = self._masked(ops, logits, batch)
        dlogits = ops.scale_rows(dlogits, ops.to_device(weights.astype(ops.dtype)))
        grads = self.backward(ops, p, cache, dlogits)
        return loss, self.flatten_on(grads, ops) if on_device else self.flatten(grads, ops)

    def logits(self, backend, flat, inputs):
        """Host logits (B, T, V) for token ids (B, T)."""
        ops = _ops(backend)
        self._check_tokens(inputs)
        batch, steps = np.asarray(inputs).shape
        logits, _ = self.forward(ops, self._params(ops, flat), inputs)
        return np.ascontiguousarray(ops.to_host(logits).reshape(steps, batch, -1).transpose(1, 0, 2))
