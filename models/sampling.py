"""Sampling the next byte from logits: temperature, min-p, presence penalty, top-k, top-p.

Logits are in natural-log units here; EGG's int8 logits are log2 units x 16 (`egg_logits_to_nats`).
"""

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from eggnog.runtime.errors import BadInput


def egg_logits_to_nats(logits: npt.ArrayLike) -> npt.NDArray[np.float64]:
    return np.asarray(logits, dtype=np.float64) * (math.log(2.0) / 16.0)


@dataclass(frozen=True)
class Sampler:
    temperature: float = 1.0
    min_p: float = 0.03
    presence_penalty: float = 0.2
    top_k: int = 0
    top_p: float = 1.0

    def check(self) -> None:
        if self.temperature < 0 or not 0 <= self.min_p <= 1 or not 0 < self.top_p <= 1 or self.top_k < 0:
            raise BadInput("need temperature >= 0, 0 <= min-p <= 1, 0 < top-p <= 1 and top-k >= 0")

    def probabilities(self, logits: npt.ArrayLike, seen: npt.NDArray[np.bool_]) -> npt.NDArray[np.float64]:
        """Next-byte distribution from natural-log logits; `seen` marks bytes already produced."""
        scores = np.array(logits, dtype=np.float64)
        scores[seen] -= self.presence_penalty
        if self.temperature == 0:
            p = np.zeros_like(scores)
            p[int(np.argmax(scores))] = 1.0
            return p
        scores = scores / self.temperature
        p = np.exp(scores - scores.max())
        p /= p.sum()
        keep = p >= self.min_p * p.max()
        if self.top_k:
            keep &= p >= np.sort(p)[-self.top_k]
        if self.top_p < 1:
            order = np.argsort(-p)
            before = np.cumsum(p[order]) - p[order]
            nucleus = np.zeros_like(keep)
            nucleus[order[before < self.top_p]] = True
            keep &= nucleus
        p = np.where(keep, p, 0.0)
        return p / p.sum()

    def sample(self, logits: np.ndarray | Sequence[float], seen: npt.NDArray[np.bool_],
               rng: np.random.Generator) -> int:
        return int(rng.choice(len(logits), p=self.probabilities(logits, seen)))


def escape_byte(b: int) -> str:
    """Printable ASCII, newline and tab as they are; every other byte as \\xNN."""
    if 32 <= b < 127 or b in (9, 10):
        return chr(b)
    return f"\\x{b:02x}"


def degenerate(tokens: Sequence[int] | np.ndarray, longest_unit: int = 4) -> tuple[int, ...] | None:
    """The unit (1 to `longest_unit` tokens) a sample of at least 8 tokens ends repeating over at least
    its last half (e.g. "YT" then spaces), or None: such a sample is worth a note."""
    n = len(tokens)
    if n < 8:
        return None
    tail = list(tokens[n - n // 2:])
    for size in range(1, longest_unit + 1):
        unit = tail[-size:]
        if all(token == unit[(i - len(tail)) % size] for i, token in enumerate(tail)):
            return tuple(unit)
    return None
