"""d-eggs' own data files, for the transformer: a directory (or its `input.bin`) holding

    input.bin     the token stream: uint8 when the vocabulary is 256, else little-endian uint32
    decoding.bin  little-endian u32 vocabulary size, then per token a u32 length and its bytes

The tail `val_fraction` of the stream is the validation split. Tokens are memory-mapped, never copied.
"""

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from eggnog.runtime.errors import BadInput

INPUT, DECODING = "input.bin", "decoding.bin"
BYTE_VOCAB = 256


def deggs_paths(path):
    """(input.bin, decoding.bin) when `path` is a d-eggs data directory or its input.bin, else None."""
    path = Path(path)
    folder = path if path.is_dir() else path.parent if path.name == INPUT else None
    if folder is None or not (folder / INPUT).exists():
        return None
    return folder / INPUT, folder / DECODING


def read_decoding(path):
    """The bytes of every token, from decoding.bin."""
    try:
        raw = Path(path).read_bytes()
    except OSError as e:
        raise BadInput(f"cannot read {str(path)!r}: {e.strerror}") from None
    if len(raw) < 4:
        raise BadInput(f"{str(path)!r} is too short to hold a vocabulary size")
    vocab, at, tokens = int.from_bytes(raw[:4], "little"), 4, []
    for token in range(vocab):
        if at + 4 > len(raw):
            raise BadInput(f"{str(path)!r} ends inside token {token} of {vocab}")
        length = int.from_bytes(raw[at:at + 4], "little")
        tokens.append(raw[at + 4:at + 4 + length])
        at += 4 + length
        if at > len(raw):
            raise BadInput(f"{str(path)!r} ends inside token {token} of {vocab}")
    return tokens


@dataclass
class TokenCorpus:
    path: str
    train: np.ndarray
    val: np.ndarray
    decoding: list
    meta: dict = field(default_factory=dict)  # no byte baselines: the header prints none

    @property
    def vocab(self):
        return len(self.decoding)

    def decode(self, tokens):
        return b"".join(self.decoding[int(t)] for t in tokens)


def open_deggs(path, val_fraction, vocab_size):
    """The token corpus at `path`, checked against the model's vocabulary."""
    found = deggs_paths(path)
    if found is None:
        raise BadInput(f"{str(path)!r} is not a d-eggs data directory (no {INPUT})")
    input_path, decoding_path = found
    if not decoding_path.exists():
        raise BadInput(f"{str(input_path)!r} has no {DECODING} beside it")
    decoding = read_decoding(decoding_path)
    if len(decoding) != vocab_size:
        raise BadInput(f"{str(decoding_path)!r} has {len(decoding)} tokens but --vocab-size is {vocab_size}")
    dtype = np.dtype(np.uint8) if vocab_size == BYTE_VOCAB else np.dtype("<u4")
    size = input_path.stat().st_size
    if size % dtype.itemsize or size == 0:
        raise BadInput(f"{str(input_path)!r} holds {size} bytes: not a whole number of {dtype.itemsize}-byte tokens")
    tokens = np.memmap(input_path, dtype=dtype, mode="r")
    if int(tokens.max()) >= vocab_size:
        raise BadInput(f"{str(input_path)!r} holds token {int(tokens.max())}, outside a vocabulary of {vocab_size}")
    if not 0 < val_fraction < 1:
        raise BadInput(f"--val-fraction must be in (0, 1), got {val_fraction}")
    cut = len(tokens) - int(len(tokens) * val_fraction)
    return TokenCorpus(str(input_path.parent), tokens[:cut], tokens[cut:], decoding)
