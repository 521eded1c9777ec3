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

More in docs/internals.md (models/lstm.py)."""

import math
from dataclasses import asdict, dataclass
from typing import Any, cast

import numpy as np
import numpy.typing as npt

from eggnog.kernels.core.backend import packed_to_device
from eggnog.kernels.core.placement import BACKENDS, BackendArray, Kernels, kernels_for
from eggnog.kernels.layers.elementwise import add_bias, column_sum, member_affine, scale_rows, swap_leading
from eggnog.kernels.layers.embedding import embedding_backward
from eggnog.kernels.layers.losses import cross_entropy
from eggnog.kernels.layers.matmul import bmm, matmul, matmul_backward
from eggnog.kernels.layers.weighted_sums import weighted_row_sums
from eggnog.kernels.noise.probe_copies import probe_copies
from eggnog.kernels.rnn.lstm import lstm_backward, lstm_forward, lstm_input_projection, lstm_input_projection_backward
from eggnog.models.flat_params import FlatParams
from eggnog.runtime.errors import BadInput


@dataclass(frozen=True)
class LstmConfig:
    vocab_size: int = 100
    input_size: int = 100
    hidden_size: int = 240
    num_heads: int = 12

    @property
    def head_size(self) -> int:
        return self.hidden_size // self.num_heads

    def check(self) -> "LstmConfig":
        for name in ("vocab_size", "input_size", "hidden_size", "num_heads"):
            value = getattr(self, name)
            if not isinstance(value, (int, np.integer)) or value < 1:
                raise BadInput(f"LSTM {name.replace('_', '-')} must be a positive integer, got {value!r}")
        if self.vocab_size > 256:
            raise BadInput(f"LSTM vocab-size must be at most 256 (tokens are bytes), got {self.vocab_size}")
        if self.hidden_size % self.num_heads:
            raise BadInput(f"LSTM hidden-size {self.hidden_size} is not divisible by num-heads {self.num_heads}")
        return self


def tensor_specs(cfg: LstmConfig) -> list[tuple[str, tuple[int, ...], str, float]]:
    """(name, shape, kind, init std) in storage order; std 0 means zeros."""
    v, e, h, n, d = cfg.vocab_size, cfg.input_size, cfg.hidden_size, cfg.num_heads, cfg.head_size
    return [("W_in", (e, 4 * h), "matrix", 1.0 / math.sqrt(e)),
            ("R", (4, n, d, d), "heads", 1.0 / math.sqrt(d)),
            ("b", (4, n, d), "vector", 0.0),
            ("states0", (2, n, d), "state", 0.0),
            ("W_proj", (v, h), "matrix", 1.0 / math.sqrt(d)),
            ("b_proj", (v,), "vector", 0.0),
            ("embed", (v, e), "matrix", 1.0)]


def _ops(backend: str) -> Kernels:
    if backend not in BACKENDS:
        raise BadInput(f"unknown backend {backend!r}: choose numpy, cpu or cuda")
    return kernels_for(backend)


@dataclass(frozen=True)
class LstmBatch:
    """A TaskBatch on a backend in the model's time-major order (row t * B + b), put there by one upload."""
    shape: tuple[int, int]  # (B, T)
    rows: BackendArray  # (T, B) int32 token ids, checked against the vocabulary
    tokens: BackendArray  # the same, flat uint8 (the embedding gradient's)
    targets: BackendArray  # (groups T B,) uint8: the targets `groups` times, a copy for each probe of a pass
    weights: BackendArray  # (T B,) float32 mask
    row_scale: BackendArray  # (T B,) mask T B / sum(mask): the logit gradient's row weights, of the backend's dtype
    total: float  # sum(mask)
    groups: int


# a zero-order task's batch (inputs, targets, mask: (B, T) each) or an LstmBatch made from one
Batch = Any


class LstmModel(FlatParams):
    def __init__(self, cfg: LstmConfig) -> None:
        self.cfg = cfg.check()
        super().__init__(tensor_specs(cfg))
        self._segments: dict[str, BackendArray] = {}
        self._constants: dict[tuple[str, int], BackendArray] = {}

    def architecture(self) -> dict[str, Any]:
        return {"model": "lstm", "total_params": self.n_params,
                "config": {**asdict(self.cfg), "head_size": self.cfg.head_size},
                "tensors": self.tensor_table()}

    def init_params(self, seed: int) -> np.ndarray:
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
    def _check_tokens(self, *arrays: npt.ArrayLike) -> None:
        for a in arrays:
            a = np.asarray(a)
            if a.ndim != 2 or a.shape[0] < 1 or a.shape[1] < 1:
                raise BadInput(f"LSTM batches must be non-empty (B, T) arrays, got shape {a.shape}")
            if a.max() >= self.cfg.vocab_size or a.min() < 0:
                raise BadInput(f"token id {int(a.max())} is outside the LSTM vocabulary of {self.cfg.vocab_size}")

    def _params(self, ops: Kernels, flat: BackendArray) -> dict[str, BackendArray]:
        if ops.name == "cuda" and hasattr(flat, "copy_to_host"):
            return self.views(flat)
        return self.views(ops.to_device(np.asarray(flat, ops.dtype)))

    def forward(self, ops: Kernels, p: dict[str, BackendArray], rows: BackendArray, keep: bool = False,
                tokens: BackendArray | None = None) -> tuple[BackendArray, dict[str, Any] | None]:
        """Logits (T * B, V), time-major, for token ids `rows` (T, B) int32 (host ids are checked by the op,
        device ids were checked when uploaded); plus, with `keep`, a cache for `backward`, which takes the
        same ids as flat uint8 `tokens` on the backend (for the embedding gradient)."""
        h = self.cfg.hidden_size
        steps, batch = rows.shape
        table = lstm_input_projection(ops, p["embed"], p["W_in"])
        hs, cs, gates = lstm_forward(ops, table, rows, p["R"], p["b"].reshape(4 * h), p["states0"].reshape(2, h), keep)
        hflat = hs[1:].reshape(steps * batch, h)
        logits = add_bias(ops, matmul(ops, hflat, p["W_proj"]), p["b_proj"])
        cache = dict(tokens=tokens, hs=hs, cs=cs, gates=gates, hflat=hflat, shape=(batch, steps)) if keep else None
        return logits, cache

    def backward(self, ops: Kernels, p: dict[str, BackendArray], cache: dict[str, Any],
                 dlogits: BackendArray) -> dict[str, Any]:
        """Named gradients (on the backend) of the loss whose logit gradient is `dlogits` (full BPTT)."""
        cfg = self.cfg
        batch, steps = cache["shape"]
        h = cfg.hidden_size
        g: dict[str, Any] = {"b_proj": column_sum(ops, dlogits)}
        dh_out, g["W_proj"] = matmul_backward(ops, dlogits, cache["hflat"], p["W_proj"])
        draw, g["R"], dh0, dc0 = lstm_backward(ops, dh_out.reshape(steps, batch, h), p["R"], cache["hs"],
                                               cache["cs"], cache["gates"])
        draw = draw.reshape(steps * batch, 4 * h)
        g["b"] = column_sum(ops, draw)
        g["states0"] = (column_sum(ops, dh0), column_sum(ops, dc0))  # its two rows, as parts (flat_params)
        dtable = embedding_backward(ops, draw, cache["tokens"], cfg.vocab_size)
        g["embed"], g["W_in"] = lstm_input_projection_backward(ops, dtable, p["embed"], p["W_in"])
        return g

    def _check_batch(self, batch: Batch) -> None:
        shape = np.asarray(batch.inputs).shape
        if np.asarray(batch.targets).shape != shape or np.asarray(batch.mask).shape != shape:
            raise BadInput("inputs, targets and mask of a batch must have the same (B, T) shape")
        self._check_tokens(batch.inputs, batch.targets)
        if not np.asarray(batch.mask, np.float64).sum() > 0:
            raise BadInput("the batch has no position with mask 1, so its loss is undefined")

    def prepare(self, backend: str, batch: Batch, groups: int = 1) -> LstmBatch:
        """A TaskBatch checked and put on the backend in one upload (an LstmBatch passes through when it
        holds `groups` copies of the targets): what every loss of a step reads."""
        if isinstance(batch, LstmBatch) and batch.groups >= groups:
            return batch
        ops = _ops(backend)
        self._check_batch(batch)
        mask = np.ascontiguousarray(np.asarray(batch.mask, np.float64).T).reshape(-1)
        targets = np.ascontiguousarray(np.asarray(batch.targets, np.uint8).T).reshape(-1)
        total = float(mask.sum())
        rows = np.ascontiguousarray(np.asarray(batch.inputs).T)
        rows, tokens, targets, weights, row_scale = packed_to_device(
            ops.to_device, rows.astype(np.int32), rows.astype(np.uint8).reshape(-1), np.tile(targets, groups),
            mask.astype(np.float32), (mask * (mask.size / total)).astype(ops.dtype))
        return LstmBatch(np.asarray(batch.inputs).shape, rows, tokens, targets, weights, row_scale, total, groups)

    def _masked(self, ops: Kernels, logits: BackendArray, batch: LstmBatch) -> tuple[BackendArray, BackendArray]:
        """(loss (1,) on the backend, logit gradient of the unweighted mean): the loss is the mask-weighted
        mean cross-entropy in bits of an LstmBatch."""
        per_row, dlogits = cross_entropy(ops, logits, batch.targets[:logits.shape[0]])
        return weighted_row_sums(ops, per_row.reshape(1, -1), batch.weights, None, 1.0 / batch.total), dlogits

    def loss(self, backend: str, flat: BackendArray, batch: Batch) -> float:
        """Mask-weighted mean cross-entropy (bits) of a TaskBatch or LstmBatch."""
        ops = _ops(backend)
        batch = self.prepare(backend, batch)
        logits, _ = self.forward(ops, self._params(ops, flat), batch.rows)
        return float(ops.to_host(self._masked(ops, logits, batch)[0])[0])

    def probe_segments(self, backend: str) -> BackendArray:
        """probe_copies' layout of theta (kernels/noise/probe_copies.py) on the backend: the gate-major
        R, b and states0 as (gates, rest), so their probes land side by side as the heads of one LSTM."""
        if backend not in self._segments:
            leading = {"R": 4, "b": 4, "states0": 2}
            rows = [(self.offsets[name][0], leading.get(name, 1), math.prod(shape) // leading.get(name, 1))
                    for name, shape, *_ in self.specs]
            self._segments[backend] = _ops(backend).to_device(np.array(rows, np.int64))
        return self._segments[backend]

    def probe_losses(self, backend: str, theta: BackendArray, keys: BackendArray, alphas: BackendArray,
                     distribution: str, batch: Batch, out: BackendArray | None = None) -> BackendArray:
        """Mask-weighted mean cross-entropy (bits) at theta + alpha_i z_i for every probe i (z_i from
        stream key keys[i], kernels/noise/perturb.py), in one pass over the batch. The P probes run as the
        P N heads of one LSTM (R is block-diagonal, so they never mix) with the input tables and the
        output projections as batched products. Every probe's tensors come from one probe_copies launch,
        so every loss is `loss` of that perturbed vector up to fp32 summation order. Into `out` (P,)
        float64 on the backend where given (keys and alphas there too), else host float64 (P,)."""
        ops = _ops(backend)
        cfg = self.cfg
        v, e, h, n, d = cfg.vocab_size, cfg.input_size, cfg.hidden_size, cfg.num_heads, cfg.head_size
        probes = len(keys)
        batch = self.prepare(backend, batch, probes)
        if not hasattr(theta, "copy_to_host"):  # the perturbation ops take float32 on every backend
            theta = np.ascontiguousarray(theta, np.float32) if ops.name != "cuda" else ops.to_device(theta)
        if ops.name == "cuda" and not hasattr(keys, "copy_to_host"):
            keys, alphas = packed_to_device(ops.to_device, np.asarray(keys, np.int64).reshape(-1, 2),
                                            np.asarray(alphas, np.float32))
        copies = probe_copies(ops, theta, keys, alphas, distribution, self.probe_segments(backend))
        t: dict[str, BackendArray] = {}
        for name, shape, *_ in self.specs:
            start = probes * self.offsets[name][0]
            t[name] = copies[start:start + probes * math.prod(shape)]
        rows, steps = batch.shape
        # probe p's head k becomes head p N + k: the table's [4, N, D] column blocks get the probe axis after
        # the gate; R, b and states0 come that way from probe_copies
        table = bmm(ops, t["embed"].reshape(probes, v, e), t["W_in"].reshape(probes, e, 4 * h))
        table = swap_leading(ops, table.reshape(probes, v * 4, h)).reshape(v, 4 * probes * h)
        hs, _, _ = lstm_forward(ops, table, batch.rows, t["R"].reshape(4, probes * n, d, d),
                                t["b"].reshape(4 * probes * h), t["states0"].reshape(2, probes * h), False)
        hp = swap_leading(ops, hs[1:].reshape(steps * rows, probes, h))  # (P, T B, H)
        logits = bmm(ops, hp, t["W_proj"].reshape(probes, v, h), False, True)
        logits = member_affine(ops, logits, self._ones(ops, probes), t["b_proj"].reshape(probes, v))
        per_row, _ = cross_entropy(ops, logits.reshape(probes * steps * rows, v), batch.targets[:probes * steps * rows])
        sums = ops.empty(probes, np.float64) if out is None else out
        weighted_row_sums(ops, per_row.reshape(probes, steps * rows), batch.weights, sums, 1.0 / batch.total)
        return np.asarray(ops.to_host(sums), np.float64) if out is None else out

    def _ones(self, ops: Kernels, probes: int) -> BackendArray:
        """(P, V) ones on the backend (member_affine's scale), made once."""
        key = (ops.name, probes)
        if key not in self._constants:
            self._constants[key] = ops.to_device(np.ones((probes, self.cfg.vocab_size), np.float32))
        return self._constants[key]

    def loss_and_grad(self, backend: str, flat: BackendArray, batch: Batch,
                      on_device: bool = False) -> tuple[float, BackendArray]:
        """(loss, flat float32 gradient) by full BPTT: on the host, or with `on_device` where the backend
        keeps it (a device array on the GPU, which `flat` may be too)."""
        ops = _ops(backend)
        batch = self.prepare(backend, batch)
        p = self._params(ops, flat)
        logits, cache = self.forward(ops, p, batch.rows, keep=True, tokens=batch.tokens)
        loss, dlogits = self._masked(ops, logits, batch)
        grads = self.backward(ops, p, cast(dict[str, Any], cache), scale_rows(ops, dlogits, batch.row_scale))
        grad = self.flatten_on(grads, ops) if on_device else self.flatten(grads, ops)
        return float(ops.to_host(loss)[0]), grad

    def logits(self, backend: str, flat: BackendArray, inputs: npt.ArrayLike) -> np.ndarray:
        """Host logits (B, T, V) for token ids (B, T)."""
        ops = _ops(backend)
        self._check_tokens(inputs)
        batch, steps = np.asarray(inputs).shape
        rows = np.ascontiguousarray(np.asarray(inputs).T).astype(np.int32)
        logits, _ = self.forward(ops, self._params(ops, flat), rows)
        return np.ascontiguousarray(ops.to_host(logits).reshape(steps, batch, -1).transpose(1, 0, 2))
