"""`bin/train_es.py --model transformer`: d-eggs' integer transformer (models/egg_transformer.py)
trained by the same integer EGGROLL runs as the EGG (synchronous or coordinator, checkpoints,
resume), with d-eggs' noise and, by default, its AdamW update.

The defaults are a laptop-sized model; `--preset d-eggs` gives d-eggs' own configuration (PRESETS).
"""

import sys
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from eggnog.evolution.es_trainer import EsRunConfig
from eggnog.kernels.transformer.layout import NOISE_KINDS
from eggnog.runtime.errors import BadInput
from eggnog.training.run.config import flag, redefault

if TYPE_CHECKING:
    from eggnog.corpus.deggs_tokens import TokenCorpus
    from eggnog.corpus.reader import ByteCorpus
    from eggnog.models.egg import EggModel
    from eggnog.models.egg_transformer import TransformerConfig, TransformerModel

# d-eggs' config.h, as flags (applied before the user's own, which win)
PRESETS = {"d-eggs": ["--model", "transformer", "--depth", "4", "--dim", "256", "--head-dim", "64",
                      "--tokens-per-update", "64", "--vocab-size", "8192", "--population", "327680",
                      "--population-chunk", "40960", "--sigma-shift", "3", "--vector-sigma-shift", "4",
                      "--shift-attn", "8", "--shift-qkv", "6", "--shift-out", "9", "--shift-logit", "8",
                      "--shift-mlp-up", "8", "--shift-mlp-down", "10", "--optimizer", "adamw", "--lr", "0.125",
                      "--weight-decay", "0.01", "--lr-decay", "none", "--group-size", "2"],
           # the EGG main job's best hour on a 2-core CPU (docs/training.md, "The main job against its baselines")
           "cpu-hour": ["--model", "egg", "--population", "2048", "--group-size", "256", "--steps", "21192",
                        "--validate-every", "118"]}


def with_preset(argv: list[str], presets: dict[str, list[str]] = PRESETS) -> list[str]:
    """The command line with `--preset NAME` replaced by that preset's flags, placed first so that
    the user's own flags win (the last value of a flag is the one taken). The model argument of a
    command that has one stays first."""
    if "--preset" not in argv:
        return argv
    at = argv.index("--preset")
    name = argv[at + 1] if at + 1 < len(argv) else None
    if name not in presets:
        print(f"error: unknown --preset {name!r}: choose {', '.join(presets)}", file=sys.stderr, flush=True)
        raise SystemExit(2)
    rest = argv[:at] + argv[at + 2:]
    lead = rest[:1] if rest and not rest[0].startswith("-") else []
    return lead + presets[name] + rest[len(lead):]


@dataclass(frozen=True)
class TransformerEsRunConfig(EsRunConfig):
    run_name = "es-transformer"
    model_name = "transformer"

    depth: int = redefault(EsRunConfig, "depth", 1)
    dim: int = redefault(EsRunConfig, "dim", 32)
    tokens_per_update: int = flag(32, "Tokens each member reads per step (d-eggs' SEQ_LEN).", aliases=("seq_len",))
    # laptop size (docs/training.md, "What mattered at laptop size"): no weight decay (d-eggs' 0.01 shrinks every
    # weight to |w| ~ 3 when the votes are noise), a quarter of d-eggs' vector noise, twice its matrix
    # noise and learning rate, the rate falling to 0 over the run; --preset d-eggs sets its own
    steps: int = redefault(EsRunConfig, "steps", 4000)
    validate_every: int = redefault(EsRunConfig, "validate_every", 100)
    sigma_shift: int = redefault(EsRunConfig, "sigma_shift", 2)
    lr: float = redefault(EsRunConfig, "lr", 0.25)
    optimizer: str = redefault(EsRunConfig, "optimizer", "adamw")
    weight_decay: float = redefault(EsRunConfig, "weight_decay", 0.0)
    lr_decay: str = redefault(EsRunConfig, "lr_decay", "linear")
    head_dim: int = flag(16, "Width of one attention head (divides --dim, even).")
    vocab_size: int = flag(256, "Vocabulary: 256 for bytes; larger for token data.")
    vector_sigma_shift: int = flag(6, "Noise scale of vectors: (n1 n2) >> this (d-eggs' SIGMA_SHIFT_VECTOR: 4).")
    noise: str = flag("uniform", "Perturbation noise: uniform (integers on [-15, 15]) or gaussian (sum of three).")
    shift_attn: int = flag(8, "Attention scores >> this before the EXP_LUT.")
    shift_qkv: int = flag(4, "Q, K, V projections >> this.")
    shift_out: int = flag(6, "Attention output projection >> this.")
    shift_logit: int = flag(6, "Head >> this, then clipped to int8 logits.")
    shift_mlp_up: int = flag(6, "MLP up projection (+ bias) >> this, before the GELU table.")
    shift_mlp_down: int = flag(5, "MLP down projection >> this.")
    val_fraction: float = flag(0.05, "d-eggs data (a folder with input.bin and decoding.bin): the tail of the "
                                     "token stream used for validation.")

    def model(self) -> "TransformerConfig":
        from eggnog.models.egg_transformer import TransformerConfig

        return TransformerConfig(self.depth, self.dim, self.head_dim, self.vocab_size, self.shift_attn,
                                 self.shift_qkv, self.shift_out, self.shift_logit, self.shift_mlp_up,
                                 self.shift_mlp_down)

    def build_model(self) -> "TransformerModel":
        from eggnog.models.egg_transformer import TransformerModel

        return TransformerModel(self.model(), self.sigma_shift, self.vector_sigma_shift, self.noise,
                                self.tokens_per_update)

    def check(self, ranks: int = 1) -> None:
        if self.noise not in NOISE_KINDS:
            raise BadInput(f"unknown --noise {self.noise!r}: choose uniform or gaussian")
        if not 0 <= self.vector_sigma_shift <= 20:
            raise BadInput(f"--vector-sigma-shift must be in [0, 20], got {self.vector_sigma_shift}")
        if self.data is None and self.vocab_size < 256:
            raise BadInput(f"the embedded corpus is bytes: --vocab-size must be at least 256, got {self.vocab_size}")
        if self.adaptive_noise:
            raise BadInput("--adaptive-noise is built for the EGG only; the transformer runs without it")
        super().check(ranks)

    def member_bytes(self) -> int:
        """A member's int32 window and scores; its KV cache lives only while it is evaluated."""
        return 4 * (self.tokens_per_update + 1) + 16

    def memory_line(self, model: "EggModel | TransformerModel", members: int, free_bytes: int | None) -> str | None:
        """The evaluation's GPU memory per member and in all; BadInput where the kernel does not take the
        sizes or the rank cannot fit `free_bytes` (None: no GPU, nothing to check), naming how many
        members would (EsRunConfig.memory_line)."""
        from eggnog.kernels.transformer.epoch_cuda import MAX_DIM, MAX_VOCAB, ROWS

        steps = self.tokens_per_update
        per_member = model.evaluation_bytes(steps)
        line = (f"evaluation on a GPU: {per_member / 1024:.1f} KiB a member (noise rows and vectors; K and V stay in "
                f"shared memory), {members * per_member / 2**20:,.1f} MiB for the {members} members evaluated at once")
        if free_bytes is not None and (self.dim > MAX_DIM or steps > ROWS or self.vocab_size > MAX_VOCAB):
            raise BadInput(f"the GPU kernel takes --dim up to {MAX_DIM}, --tokens-per-update up to {ROWS} and "
                           f"--vocab-size up to {MAX_VOCAB}; got {self.dim}, {steps} and {self.vocab_size}")
        whole = super().memory_line(model, members, free_bytes)
        return line if whole is None else f"{line}; {whole}"

    def open_data(self, path: str) -> "ByteCorpus | TokenCorpus":
        """d-eggs' input.bin and decoding.bin (checked against --vocab-size), or a byte corpus."""
        from eggnog.corpus.deggs_tokens import deggs_paths, open_deggs

        if deggs_paths(path) is not None:
            return open_deggs(path, self.val_fraction, self.vocab_size)
        if self.vocab_size < 256:
            raise BadInput(f"byte data needs --vocab-size of at least 256, got {self.vocab_size}")
        return super().open_data(path)

    @property
    def unit(self) -> str:  # type: ignore[override]  # a class attribute on EsRunConfig
        return "bits/byte" if self.vocab_size == 256 else "bits/token"

    def summarize(self, summary: dict[str, Any]) -> str:
        return super().summarize(summary).replace("bits/byte", self.unit)

    def describe(self, trainer: Any) -> list[str]:
        cfg = self.model()
        share = (f"{self.population // self.population_chunk} chunks" if self.mode == "coordinator"
                 else f"{trainer.members} per rank")
        return [f"transformer {cfg.n_layer}x{cfg.dim}, {cfg.n_heads} heads of {cfg.head_dim}, vocabulary "
                f"{cfg.vocab}: {trainer.model.n_params:,} int8 parameters; population {self.population} ({share}), "
                f"{self.tokens_per_update} tokens per member per step", trainer.memory_line]
