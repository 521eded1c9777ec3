"""The messages of gossip over TCP: one body each, an int64 header [kind, exchange id, JSON bytes,
float64 count, float32 count], then a small JSON record (who sends, its configuration hash, its
fitness...), the float64 scalars and the float32 buffer of a model (training/gossip/merge.py's wire
form). Nothing is pickled. On the socket a body travels after its keyed tag
(runtime/auth.py), so a message without the token, corrupted or cut short is refused
before it is read."""

import json
from dataclasses import dataclass, field

import numpy as np

OFFER = 30  # an initiator's fitness: "meet me"
SEND_ME = 31  # the responder lost: the initiator is to send its model
MODEL = 32  # a winner's model (after an OFFER the responder won, or a SEND_ME)
KINDS = {OFFER: "offer", SEND_ME: "send-me", MODEL: "model"}
HEADER_FIELDS = 5
MAX_RECORD_BYTES = 4096  # a record is a few hundred bytes
EMPTY64, EMPTY32 = np.empty(0, np.float64), np.empty(0, np.float32)


class Malformed(ValueError):
    """A body whose size or fields do not agree with its header."""


@dataclass
class Message:
    kind: int
    exchange: int
    info: dict
    scalars: np.ndarray = field(default_factory=lambda: EMPTY64)
    buffer: np.ndarray = field(default_factory=lambda: EMPTY32)
    size: int = 0  # bytes of the body


def encode(kind, exchange, info, scalars=EMPTY64, buffer=EMPTY32):
    meta = json.dumps(info).encode()
    scalars = np.ascontiguousarray(scalars, np.float64)
    buffer = np.ascontiguousarray(buffer, np.float32)
    head = np.array([kind, exchange, len(meta), scalars.size, buffer.size], np.int64)
    return b"".join([head.tobytes(), meta, scalars.tobytes(), buffer.tobytes()])


def decode(body):
    body = memoryview(body)
    if len(body) < 8 * HEADER_FIELDS:
        raise Malformed(f"a message of {len(body)} bytes is shorter than its header")
    kind, exchange, n_meta, n64, n32 = (int(v) for v in np.frombuffer(body[:8 * HEADER_FIELDS], np.int64))
    if kind not in KINDS:
        raise Malformed(f"unknown message kind {kind}")
    if not 0 <= n_meta <= MAX_RECORD_BYTES:
        raise Malformed(f"{article(kind)} message whose record is {n_meta} bytes, not 0..{MAX_RECORD_BYTES}")
    if min(n64, n32) < 0 or len(body) != 8 * HEADER_FIELDS + n_meta + 8 * n64 + 4 * n32:
        raise Malformed(f"{article(kind)} message of {len(body)} bytes, not the size its header gives "
                        "(cut short or padded)")
    start = 8 * HEADER_FIELDS
    try:
        info = json.loads(bytes(body[start:start + n_meta]).decode(), parse_constant=_no_constant)
    except (UnicodeDecodeError, ValueError, RecursionError):
        raise Malformed(f"{article(kind)} message whose record is not JSON") from None
    if not isinstance(info, dict):
        raise Malformed(f"{article(kind)} message whose record is not a JSON object")
    start += n_meta
    scalars = np.frombuffer(body[start:start + 8 * n64], np.float64)
    buffer = np.frombuffer(body[start + 8 * n64:], np.float32)
    return Message(kind, exchange, info, scalars, buffer, len(body))


def article(kind):
    return f"{'an' if kind == OFFER else 'a'} {KINDS[kind]}"


def _no_constant(name):
    raise ValueError(f"{name} is not JSON")


def max_body_bytes(values, scalars):
    """The largest legal body of a run whose models are `values` float32 and `scalars` float64 (with
    the optimiser state): the bound set on every gossip socket."""
    return 8 * HEADER_FIELDS + MAX_RECORD_BYTES + 8 * scalars + 4 * values
