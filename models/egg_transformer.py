"""d-eggs' integer-only transformer: its configuration, parameter layout and initialisation. The
forward over a population is the op `transformer_epoch` (kernels/transformer/epoch.py).

Per token:  x = clip(E[t] + e_bias)
            x = MLP_init(x)                                        (the block below, its own weights)
            n_layer x [ x = norm(x + Wo . attention(rope(norm(q)), rope(norm(k)), norm(v)))
                        x = MLP(x) ]
            logits = clip((E . LN_f(x)) >> shift_logit)            (head tied to the embedding)
MLP(x) = norm(x + ((Wdown . GELU(clip((Wup . LN(x) + b_up) >> shift_up))) >> shift_down) + b_down)

Parameters: V*D + D, then 8*D^2 + 7*D for the init MLP, 12*D^2 + 9*D a layer and 2*D for LN_f: with
d-eggs' sizes (V 8192, D 256, 4 layers) 5,778,944.
"""

from dataclasses import dataclass
from typing import Any

import numpy as np

from eggnog.kernels.core.placement import BackendArray, Kernels
from eggnog.kernels.noise.reference import uniform_int8
from eggnog.kernels.noise.scalar_math import stream_key
from eggnog.kernels.transformer.epoch import transformer_epoch
from eggnog.kernels.transformer.layout import NOISE_KINDS, make_spec, transformer_layout
from eggnog.models.egg import IntTensorModel
from eggnog.runtime.errors import BadInput

INIT_TENSOR_BASE = 1 << 31  # tensor ids of the initialisation noise, apart from training noise
LN_ONE = 16  # 1.0 in fixed point: LN weights start here
INIT_RANGE = 15  # matrices and the embedding start uniform on [-15, 15], d-eggs' host draw
SHIFTS = ("shift_attn", "shift_qkv", "shift_out", "shift_logit", "shift_mlp_up", "shift_mlp_down")


@dataclass(frozen=True)
class TransformerConfig:
    n_layer: int = 4
    dim: int = 256
    head_dim: int = 64
    vocab: int = 256
    shift_attn: int = 8  # d-eggs' config.h: the shifts after each product
    shift_qkv: int = 6
    shift_out: int = 9
    shift_logit: int = 8
    shift_mlp_up: int = 8
    shift_mlp_down: int = 10

    def __post_init__(self) -> None:
        if self.n_layer < 1 or self.dim < 2 or self.head_dim < 2 or self.vocab < 2:
            raise BadInput("the transformer needs --depth >= 1, --dim >= 2, --head-dim >= 2 and a vocabulary "
                           f"of at least 2, got {self.n_layer}, {self.dim}, {self.head_dim} and {self.vocab}")
        if self.dim % self.head_dim or self.head_dim % 2:
            raise BadInput(f"--head-dim {self.head_dim} must be even and divide --dim {self.dim}")
        if not all(0 <= getattr(self, name) <= 30 for name in SHIFTS):
            raise BadInput("every --shift-* must be in [0, 30]")

    @property
    def n_heads(self) -> int:
        return self.dim // self.head_dim

    def shifts(self) -> np.ndarray:
        return np.array([getattr(self, name) for name in SHIFTS], np.int64)


class TransformerModel(IntTensorModel):
    state_dims = (0, 0)  # members carry nothing across steps: the KV cache lives for one window
    token_dtype = np.int32
    lr_scale: dict[str, float] = {"embedding_bias": 0.1}  # d-eggs
    has_proxy_loss = True  # d-eggs' own loss, reported beside bits

    def __init__(self, cfg: TransformerConfig, sigma_shift: int = 3, vector_shift: int = 4, noise: str = "uniform",
                 context: int | None = None) -> None:
        """context: the window it trains on; validation and generation read at most that many tokens
        into one KV cache (positions past it were never trained). None: no limit."""
        self.cfg = cfg
        self.context = context
        self.layout = transformer_layout(cfg)
        super().__init__(self.layout)
        self.noise_kind = NOISE_KINDS[noise]
        self.spec = make_spec(cfg, sigma_shift, vector_shift, noise)

    def init_params(self, seed: int) -> np.ndarray:
        """Matrices and the embedding uniform on [-15, 15] from the noise hash, LN weights 16, biases 0."""
        flat = np.zeros(self.n_params, dtype=np.int8)
        for t in self.tensors:
            if t.kind != "vector":
                key = stream_key(seed, INIT_TENSOR_BASE + t.tensor_id, 0, 0)
                flat[t.offset:t.offset + t.size] = uniform_int8(key, 0, t.size, INIT_RANGE)
            elif t.name.endswith(".weight"):
                flat[t.offset:t.offset + t.size] = LN_ONE
        return flat

    def evaluation_bytes(self, steps: int) -> int:
        """Device bytes one member takes while its window runs on a GPU (KV cache, noise, activations)."""
        from eggnog.kernels.transformer.epoch_cuda import scratch_bytes

        return scratch_bytes(self.spec, steps)

    def kept_bytes(self, members: int) -> int:
        """Device bytes the epoch keeps between calls: none (its scratch is allocated per launch)."""
        return 0

    def launch_bytes(self, steps: int) -> int:
        """Device bytes an evaluation takes once: the padded int32 copy of the weights its launch makes."""
        from eggnog.kernels.transformer.epoch_cuda import Plan

        return 4 * Plan(self.spec, steps).w_words

    def population_scores(self, ops: Kernels, params: BackendArray, windows: BackendArray, states: BackendArray,
                          prefix_ids: BackendArray, first_member: int, cfg: Any, perturbed: bool,
                          gains: BackendArray | None) -> BackendArray:
        """Each member's summed (log-likelihood, d-eggs proxy loss) over its window
        (kernels/transformer/epoch.py)."""
        return transformer_epoch(ops, params, windows, prefix_ids, first_member, self.spec, perturbed)

    def architecture(self) -> dict[str, Any]:
        """Per-tensor table and resolved configuration, for print_arch."""
        cfg = self.cfg
        return {
            "model": "transformer",
            "config": {"depth": cfg.n_layer, "dim": cfg.dim, "head_dim": cfg.head_dim, "heads": cfg.n_heads,
                       "vocab": cfg.vocab, **dict(zip(SHIFTS, cfg.shifts().tolist()))},
            "total_params": self.n_params,
            "tensors": [{"name": name, "shape": list(shape), "kind": kind, "params": int(np.prod(shape))}
                        for name, shape, kind, _ in self.layout],
        }
