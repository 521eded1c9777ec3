"""Every gossip parser against generated input (Hypothesis): a message body of any bytes, a well-formed
message with any field dropped, replaced or added, and any rendezvous or status file text is either
admitted with every field in range or refused with a reason; nothing else is ever raised. A live island
fed such messages over its socket keeps stepping."""

import json
import math
import time

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from eggnog import code_version
from eggnog.training.gossip import tcp_wire as wire
from eggnog.training.gossip.file_population import status_record
from eggnog.training.gossip.messages import CLOCK_SKEW_S, FIELDS, MAX_ISLANDS, Expected, Refused, parse_address, read
from eggnog.training.gossip.peers import registration
from eggnog.training.gossip.population import FIELDS as RECORD_FIELDS

NOW = 1.7e9
HASH, RUN = "ab" * 32, "cd" * 16
EXPECTED = Expected(code_version(), HASH, RUN, frozenset(["127.0.0.1:5000"]), ("clonal", "recombination"),
                    "interpolate")
ALL_KINDS = (wire.OFFER, wire.SEND_ME, wire.MODEL)
FAST = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])

scalar_values = st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20)
json_values = st.recursive(scalar_values,
                           lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner,
                                                                                        max_size=4), max_leaves=10)


def record(kind, **changes):
    base = {"island": 3, "address": "127.0.0.1:5001", "hash": HASH, "version": code_version(), "run": RUN,
            "to": "127.0.0.1:5000", "time": NOW, "fitness": -4.5}
    base.update({wire.OFFER: {"merge": "clonal", "with_state": True}, wire.SEND_ME: {"nonce": "0" * 32},
                 wire.MODEL: {"echo": None}}[kind])
    base.update(changes)
    return base


def body(kind, info, scalars=None, buffer=None):
    if kind == wire.MODEL:
        scalars = np.array([info.get("fitness") if isinstance(info.get("fitness"), float) else 0.0, 1.0]) \
            if scalars is None else scalars
        buffer = np.zeros(4, np.float32) if buffer is None else buffer
        return wire.encode(kind, 9, info, scalars, buffer)
    return wire.encode(kind, 9, info)


def admitted_fields_are_in_range(message):
    info = message.info
    assert set(info) == set(FIELDS[message.kind])
    assert isinstance(info["island"], int) and 0 <= info["island"] < MAX_ISLANDS
    assert parse_address(info["address"]) == info["address"] and info["to"] in EXPECTED.addresses
    assert (info["hash"], info["version"], info["run"]) == (HASH, code_version(), RUN)
    assert math.isfinite(info["fitness"]) and abs(info["time"] - NOW) <= CLOCK_SKEW_S
    assert np.isfinite(message.scalars).all() and np.isfinite(message.buffer).all()


def read_or_refuse(data, kinds=ALL_KINDS):
    try:
        message = read(data, EXPECTED, kinds, NOW)
    except Refused as e:
        assert e.reason and e.kind in ("offer", "send-me", "model", "unreadable")
        return None
    admitted_fields_are_in_range(message)
    return message


@pytest.mark.parametrize("kind", ALL_KINDS)
def test_a_well_formed_message_of_each_kind_is_admitted(kind):
    assert read_or_refuse(body(kind, record(kind))) is not None


@FAST
@given(st.binary(max_size=400))
def test_any_bytes_are_admitted_or_refused(data):
    read_or_refuse(data)


@FAST
@given(st.sampled_from(ALL_KINDS), st.data())
def test_a_message_with_any_field_dropped_replaced_or_added_is_admitted_only_when_every_field_holds(kind, data):
    info = record(kind)
    for name in data.draw(st.lists(st.sampled_from(sorted(info)), max_size=3, unique=True)):
        action = data.draw(st.sampled_from(["drop", "replace"]))
        if action == "drop":
            del info[name]
        else:
            info[name] = data.draw(json_values)
    if data.draw(st.booleans()):
        info[data.draw(st.text(max_size=8))] = data.draw(json_values)
    message = read_or_refuse(body(kind, info))
    if message is not None:
        assert info == record(kind, **{k: info[k] for k in info})  # only values that pass every check


@FAST
@given(st.sampled_from(ALL_KINDS), st.binary(min_size=1, max_size=300), st.integers(0, 299))
def test_a_message_with_any_bytes_changed_is_admitted_or_refused(kind, junk, at):
    data = bytearray(body(kind, record(kind)))
    at = at % len(data)
    data[at:at + len(junk)] = junk
    read_or_refuse(bytes(data))


@FAST
@given(st.lists(st.floats(width=32), min_size=1, max_size=6), st.lists(st.floats(), min_size=1, max_size=3))
def test_a_model_with_any_values_is_admitted_only_when_all_are_finite(values, scalars):
    scalars[0] = -4.5
    message = read_or_refuse(body(wire.MODEL, record(wire.MODEL), np.array(scalars), np.array(values, np.float32)))
    assert (message is not None) == bool(np.isfinite(values).all() and np.isfinite(scalars).all())


def test_non_finite_and_out_of_range_fields_are_refused_with_their_reason():
    cases = [(wire.OFFER, {"fitness": None}, "fitness None"), (wire.OFFER, {"fitness": 1e400}, "not JSON"),
             (wire.OFFER, {"merge": "steal"}, "merge 'steal'"), (wire.OFFER, {"with_state": False}, "with_state"),
             (wire.OFFER, {"island": MAX_ISLANDS}, "from island 4096"), (wire.OFFER, {"island": True}, "from island"),
             (wire.OFFER, {"address": "foo"}, "not HOST:PORT"), (wire.OFFER, {"time": NOW + 3600}, "clock"),
             (wire.OFFER, {"to": "10.0.0.9:1"}, "a relay"), (wire.OFFER, {"run": "ef" * 16}, "another run"),
             (wire.SEND_ME, {"nonce": "xyz"}, "nonce"), (wire.MODEL, {"echo": 5}, "echo")]
    for kind, change, reason in cases:
        with pytest.raises(Refused, match=reason):
            read(body(kind, record(kind, **change)), EXPECTED, ALL_KINDS, NOW)
    offer = record(wire.OFFER)
    del offer["merge"]
    with pytest.raises(Refused, match=r"fields missing \['merge'\]"):
        read(body(wire.OFFER, offer), EXPECTED, ALL_KINDS, NOW)
    with pytest.raises(Refused, match="not finite"):
        read(body(wire.MODEL, record(wire.MODEL, fitness=0.0), np.array([0.0]), np.full(4, np.nan, np.float32)),
             EXPECTED, ALL_KINDS, NOW)
    with pytest.raises(Refused, match="where it is not expected"):
        read(body(wire.SEND_ME, record(wire.SEND_ME)), EXPECTED, (wire.OFFER, wire.MODEL), NOW)
    with pytest.raises(Refused, match="is not JSON"):
        read(wire.encode(wire.OFFER, 1, {}).replace(b"{}", b"[["), EXPECTED, ALL_KINDS, NOW)
    meta = json.dumps(record(wire.OFFER, fitness=12345.0)).replace("12345.0", "1e400000").encode()
    with pytest.raises(Refused, match="the fitness inf, not a finite number"):  # JSON's 1e400000 reads as inf
        read(np.array([wire.OFFER, 1, len(meta), 0, 0], np.int64).tobytes() + meta, EXPECTED, ALL_KINDS, NOW)
    deep = b"[" * 2000
    head = np.array([wire.OFFER, 1, len(deep), 0, 0], np.int64).tobytes()
    with pytest.raises(Refused, match="is not JSON"):  # deep nesting: no RecursionError
        read(head + deep, EXPECTED, ALL_KINDS, NOW)


# ---- shared files ------------------------------------------------------------------------------

@FAST
@given(st.integers(-2, MAX_ISLANDS + 2), st.text(max_size=200) | json_values.map(json.dumps))
def test_any_rendezvous_text_gives_an_address_or_a_reason(number, text):
    address, reason = registration(number, text)
    assert (address is None) != (reason is None)
    if address is not None:
        assert parse_address(address) == address and 0 <= number < MAX_ISLANDS


@FAST
@given(st.integers(0, 10), st.data())
def test_any_status_text_gives_a_record_of_the_right_size_or_a_reason(number, data):
    good = {"island": number, "time": NOW, "record": [1.0] * len(RECORD_FIELDS)}
    text = data.draw(st.sampled_from([
        json.dumps({**good, **data.draw(st.dictionaries(st.sampled_from(["island", "time", "record", "x"]),
                                                        json_values, max_size=2))}),
        json.dumps(data.draw(json_values)), data.draw(st.text(max_size=100))]))
    status, reason = status_record(number, text, NOW)
    assert (status is None) != (reason is None)
    if status is not None:
        assert status["island"] == number and status["time"] <= NOW + CLOCK_SKEW_S
        assert len(status["record"]) == len(RECORD_FIELDS)
        assert all(v is None or math.isfinite(v) for v in status["record"])


def test_the_status_files_of_the_issue_are_refused():
    future = {"island": 5, "time": time.time() + 1e6, "record": [0.0] * len(RECORD_FIELDS)}
    assert "ahead" in status_record(5, json.dumps(future), time.time())[1]
    short = {"island": 5, "time": time.time(), "record": [1.0, 2.0]}
    assert "list of 11 values" in status_record(5, json.dumps(short), time.time())[1]
    assert registration(7, json.dumps({"island": 7, "address": "foo"})) == (None, "the address 'foo' is not HOST:PORT")
    assert registration(7, json.dumps({"island": 8, "address": "h:1"}))[1].startswith("island 8 in the file")
