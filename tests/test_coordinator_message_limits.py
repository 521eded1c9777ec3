"""The limits of the coordinator's message parsers, exactly at their edges: every range end accepted and the
next value refused, every length limit of a field, the packed sizes against pack_ternary, the largest legal
message against the size formula, frozen results, and refusal texts that name the expected size and kind."""

import dataclasses
import json

import numpy as np
import pytest

from eggnog.evolution.coordinator import messages, wire
from eggnog.evolution.coordinator.messages import RunShape
from eggnog.evolution.fitness import pack_ternary
from tests.es_helpers import tiny_config

LAYOUT = (("params", np.int8, 4), ("m", np.float32, 3), ("v", np.float32, 2))
SNAPSHOT_BYTES = 4 + 4 * 3 + 4 * 2
# 7 pairs a chunk: 2 packed bytes, the last holding 2 pairs (< 9); 2 chunks; a 14-pair row of 3 bytes.
SHAPE = RunShape(steps=5, population=28, chunk=14, state_bytes=30, member_tokens=6, val_tokens=10, layout=LAYOUT)
LIMIT = 16 * 256 * SHAPE.member_tokens  # 1/16 bit units, at most 256 bits a token
VAL_LIMIT = 16 * 256 * SHAPE.val_tokens


def refused(match=None):
    return pytest.raises(wire.Malformed, match=match)


def snapshot(values=None):
    body = np.zeros(SNAPSHOT_BYTES, np.uint8)
    floats = np.zeros(5, np.float32) if values is None else np.asarray(values, np.float32)
    body[4:] = np.frombuffer(floats.tobytes(), np.uint8)
    return body


def result(step=0, chunk=0, loglik=0, proxy=0, packed=None, shape=SHAPE, n_packed=None, states=None):
    packed = np.zeros(shape.packed_per_chunk, np.uint8) if packed is None else np.asarray(packed, np.uint8)
    states = np.zeros(shape.state_bytes, np.uint8) if states is None else states
    n = packed.size if n_packed is None else n_packed
    return wire.encode([wire.RESULT, step, chunk, loglik, proxy, n], packed, states)


def json_message(kind, value, size=None):
    """A JSON message whose body is padded with spaces to `size` bytes."""
    text = json.dumps(value)
    if size is not None:
        assert len(text) <= size
        text += " " * (size - len(text))
    return wire.encode([kind], np.frombuffer(text.encode(), np.uint8))


def hello(worker="w", version="v", size=None):
    return json_message(wire.HELLO, {"worker": worker, "version": version}, size)


def ready(size=None):
    return json_message(wire.READY, {"worker": "w", "version": "v", "config_hash": "ab" * 32}, size)


def welcome(run_id="0" * 32, size=None):
    return json_message(wire.WELCOME, {"model": "egg", "config": {}, "run_id": run_id}, size)


def refuse(text):
    return wire.encode([wire.REFUSE], np.frombuffer(text.encode(), np.uint8))


# ---- the run's shape ---------------------------------------------------------------------------
@pytest.mark.parametrize("members", [2, 10, 14, 20, 22, 24, 30, 60, 62, 120, 122])
def test_packed_sizes_are_those_of_pack_ternary(members):
    shape = RunShape(steps=1, population=members, chunk=members, state_bytes=0, member_tokens=1, val_tokens=1,
                     layout=())
    assert shape.packed_per_chunk == pack_ternary(np.zeros(members // 2, np.int8)).size
    assert shape.row_bytes == pack_ternary(np.zeros(members // 2, np.int8)).size


def test_run_shape_counts_the_tokens_of_a_chunk_and_of_a_validation():
    cfg = tiny_config(mode="coordinator")
    shape = messages.run_shape(cfg, cfg.build_model())
    assert shape.member_tokens == cfg.population_chunk * cfg.tokens_per_update
    assert shape.val_tokens == cfg.val_rows * cfg.val_tokens
    assert isinstance(shape.member_tokens, int) and isinstance(shape.val_tokens, int)


def test_largest_message_is_a_result_when_states_dominate():
    shape = RunShape(steps=3, population=44, chunk=22, state_bytes=5000, member_tokens=1, val_tokens=1,
                     layout=LAYOUT)
    largest = result(shape=shape)
    messages.parse_result(largest, shape)
    assert shape.packed_per_chunk == 3
    assert shape.max_message_bytes() == largest.size + 4096


def test_largest_message_is_a_snapshot_result_when_the_snapshot_dominates():
    layout = (("params", np.int8, 9000), ("m", np.float32, 10))
    shape = RunShape(steps=3, population=4, chunk=2, state_bytes=7, member_tokens=1, val_tokens=1, layout=layout)
    largest = wire.encode([wire.SNAPSHOT_RESULT, 1, 1, 0], np.zeros(9040, np.uint8))
    messages.parse_snapshot_result(largest, shape)
    assert shape.max_message_bytes() == largest.size + 4096


def test_largest_message_is_a_catchup_when_the_population_dominates():
    shape = RunShape(steps=3, population=100_000, chunk=2, state_bytes=2, member_tokens=1, val_tokens=1,
                     layout=(("params", np.int8, 3),))
    largest = wire.encode([wire.CATCHUP, 0], np.zeros(shape.row_bytes, np.uint8))
    messages.parse_catchup(largest, shape)
    assert shape.max_message_bytes() == largest.size + 4096 == 16 + 10_000 + 4096


def test_shapes_and_results_are_frozen():
    with pytest.raises(dataclasses.FrozenInstanceError):
        SHAPE.steps = 9
    parsed = messages.parse_result(result(), SHAPE)
    with pytest.raises(dataclasses.FrozenInstanceError):
        parsed.step = 3


# ---- shared checks -----------------------------------------------------------------------------
@pytest.mark.parametrize("bad", [np.zeros(16, np.int64), np.zeros(64, np.float32), np.zeros((2, 16), np.uint8)])
def test_a_message_that_is_not_a_1d_byte_string_is_refused(bad):
    with refused("not a byte string"):
        messages.fields(bad, wire.LEAVE, 1, 0, "LEAVE")
    with refused("not a byte string"):
        messages.kind_of(bad)


def test_fields_takes_an_empty_payload_by_default():
    assert messages.fields(wire.encode([wire.LEAVE]), wire.LEAVE, 1) == [wire.LEAVE]
    with refused("of 9 bytes, not 8$"):
        messages.fields(np.append(wire.encode([wire.LEAVE]), np.uint8(0)), wire.LEAVE, 1)


def test_a_wrong_size_names_the_expected_size():
    job = wire.encode([wire.JOB, 0, 0], np.zeros(SHAPE.state_bytes + 1, np.uint8))
    with refused(rf"^a JOB message of {24 + 31} bytes, not {24 + 30}$"):
        messages.parse_job(job, SHAPE)
    with refused(rf"with {SHAPE.packed_per_chunk + 29} payload bytes, not {SHAPE.packed_per_chunk + 30}$"):
        messages.parse_result(result(states=np.zeros(29, np.uint8)), SHAPE)


def test_a_wrong_kind_names_the_expected_kind():
    with refused(f"^a message of kind {wire.WAIT} where REQUEST was expected$"):
        messages.parse_request(wire.encode([wire.WAIT, 0, 0]), SHAPE)


# ---- worker -> coordinator ---------------------------------------------------------------------
def test_hello_names_are_one_to_64_printable_characters():
    assert messages.parse_hello(hello("w" * 64, "v" * 64)) == ("w" * 64, "v" * 64)
    for worker in ["", "w" * 65, "a\nb", "tab\there"]:
        with refused("not a short printable string"):
            messages.parse_hello(hello(worker))
    with refused("'version'"):
        messages.parse_hello(hello("w", "v" * 65))


def test_hello_and_ready_bodies_are_bounded():
    assert messages.parse_hello(hello(size=256)) == ("w", "v")
    with refused("of 257 bytes"):
        messages.parse_hello(hello(size=257))
    assert messages.parse_ready(ready(size=512))[2] == "ab" * 32
    with refused("of 513 bytes"):
        messages.parse_ready(ready(size=513))


@pytest.mark.parametrize("kind, parse", [(wire.READY, messages.parse_ready), (wire.WELCOME, messages.parse_welcome),
                                         (wire.HELLO, messages.parse_hello)])
def test_an_empty_json_message_is_unreadable(kind, parse):
    name = {wire.READY: "READY", wire.WELCOME: "WELCOME", wire.HELLO: "HELLO"}[kind]
    with refused(f"^an unreadable {name}$"):
        parse(wire.encode([kind]))


def test_heartbeat_ids_are_one_to_64_bytes():
    for n in (1, 64):
        assert messages.parse_heartbeat(wire.encode([wire.HEARTBEAT], np.full(n, 65, np.uint8))) == b"A" * n
    for n in (0, 65):
        with refused(f"of {n} bytes"):
            messages.parse_heartbeat(wire.encode([wire.HEARTBEAT], np.full(n, 65, np.uint8)))


def test_request_ranges():
    for step, signum in [(0, 0), (SHAPE.steps, 0), (0, 64)]:
        assert messages.parse_request(wire.encode([wire.REQUEST, step, signum]), SHAPE) == (step, signum)
    for step, signum in [(-1, 0), (SHAPE.steps + 1, 0), (0, 65), (0, -1)]:
        with refused("outside"):
            messages.parse_request(wire.encode([wire.REQUEST, step, signum]), SHAPE)


def test_result_step_and_chunk_ranges():
    for step, chunk in [(0, 0), (SHAPE.steps - 1, SHAPE.n_chunks - 1)]:
        parsed = messages.parse_result(result(step, chunk), SHAPE)
        assert (parsed.step, parsed.chunk) == (step, chunk)
    for step, chunk in [(SHAPE.steps, 0), (-1, 0), (0, SHAPE.n_chunks), (0, -1)]:
        with refused("outside"):
            messages.parse_result(result(step, chunk), SHAPE)


def test_result_sums_are_bounded_by_256_bits_a_token():
    for value in (LIMIT, -LIMIT):
        parsed = messages.parse_result(result(loglik=value, proxy=value), SHAPE)
        assert (parsed.loglik, parsed.proxy) == (value, value)
    for loglik, proxy in [(LIMIT + 1, 0), (-LIMIT - 1, 0), (0, LIMIT + 1), (0, -LIMIT - 1)]:
        with refused("sum"):
            messages.parse_result(result(loglik=loglik, proxy=proxy), SHAPE)


def test_result_packed_codes_and_the_last_byte():
    assert messages.parse_result(result(packed=[242, 8]), SHAPE).packed.tolist() == [242, 8]
    with refused("more pairs than the chunk has"):
        messages.parse_result(result(packed=[0, 9]), SHAPE)
    with refused("not a ternary code"):
        messages.parse_result(result(packed=[243, 0]), SHAPE)
    with refused("packed size"):
        messages.parse_result(result(packed=[0, 0, 0]), SHAPE)


def test_snapshot_result_ranges():
    assert messages.parse_snapshot_result(wire.encode([wire.SNAPSHOT_RESULT, 1, 0, 0], snapshot()), SHAPE)[:3] == \
        (1, 0, 0)
    for step, validated, total in [(SHAPE.steps, 1, VAL_LIMIT), (1, 1, -VAL_LIMIT)]:
        message = wire.encode([wire.SNAPSHOT_RESULT, step, validated, total], snapshot())
        assert messages.parse_snapshot_result(message, SHAPE)[:3] == (step, validated, total)
    bad = [(0, 0, 0), (SHAPE.steps + 1, 0, 0), (1, 2, 0), (1, -1, 0), (1, 0, 1), (1, 0, -1), (1, 1, VAL_LIMIT + 1)]
    for step, validated, total in bad:
        with refused("outside"):
            messages.parse_snapshot_result(wire.encode([wire.SNAPSHOT_RESULT, step, validated, total], snapshot()),
                                           SHAPE)


@pytest.mark.parametrize("at", range(5))
def test_every_float_of_a_snapshot_must_be_finite(at):
    values = np.ones(5, np.float32)
    values[at] = np.nan if at % 2 else np.inf
    with refused("is not finite"):
        messages.parse_load(wire.encode([wire.LOAD, 1], snapshot(values)), SHAPE)
    with refused("is not finite"):
        messages.parse_snapshot_result(wire.encode([wire.SNAPSHOT_RESULT, 1, 0, 0], snapshot(values)), SHAPE)


# ---- coordinator -> worker ---------------------------------------------------------------------
def test_welcome_run_id_is_32_hex_digits_and_the_body_at_most_a_mebibyte():
    assert messages.parse_welcome(welcome("0123456789abcdef" * 2))["run_id"] == "0123456789abcdef" * 2
    for run_id in ["0" * 31, "0" * 33, "g" * 32, "A" * 32]:
        with refused("32 hex digits"):
            messages.parse_welcome(welcome(run_id))
    assert messages.parse_welcome(welcome(size=1 << 20))["model"] == "egg"
    with refused(f"of {(1 << 20) + 1} bytes"):
        messages.parse_welcome(welcome(size=(1 << 20) + 1))


def test_refuse_returns_the_reason_printable_and_cut_at_2000_characters():
    assert messages.parse_refuse(refuse("config hash differs: abcdefgh123")) == "config hash differs: abcdefgh123"
    assert messages.parse_refuse(refuse("a\nb\x1bc")) == "a?b?c"
    long = "x" * 1999 + "yz" + "w" * 500
    assert messages.parse_refuse(refuse(long)) == "x" * 1999 + "y"


def test_job_ranges():
    states = (np.arange(SHAPE.state_bytes) % 251).astype(np.uint8)
    for step, chunk in [(0, 0), (SHAPE.steps - 1, SHAPE.n_chunks - 1)]:
        job = wire.encode([wire.JOB, step, chunk], states)
        got = messages.parse_job(job, SHAPE)
        assert got[:2] == (step, chunk) and np.array_equal(np.asarray(got[2]), states)  # the states, whole
    for step, chunk in [(SHAPE.steps, 0), (SHAPE.steps + 1, 0), (-1, 0), (0, SHAPE.n_chunks), (0, -1)]:
        with refused("outside"):
            messages.parse_job(wire.encode([wire.JOB, step, chunk], np.zeros(SHAPE.state_bytes, np.uint8)), SHAPE)


def test_catchup_ranges_and_codes():
    row = np.full(SHAPE.row_bytes, 242, np.uint8)
    for step in (0, SHAPE.steps - 1):
        assert messages.parse_catchup(wire.encode([wire.CATCHUP, step], row), SHAPE)[0] == step
    for step in (SHAPE.steps, SHAPE.steps + 1, -1):
        with refused("outside"):
            messages.parse_catchup(wire.encode([wire.CATCHUP, step], row), SHAPE)
    row[1] = 243
    with refused("not a ternary code"):
        messages.parse_catchup(wire.encode([wire.CATCHUP, 0], row), SHAPE)


def test_snapshot_and_load_ranges():
    for step, validate in [(1, 0), (SHAPE.steps, 1)]:
        assert messages.parse_snapshot(wire.encode([wire.SNAPSHOT, step, validate]), SHAPE) == (step, validate)
    for step, validate in [(0, 0), (SHAPE.steps + 1, 0), (1, 2), (1, -1)]:
        with refused("outside"):
            messages.parse_snapshot(wire.encode([wire.SNAPSHOT, step, validate]), SHAPE)
    for step in (0, SHAPE.steps):
        assert messages.parse_load(wire.encode([wire.LOAD, step], snapshot()), SHAPE)[0] == step
    for step in (-1, SHAPE.steps + 1):
        with refused("outside"):
            messages.parse_load(wire.encode([wire.LOAD, step], snapshot()), SHAPE)
