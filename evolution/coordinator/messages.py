"""One parser per message kind of the coordinator's protocol (wire.py), both directions: each checks every
field (header size, kind, ranges, payload size, ternary codes, finiteness) against the run's shape and
returns the fields, or raises wire.Malformed with one sentence. Nothing else a message can do raises."""

import json
from dataclasses import dataclass

import numpy as np

from eggnog.evolution.coordinator import wire
from eggnog.evolution.eggroll import state_layout

TERNARY_CODES = 3 ** 5  # a packed byte holds 5 trits: 0..242
MAX_SIGNAL = 64  # stop signals a worker may report (0: none)
NAME_BYTES = 64  # worker names and code versions
HASH_CHARS = 64  # a SHA-256 hex digest
# A log-likelihood sum is in 1/16-bit units: no token costs more than 256 bits in any model of ours.
LOGLIK_PER_TOKEN = 16 * 256
REASON_BYTES = 2000
SLACK_BYTES = 4096  # the tag frame and JSON of a message beside its largest body


@dataclass(frozen=True)
class RunShape:
    """What the run's messages must look like: sizes from the configuration and model."""
    steps: int
    population: int
    chunk: int
    state_bytes: int  # one chunk's member states
    member_tokens: int  # tokens one chunk evaluates
    val_tokens: int  # tokens one validation sums over
    layout: tuple  # (name, dtype, length) of a snapshot's arrays, parameters first

    @property
    def n_chunks(self):
        return self.population // self.chunk

    @property
    def packed_per_chunk(self):
        return -(-(self.chunk // 2) // 5)

    @property
    def row_bytes(self):
        return -(-(self.population // 2) // 5)

    @property
    def snapshot_bytes(self):
        return sum(n * np.dtype(dtype).itemsize for _, dtype, n in self.layout)

    def max_message_bytes(self):
        """The largest legal message of a working connection (either direction; WELCOME travels on the
        admission connection), with room for the tag frame and the JSON of READY."""
        return max(8 * 6 + self.packed_per_chunk + self.state_bytes, 8 * 4 + self.snapshot_bytes,
                   8 * 3 + self.state_bytes, 8 * 2 + self.row_bytes) + SLACK_BYTES


def run_shape(cfg, model):
    layers, width = model.state_dims
    layout = (("params", np.int8, model.n_params), *state_layout(cfg, model))
    return RunShape(steps=cfg.steps, population=cfg.population, chunk=cfg.population_chunk,
                    state_bytes=cfg.population_chunk * layers * width,
                    member_tokens=cfg.population_chunk * cfg.tokens_per_update,
                    val_tokens=cfg.val_rows * cfg.val_tokens, layout=tuple(layout))


# ---- shared checks -----------------------------------------------------------------------------
def fields(message, kind, n, payload=0, name=None):
    """The n header fields of a `kind` message whose payload must be `payload` bytes (None: any)."""
    message = np.asarray(message)
    if message.dtype != np.uint8 or message.ndim != 1:
        raise wire.Malformed("a message that is not a byte string")
    head = wire.header(message, n)
    if head[0] != kind:
        raise wire.Malformed(f"a message of kind {head[0]} where {name or kind} was expected")
    if payload is not None and message.size != 8 * n + payload:
        raise wire.Malformed(f"a {name or kind} message of {message.size} bytes, not {8 * n + payload}")
    return head


def within(name, value, low, high):
    if not low <= value <= high:
        raise wire.Malformed(f"{name} {value} outside [{low}, {high}]")
    return value


def ternary(packed, what):
    if packed.size and int(packed.max()) >= TERNARY_CODES:
        raise wire.Malformed(f"{what} holds a byte {int(packed.max())}, not a ternary code (0..242)")
    return packed


def json_payload(message, n, what, limit):
    body = wire.payload(message, n)
    if body.size > limit:
        raise wire.Malformed(f"a {what} of {body.size} bytes (at most {limit})")
    try:
        value = json.loads(bytes(body).decode())
    except (UnicodeDecodeError, ValueError):
        raise wire.Malformed(f"an unreadable {what}") from None
    if not isinstance(value, dict):
        raise wire.Malformed(f"a {what} that is not a JSON object")
    return value


def text_field(said, key, what, limit=NAME_BYTES):
    value = said.get(key)
    if not isinstance(value, str) or not 0 < len(value) <= limit or not value.isprintable():
        raise wire.Malformed(f"a {what} whose {key!r} is not a short printable string")
    return value


def snapshot_body(shape, body, what):
    """The snapshot bytes, checked: its size, and every float array finite."""
    if body.size != shape.snapshot_bytes:
        raise wire.Malformed(f"a {what} of {body.size} bytes where this model's takes {shape.snapshot_bytes}")
    at = 0
    for name, dtype, n in shape.layout:
        size = n * np.dtype(dtype).itemsize
        if np.dtype(dtype).kind == "f" and not np.isfinite(body[at:at + size].view(dtype)).all():
            raise wire.Malformed(f"a {what} whose {name} is not finite")
        at += size
    return body


# ---- worker -> coordinator ---------------------------------------------------------------------
def parse_hello(message):
    """(name, version)."""
    fields(message, wire.HELLO, 1, None, "HELLO")
    said = json_payload(message, 1, "HELLO", 4 * NAME_BYTES)
    return text_field(said, "worker", "HELLO"), text_field(said, "version", "HELLO")


def parse_ready(message):
    """(name, version, config hash)."""
    fields(message, wire.READY, 1, None, "READY")
    said = json_payload(message, 1, "READY", 8 * NAME_BYTES)
    digest = text_field(said, "config_hash", "READY", HASH_CHARS)
    if len(digest) != HASH_CHARS or any(c not in "0123456789abcdef" for c in digest):
        raise wire.Malformed("a READY whose config_hash is not a SHA-256 hex digest")
    return text_field(said, "worker", "READY"), text_field(said, "version", "READY"), digest


def parse_heartbeat(message):
    """The beating worker's routing id (bytes)."""
    fields(message, wire.HEARTBEAT, 1, None, "HEARTBEAT")
    name = bytes(wire.payload(message, 1))
    if not 0 < len(name) <= NAME_BYTES:
        raise wire.Malformed(f"a HEARTBEAT naming a worker id of {len(name)} bytes")
    return name


def parse_leave(message):
    fields(message, wire.LEAVE, 1, 0, "LEAVE")


def parse_request(message, shape):
    """(worker step, stop signal)."""
    _, step, signum = fields(message, wire.REQUEST, 3, 0, "REQUEST")
    return within("a REQUEST's step", step, 0, shape.steps), within("a REQUEST's signal", signum, 0, MAX_SIGNAL)


@dataclass(frozen=True)
class Result:
    step: int
    chunk: int
    loglik: int
    proxy: int
    packed: np.ndarray
    states: np.ndarray  # uint8 bytes of the chunk's states


def parse_result(message, shape):
    _, step, chunk, loglik, proxy, n_packed = fields(message, wire.RESULT, 6, None, "RESULT")
    within("a RESULT's step", step, 0, shape.steps - 1)
    within("a RESULT's chunk", chunk, 0, shape.n_chunks - 1)
    limit = LOGLIK_PER_TOKEN * shape.member_tokens
    within("a RESULT's log-likelihood sum", loglik, -limit, limit)
    within("a RESULT's proxy sum", proxy, -limit, limit)
    within("a RESULT's packed size", n_packed, shape.packed_per_chunk, shape.packed_per_chunk)
    body = wire.payload(message, 6)
    if body.size != n_packed + shape.state_bytes:
        raise wire.Malformed(f"a RESULT for chunk {chunk} with {body.size} payload bytes, not "
                             f"{n_packed + shape.state_bytes}")
    packed = ternary(body[:n_packed], "a RESULT's packed fitness")
    tail = shape.chunk // 2 % 5
    if tail and int(packed[-1]) >= 3 ** tail:
        raise wire.Malformed("a RESULT's last packed byte holds more pairs than the chunk has")
    return Result(step, chunk, loglik, proxy, packed, body[n_packed:])


def parse_snapshot_result(message, shape):
    """(step, validated, val_loglik, snapshot body)."""
    _, step, validated, val_loglik = fields(message, wire.SNAPSHOT_RESULT, 4, None, "SNAPSHOT_RESULT")
    within("a SNAPSHOT_RESULT's step", step, 1, shape.steps)
    within("a SNAPSHOT_RESULT's validation flag", validated, 0, 1)
    limit = LOGLIK_PER_TOKEN * shape.val_tokens if validated else 0
    within("a SNAPSHOT_RESULT's validation sum", val_loglik, -limit, limit)
    return step, validated, val_loglik, snapshot_body(shape, wire.payload(message, 4), "SNAPSHOT_RESULT")


# ---- coordinator -> worker ---------------------------------------------------------------------
def parse_welcome(message):
    """{"model", "config", "run_id"}: the configuration is checked by the worker's config builder."""
    fields(message, wire.WELCOME, 1, None, "WELCOME")
    said = json_payload(message, 1, "WELCOME", 1 << 20)
    text_field(said, "model", "WELCOME")
    run_id = text_field(said, "run_id", "WELCOME")
    if len(run_id) != 32 or any(c not in "0123456789abcdef" for c in run_id):
        raise wire.Malformed("a WELCOME whose run_id is not 32 hex digits")
    if not isinstance(said.get("config"), dict):
        raise wire.Malformed("a WELCOME without a configuration")
    return said


def parse_refuse(message):
    fields(message, wire.REFUSE, 1, None, "REFUSE")
    reason = bytes(wire.payload(message, 1)[:REASON_BYTES]).decode(errors="replace")
    return "".join(c if c.isprintable() else "?" for c in reason)


def parse_stop(message):
    return within("a STOP's status", fields(message, wire.STOP, 2, 0, "STOP")[1], 0, 255)


def parse_wait(message):
    fields(message, wire.WAIT, 1, 0, "WAIT")


def parse_hello_again(message):
    fields(message, wire.HELLO_AGAIN, 1, 0, "HELLO_AGAIN")


def parse_job(message, shape):
    """(step, chunk, the chunk's states as bytes)."""
    _, step, chunk = fields(message, wire.JOB, 3, shape.state_bytes, "JOB")
    return (within("a JOB's step", step, 0, shape.steps - 1), within("a JOB's chunk", chunk, 0, shape.n_chunks - 1),
            wire.payload(message, 3))


def parse_catchup(message, shape):
    """(step, the step's packed fitness row)."""
    _, step = fields(message, wire.CATCHUP, 2, shape.row_bytes, "CATCHUP")
    return within("a CATCHUP's step", step, 0, shape.steps - 1), ternary(wire.payload(message, 2), "a CATCHUP row")


def parse_snapshot(message, shape):
    """(step, validate)."""
    _, step, validate = fields(message, wire.SNAPSHOT, 3, 0, "SNAPSHOT")
    return within("a SNAPSHOT's step", step, 1, shape.steps), within("a SNAPSHOT's validate flag", validate, 0, 1)


def parse_load(message, shape):
    """(step, snapshot body)."""
    _, step = fields(message, wire.LOAD, 2, None, "LOAD")
    return within("a LOAD's step", step, 0, shape.steps), snapshot_body(shape, wire.payload(message, 2), "LOAD")


def kind_of(message):
    """The kind of a byte message, or Malformed."""
    message = np.asarray(message)
    if message.dtype != np.uint8 or message.ndim != 1:
        raise wire.Malformed("a message that is not a byte string")
    return wire.kind(message)
