"""The MinGRU byte LM (lucidrains minLM as gruboros trains it), fp32, on the registry's kernels:

    x = embed(bytes)                                       256 -> dim
    depth x:  x += out_proj(minGRU(RMSNorm(x)))            inner width dim * expansion_factor;
              x += W2 GELU(W1 RMSNorm(x) + b1) + b2        out_proj only when expansion_factor != 1
    logits = head(RMSNorm(x))                              dim -> 256, no bias, no weight tying

The minGRU's fused input projection is kept as its two halves, `gru_hidden` (u) and `gru_gate` (k).
gruboros initialisation: N(0, 0.02/sqrt(dim)) for embedding, head, minGRU input and FF input
weights; zeros for the minGRU output projection and the FF output layer, so every block starts as
the identity; norms at one; the FF input bias as PyTorch's default U(+-1/sqrt(dim)).

More in docs/internals.md (models/mingru.py)."""

import math
from dataclasses import asdict, dataclass
from typing import Any, cast

import numpy as np
import numpy.typing as npt

from eggnog.kernels.core.placement import BackendArray, Kernels
from eggnog.kernels.layers.activations import gelu, gelu_backward
from eggnog.kernels.layers.elementwise import add, add_bias, column_sum, last_step, member_affine
from eggnog.kernels.layers.embedding import embedding, embedding_backward
from eggnog.kernels.layers.losses import cross_entropy
from eggnog.kernels.layers.lowrank import lowrank_expand, lowrank_project, lowrank_project_rows
from eggnog.kernels.layers.matmul import matmul, matmul_backward
from eggnog.kernels.layers.norms import rmsnorm, rmsnorm_backward
from eggnog.kernels.layers.weighted_sums import weighted_row_sums
from eggnog.kernels.rnn.scan import scan_backward, scan_forward, scan_step
from eggnog.models.flat_params import FlatParams
from eggnog.runtime.errors import BadInput

VOCAB = 256


@dataclass(frozen=True)
class MinGruConfig:
    dim: int
    depth: int
    expansion_factor: float = 1.5
    ff_mult: float = 4.0

    @property
    def dim_inner(self) -> int:
        return int(self.dim * self.expansion_factor)

    @property
    def ff_inner(self) -> int:
        return int(self.dim * self.ff_mult)

    @property
    def proj_out(self) -> bool:
        return self.expansion_factor != 1

    def check(self) -> "MinGruConfig":
        if self.dim < 1 or self.depth < 1:
            raise BadInput(f"dim and depth must be positive, got dim {self.dim}, depth {self.depth}")
        if self.expansion_factor <= 0 or self.ff_mult <= 0:
            raise BadInput("--expansion-factor and --ff-mult must be positive")
        if self.dim_inner < 1 or self.ff_inner < 1:
            raise BadInput(f"dim {self.dim} with expansion factor {self.expansion_factor} and ff mult "
                           f"{self.ff_mult} gives a zero-width layer")
        return self


def tensor_specs(cfg: MinGruConfig) -> list[tuple[str, tuple[int, ...], str, str]]:
    """(name, shape, kind, init) in storage order; kind "matrix" (low-rank perturbed) or "vector"."""
    d, di, fi = cfg.dim, cfg.dim_inner, cfg.ff_inner
    specs: list[tuple[str, tuple[int, ...], str, str]] = [("embed", (VOCAB, d), "matrix", "normal")]
    for layer in range(cfg.depth):
        b = f"blocks.{layer}."
        specs += [(b + "gru_norm", (d,), "vector", "ones"),
                  (b + "gru_hidden", (di, d), "matrix", "normal"),
                  (b + "gru_gate", (di, d), "matrix", "normal")]
        if cfg.proj_out:
            specs.append((b + "gru_out", (d, di), "matrix", "zeros"))
        specs += [(b + "ff_norm", (d,), "vector", "ones"),
                  (b + "ff_in", (fi, d), "matrix", "normal"),
                  (b + "ff_in_bias", (fi,), "vector", "fan_in"),
                  (b + "ff_out", (d, fi), "matrix", "zeros"),
                  (b + "ff_out_bias", (d,), "vector", "zeros")]
    specs += [("norm", (d,), "vector", "ones"), ("head", (VOCAB, d), "matrix", "normal")]
    return specs


def _flat_bytes(ops: Kernels, tokens: BackendArray) -> BackendArray:
    """(B, T) bytes as a flat uint8 vector on the backend (uploaded where they are on the host)."""
    if hasattr(tokens, "copy_to_host"):
        return tokens.reshape(tokens.size)
    return ops.to_device(np.ascontiguousarray(tokens, np.uint8).reshape(-1))


class MinGruModel(FlatParams):
    def __init__(self, cfg: MinGruConfig) -> None:
        self.cfg = cfg.check()
        super().__init__(tensor_specs(cfg))
        self._ones: dict[tuple[str, int], BackendArray] = {}

    def architecture(self) -> dict[str, Any]:
        return {"model": "mingru", "total_params": self.n_params,
                "config": {**asdict(self.cfg), "dim_inner": self.cfg.dim_inner, "ff_inner": self.cfg.ff_inner},
                "tensors": self.tensor_table()}

    def init_params(self, seed: int) -> np.ndarray:
        rng = np.random.default_rng(seed)
        std = 0.02 / math.sqrt(self.cfg.dim)
        flat = np.empty(self.n_params, np.float32)
        for name, shape, _, init in self.specs:
            start, _ = self.offsets[name]
            n = math.prod(shape)
            if init == "normal":
                values = rng.normal(0.0, std, n)
            elif init == "fan_in":
                bound = 1.0 / math.sqrt(self.cfg.dim)
                values = rng.uniform(-bound, bound, n)
            else:
                values = np.full(n, 1.0 if init == "ones" else 0.0)
            flat[start:start + n] = values
        return flat

    # ---- building blocks (perturbation-aware) ---------------------------------------------------
    def _linear(self, ops: Kernels, p: dict[str, BackendArray], name: str, x: BackendArray, batch: int,
                perturbation: Any) -> BackendArray:
        y = matmul(ops, x, p[name])
        if perturbation is None:
            return y
        noise = perturbation.matrix(name)
        if noise is None:
            return y
        a, b, coef = noise
        steps = x.shape[0] // batch
        xb = lowrank_project(ops, x.reshape(batch, steps, x.shape[1]), b)
        return lowrank_expand(ops, y.reshape(batch, steps, y.shape[1]), xb, a, coef).reshape(y.shape)

    def _norm(self, ops: Kernels, p: dict[str, BackendArray], name: str, x: BackendArray, batch: int,
              perturbation: Any) -> tuple[BackendArray, BackendArray]:
        values = perturbation.vector(name) if perturbation is not None else None
        if values is None:
            return rmsnorm(ops, x, p[name])
        y, rstd = rmsnorm(ops, x, perturbation.ones(x.shape[1]))
        shape3 = (batch, x.shape[0] // batch, x.shape[1])
        out = member_affine(ops, y.reshape(shape3), values, perturbation.zeros(batch, x.shape[1]))
        return out.reshape(x.shape), rstd

    def _bias(self, ops: Kernels, p: dict[str, BackendArray], name: str, x: BackendArray, batch: int,
              perturbation: Any) -> BackendArray:
        values = perturbation.vector(name) if perturbation is not None else None
        if values is None:
            return add_bias(ops, x, p[name])
        shape3 = (batch, x.shape[0] // batch, x.shape[1])
        return member_affine(ops, x.reshape(shape3), perturbation.ones_members(batch, x.shape[1]),
                             values).reshape(x.shape)

    def _embed(self, ops: Kernels, p: dict[str, BackendArray], tokens: BackendArray,
               perturbation: Any) -> tuple[BackendArray, BackendArray]:
        batch, steps = tokens.shape
        flat_tokens = _flat_bytes(ops, tokens)
        x = embedding(ops, p["embed"], flat_tokens)
        noise = perturbation.matrix("embed") if perturbation is not None else None
        if noise is not None:
            a, b, coef = noise
            xb = lowrank_project_rows(ops, ops.to_device(np.ascontiguousarray(tokens, np.uint8)), a)
            x = lowrank_expand(ops, x.reshape(batch, steps, x.shape[1]), xb, b, coef).reshape(x.shape)
        return x, flat_tokens

    # ---- forward / backward --------------------------------------------------------------------
    def _layer(self, ops: Kernels, p: dict[str, BackendArray], layer: int, x: BackendArray, h0: BackendArray | None,
               batch: int, steps: int, perturbation: Any) -> tuple[BackendArray, BackendArray, dict[str, Any]]:
        """One block: (its output, its carried state, what its backward pass needs)."""
        cfg = self.cfg
        b = f"blocks.{layer}."
        n1, r1 = self._norm(ops, p, b + "gru_norm", x, batch, perturbation)
        u = self._linear(ops, p, b + "gru_hidden", n1, batch, perturbation)
        k = self._linear(ops, p, b + "gru_gate", n1, batch, perturbation)
        h = scan_forward(ops, k.reshape(batch, steps, cfg.dim_inner), u.reshape(batch, steps, cfg.dim_inner), h0)
        hf = h.reshape(batch * steps, cfg.dim_inner)
        o = self._linear(ops, p, b + "gru_out", hf, batch, perturbation) if cfg.proj_out else hf
        x1 = add(ops, x, o)
        n2, r2 = self._norm(ops, p, b + "ff_norm", x1, batch, perturbation)
        a = self._bias(ops, p, b + "ff_in_bias", self._linear(ops, p, b + "ff_in", n2, batch, perturbation),
                       batch, perturbation)
        ga = gelu(ops, a)
        f = self._bias(ops, p, b + "ff_out_bias", self._linear(ops, p, b + "ff_out", ga, batch, perturbation),
                       batch, perturbation)
        cache = dict(x=x, n1=n1, r1=r1, k=k, u=u, h=h, h0=h0, hf=hf, x1=x1, n2=n2, r2=r2, a=a, ga=ga)
        return add(ops, x1, f), last_step(ops, h), cache

    def forward(self, ops: Kernels, p: dict[str, BackendArray], tokens: BackendArray,
                states: list[BackendArray] | None = None, perturbation: Any = None, keep: bool = False,
                recompute: bool = False) -> tuple[BackendArray, list[BackendArray], dict[str, Any] | None]:
        """Logits (B*T, 256) for bytes `tokens` (B, T) from per-layer states (list of (B, dim_inner)
        or None for zero); returns (logits, new states, cache or None). With `keep`, the cache holds what
        `backward` needs: every layer's activations, or with `recompute` only each layer's input and state
        (backward rebuilds the rest, one layer at a time: gradient checkpointing)."""
        batch, steps = tokens.shape
        x, flat_tokens = self._embed(ops, p, tokens, perturbation)
        cache: dict[str, Any] = {"tokens": flat_tokens, "shape": (batch, steps), "layers": [], "recompute": recompute}
        new_states = []
        for layer in range(self.cfg.depth):
            h0 = None if states is None else states[layer]
            x_next, state, layer_cache = self._layer(ops, p, layer, x, h0, batch, steps, perturbation)
            new_states.append(state)
            if keep:
                cache["layers"].append(dict(x=x, h0=h0) if recompute else layer_cache)
            x = x_next
        nf, rf = self._norm(ops, p, "norm", x, batch, perturbation)
        logits = self._linear(ops, p, "head", nf, batch, perturbation)
        if keep:
            cache.update(x=x, nf=nf, rf=rf)
        return logits, new_states, (cache if keep else None)

    def backward(self, ops: Kernels, p: dict[str, BackendArray], cache: dict[str, Any],
                 dlogits: BackendArray) -> dict[str, BackendArray]:
        """Gradients (named, on the backend) of the loss whose logit gradient is `dlogits`; the
        incoming states are treated as constants (truncated BPTT)."""
        cfg = self.cfg
        batch, steps = cache["shape"]
        shape3 = (batch, steps, cfg.dim_inner)
        g: dict[str, BackendArray] = {}
        dnf, g["head"] = matmul_backward(ops, dlogits, cache["nf"], p["head"])
        dx, g["norm"] = rmsnorm_backward(ops, dnf, cache["x"], p["norm"], cache["rf"])
        for layer in range(cfg.depth - 1, -1, -1):
            b, c = f"blocks.{layer}.", cache["layers"][layer]
            if cache["recompute"]:  # the layer's activations from its input, as the forward made them
                c = self._layer(ops, p, layer, c["x"], c["h0"], batch, steps, None)[2]
            g[b + "ff_out_bias"] = column_sum(ops, dx)
            dga, g[b + "ff_out"] = matmul_backward(ops, dx, c["ga"], p[b + "ff_out"])
            da = gelu_backward(ops, dga, c["a"])
            g[b + "ff_in_bias"] = column_sum(ops, da)
            dn2, g[b + "ff_in"] = matmul_backward(ops, da, c["n2"], p[b + "ff_in"])
            dx1_norm, g[b + "ff_norm"] = rmsnorm_backward(ops, dn2, c["x1"], p[b + "ff_norm"], c["r2"])
            dx1 = add(ops, dx, dx1_norm)
            if cfg.proj_out:
                dhf, g[b + "gru_out"] = matmul_backward(ops, dx1, c["hf"], p[b + "gru_out"])
            else:
                dhf = dx1
            dk, du, _ = scan_backward(ops, dhf.reshape(shape3), c["k"].reshape(shape3), c["u"].reshape(shape3),
                                      c["h"], c["h0"])
            dn1_u, g[b + "gru_hidden"] = matmul_backward(ops, du.reshape(c["hf"].shape), c["n1"], p[b + "gru_hidden"])
            dn1_k, g[b + "gru_gate"] = matmul_backward(ops, dk.reshape(c["hf"].shape), c["n1"], p[b + "gru_gate"])
            dxn, g[b + "gru_norm"] = rmsnorm_backward(ops, add(ops, dn1_u, dn1_k), c["x"], p[b + "gru_norm"], c["r1"])
            dx = add(ops, dx1, dxn)
        g["embed"] = embedding_backward(ops, dx, cache["tokens"], VOCAB)
        return g

    def loss_and_grad(self, ops: Kernels, p: dict[str, BackendArray], inputs: BackendArray, targets: BackendArray,
                      states: list[BackendArray] | None = None,
                      recompute: bool = False) -> tuple[float, dict[str, BackendArray], list[BackendArray]]:
        """(mean loss in bits, named gradients, new states) for one chunk: inputs and targets (B, T) bytes,
        on the host or already on the backend."""
        logits, new_states, cache = self.forward(ops, p, inputs, states, keep=True, recompute=recompute)
        loss, dlogits = cross_entropy(ops, logits, _flat_bytes(ops, targets))
        grads = self.backward(ops, p, cast(dict[str, Any], cache), dlogits)  # keep=True: a cache
        if (ops.name, loss.size) not in self._ones:
            self._ones[ops.name, loss.size] = ops.to_device(np.ones(loss.size, np.float32))
        mean = weighted_row_sums(ops, loss.reshape(1, -1), self._ones[ops.name, loss.size], None, 1.0 / loss.size)
        return float(ops.to_host(mean)[0]), grads, new_states

    def step(self, ops: Kernels, p: dict[str, BackendArray], token: npt.ArrayLike,
             states: list[BackendArray] | None) -> tuple[BackendArray, list[BackendArray]]:
        """Generation: logits (B, 256) for bytes `token` (B,) and the states after them."""
        cfg = self.cfg
        x = embedding(ops, p["embed"], ops.to_device(np.ascontiguousarray(token, np.uint8)))
        new_states = []
        for layer in range(cfg.depth):
            b = f"blocks.{layer}."
            n1, _ = rmsnorm(ops, x, p[b + "gru_norm"])
            u = matmul(ops, n1, p[b + "gru_hidden"])
            k = matmul(ops, n1, p[b + "gru_gate"])
            h = scan_step(ops, k, u, None if states is None else states[layer])
            new_states.append(h)
            x = add(ops, x, matmul(ops, h, p[b + "gru_out"]) if cfg.proj_out else h)
            n2, _ = rmsnorm(ops, x, p[b + "ff_norm"])
            a = gelu(ops, add_bias(ops, matmul(ops, n2, p[b + "ff_in"]), p[b + "ff_in_bias"]))
            x = add(ops, x, add_bias(ops, matmul(ops, a, p[b + "ff_out"]), p[b + "ff_out_bias"]))
        nf, _ = rmsnorm(ops, x, p["norm"])
        return matmul(ops, nf, p["head"]), new_states
