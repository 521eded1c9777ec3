"""How documents become splits: document order, the validation choice, separators."""

from dataclasses import dataclass, field

import numpy as np

from eggnog.kernels.noise.reference import bits
from eggnog.kernels.noise.scalar_math import stream_key
from eggnog.runtime.errors import BadInput

SPLITS = ("train", "val")
READ_BLOCK = 1 << 22


@dataclass(frozen=True)
class Piece:
    path: str
    offset: int
    length: int


@dataclass
class SplitPlan:
    pieces: list = field(default_factory=list)
    separator: int | None = 0

    @property
    def size(self):
        gaps = max(len(self.pieces) - 1, 0) if self.separator is not None else 0
        return sum(p.length for p in self.pieces) + gaps

    def blocks(self):
        """The split's bytes in blocks: documents joined by the separator byte."""
        for i, piece in enumerate(self.pieces):
            if i and self.separator is not None:
                yield bytes([self.separator])
            try:
                f = open(piece.path, "rb")
            except OSError as e:
                raise BadInput(f"cannot read source file {piece.path!r}: {e.strerror}") from None
            with f:
                f.seek(piece.offset)
                left = piece.length
                while left:
                    block = f.read(min(READ_BLOCK, left))
                    if not block:
                        raise BadInput(f"source file {piece.path!r} shrank while it was being read")
                    left -= len(block)
                    yield block


MIN_SPLIT_BYTES = 101  # one training window of the default EGG run: --tokens-per-update 100 and its target


def checked(train, val, min_split):
    """The two plans, refused when a split is shorter than `min_split` bytes (an empty validation
    split is allowed: --val-fraction 0)."""
    for name, plan in (("training", train), ("validation", val)):
        if (plan.pieces or name == "training") and plan.size < min_split:
            raise BadInput(f"the {name} split would hold {plan.size} bytes, shorter than one window "
                           f"({min_split} bytes): give more text or change --val-fraction")
    return train, val


def plan_splits(files, sizes, val_fraction, seed, separator, min_split=1):
    """Assign whole documents to the validation split, in an order fixed by (seed, document index),
    until it holds val_fraction of the bytes; train keeps at least one document. A single document
    is split by bytes instead: its last val_fraction forms the validation split."""
    if not 0.0 <= val_fraction < 1.0:
        raise BadInput(f"--val-fraction must be in [0, 1), got {val_fraction}")
    total = sum(sizes)
    if total == 0:
        raise BadInput("the sources contain no bytes")
    train, val = SplitPlan(separator=separator), SplitPlan(separator=separator)
    if val_fraction == 0.0:
        train.pieces = [Piece(str(f), 0, s) for f, s in zip(files, sizes)]
        return checked(train, val, min_split)
    if len(files) == 1:
        n_val = max(1, int(round(total * val_fraction)))
        if n_val >= total:
            raise BadInput(f"the single source of {total} bytes is too small for a validation split")
        return checked(SplitPlan([Piece(str(files[0]), 0, total - n_val)], separator),
                       SplitPlan([Piece(str(files[0]), total - n_val, n_val)], separator), min_split)
    order = np.argsort(bits(stream_key(seed, 0, 0, 0), 0, len(files)), kind="stable")
    chosen, val_bytes = set(), 0
    for index in order[:-1]:
        if val_bytes >= val_fraction * total:
            break
        chosen.add(int(index))
        val_bytes += sizes[index]
    for i, (f, s) in enumerate(zip(files, sizes)):
        (val if i in chosen else train).pieces.append(Piece(str(f), 0, s))
    return checked(train, val, min_split)
