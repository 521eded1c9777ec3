"""EGG: nano-egg's integer minGRU language model over one flat int8 parameter buffer.

    x = Emb[t]
    for each block:  x = clip(x + GRU(L1(x), state))      (state := GRU output)
                     x = clip(x + down(up(L1(x))))          (D -> 4D -> D, no activation)
    logits = head(L1(x))                                    (int8[256])

GRU (no activations: the int8 clips are the non-linearity):
    f  = clip(x@Wf + s@Uf + bf);  fh = ((f + 127) * s) >> 8
    hh = clip(x@Wh + fh@Uh + bh); h  = s + (((f + 127) * (hh - s)) >> 8)

Every matrix product is the scaled int8 matmul `int_matmul`; parameters count
513*D + n_layer*(4*D + 12*D^2). With `noise` given, each member sees its own EGGROLL perturbation.
"""

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from eggnog.kernels.core.placement import BackendArray, Kernels
from eggnog.kernels.egg.epoch import egg_epoch, per_op_byte
from eggnog.kernels.egg.int_matmul import int_matmul
from eggnog.kernels.egg.layout import VOCAB, egg_layout
from eggnog.kernels.egg.member_ops import (
    egg_embedding,
    egg_vector,
)
from eggnog.kernels.noise.reference import gaussian_int8
from eggnog.kernels.noise.scalar_math import EGG_NOISE, prefix_key, stream_key
from eggnog.runtime.errors import BadInput

INIT_TENSOR_BASE = 1 << 31  # tensor ids of the initialisation noise, apart from training noise
LN_ONE = 16  # 1.0 in fixed point


@dataclass(frozen=True)
class EggConfig:
    n_layer: int = 6
    n_embd: int = 256

    def __post_init__(self) -> None:
        if self.n_layer < 1 or self.n_embd < 1:
            raise BadInput(f"EGG needs n_layer >= 1 and n_embd >= 1, got {self.n_layer} and {self.n_embd}")


@dataclass(frozen=True)
class Tensor:
    name: str
    shape: tuple[int, ...]
    kind: str  # "matrix", "embedding" or "vector"
    tensor_id: int
    offset: int

    @property
    def size(self) -> int:
        return int(np.prod(self.shape))


class IntTensorModel:
    """An integer model over one flat int8 buffer of named tensors (`layout`: (name, shape, kind,
    offset) in tensor-id order), trained by integer EGGROLL (evolution/eggroll.py). A subclass gives
    `noise_kind` (scalar_math.member_noise), `token_dtype` of its windows, `lr_scale` (per tensor name,
    AdamW's learning-rate factor), `state_dims` (the (layers, width) of the hidden state a member
    carries across steps; (0, 0) for none), `has_proxy_loss` and `population_scores` (each member's
    summed log-likelihood; with a proxy loss, (members, 2) with the proxy's sum in column 1)."""

    noise_kind: int
    token_dtype: type[np.integer]
    lr_scale: dict[str, float]
    has_proxy_loss: bool
    population_scores: Callable[..., BackendArray]

    def __init__(self, layout: Sequence[tuple[str, tuple[int, ...], str, int]]) -> None:
        self.tensors = [Tensor(name, shape, kind, tensor_id, offset)
                        for tensor_id, (name, shape, kind, offset) in enumerate(layout)]
        self.by_name = {t.name: t for t in self.tensors}
        self.n_params = sum(t.size for t in self.tensors)

    def views(self, flat: BackendArray) -> dict[str, BackendArray]:
        """Named views of a flat buffer (host or device array)."""
        return {t.name: flat[t.offset:t.offset + t.size].reshape(t.shape) for t in self.tensors}

    def prefixes(self, seed: int, noise_epoch: int) -> dict[str, int]:
        return {t.name: prefix_key(seed, t.tensor_id, noise_epoch) for t in self.tensors}


class EggModel(IntTensorModel):
    noise_kind = EGG_NOISE
    token_dtype = np.uint8
    lr_scale: dict[str, float] = {}
    has_proxy_loss = False

    def __init__(self, cfg: EggConfig) -> None:
        self.cfg = cfg
        super().__init__(egg_layout(cfg.n_layer, cfg.n_embd))

    @property
    def state_dims(self) -> tuple[int, int]:
        return self.cfg.n_layer, self.cfg.n_embd

    def evaluation_bytes(self, steps: int) -> int:
        """Device bytes one member takes while its window of `steps` bytes runs on a GPU, besides the
        window and its states (noise rows, perturbed vectors, its score)."""
        from eggnog.kernels.egg.epoch import device_bytes_per_member

        return device_bytes_per_member(self.cfg.n_layer, self.cfg.n_embd, steps)

    def kept_bytes(self, members: int) -> int:
        """Device bytes the epoch keeps between calls for `members` members (its scratch), part of
        `evaluation_bytes`."""
        from eggnog.kernels.egg.epoch import kept_bytes_per_member

        return members * kept_bytes_per_member(self.cfg.n_layer, self.cfg.n_embd)

    def launch_bytes(self, steps: int) -> int:
        """Device bytes an evaluation takes once, whatever its members: the kernel's small tables."""
        return 0

    def population_scores(self, ops: Kernels, params: BackendArray, windows: BackendArray, states: BackendArray,
                          prefix_ids: BackendArray, first_member: int, cfg: Any, perturbed: bool,
                          gains: BackendArray | None) -> BackendArray:
        """Each member's summed log-likelihood over its window (kernels/egg/epoch.py); `cfg`: the
        strategy's (IntEggrollConfig)."""
        return egg_epoch(ops, params, windows, states, prefix_ids, first_member, cfg.sigma_shift, perturbed, gains)

    def init_params(self, seed: int) -> np.ndarray:
        """Matrices ~ round(16 * N(0,1)) from the noise hash, L1-norm weights 16, biases 0."""
        flat = np.zeros(self.n_params, dtype=np.int8)
        for t in self.tensors:
            view = flat[t.offset:t.offset + t.size]
            if t.kind != "vector":
                view[:] = gaussian_int8(stream_key(seed, INIT_TENSOR_BASE + t.tensor_id, 0, 0), 0, t.size)
            elif t.name.rsplit(".", 1)[-1].startswith("ln"):
                view[:] = LN_ONE
        return flat

    def member_vectors(self, ops: Kernels, params: dict[str, BackendArray], prefixes: dict[str, int], first_member: int,
                       count: int, sigma_shift: int, perturbed: bool) -> dict[str, BackendArray]:
        """Each member's (perturbed) copy of every vector parameter: constant over an epoch."""
        return {t.name: egg_vector(ops, params[t.name], prefixes[t.name], first_member, count, sigma_shift, perturbed)
                for t in self.tensors if t.kind == "vector"}

    def step(self, ops: Kernels, params: dict[str, BackendArray], vectors: dict[str, BackendArray],
             tokens: BackendArray, states: list[BackendArray], prefixes: dict[str, int], first_member: int,
             sigma_shift: int, perturbed: bool) -> BackendArray:
        """One byte for every member: returns int8 logits (members, 256); `states` (one (members, D)
        array per layer) are replaced by the new hidden states."""
        names = {t.tensor_id: t.name for t in self.tensors}

        def mm(x: BackendArray, tid: int) -> BackendArray:
            name = names[tid]
            return int_matmul(ops, x, params[name], prefixes[name], first_member, sigma_shift, perturbed)

        def embed(tokens: BackendArray) -> BackendArray:
            return egg_embedding(ops, tokens, params["embedding"], prefixes["embedding"], first_member, sigma_shift,
                                 perturbed)

        return per_op_byte(ops, tokens, states, embed, mm, lambda tid: vectors[names[tid]])

    def architecture(self) -> dict[str, Any]:
        """Per-tensor table and resolved configuration, for print_arch."""
        return {
            "model": "egg",
            "config": {"depth": self.cfg.n_layer, "dim": self.cfg.n_embd, "vocab": VOCAB, "n_layer": self.cfg.n_layer,
                       "n_embd": self.cfg.n_embd},
            "total_params": self.n_params,
            "tensors": [{"name": t.name, "shape": list(t.shape), "kind": t.kind, "params": t.size}
                        for t in self.tensors],
        }
