"""The gossip message parser at its edges: each range admitted up to its last legal value and refused one
past it, the refusals that answer the sender (answer=True) and those that do not, and each echoed field
in a refusal's text cut at its documented length. Pure parser calls, no sockets."""

import dataclasses

import numpy as np
import pytest

from eggnog.training.gossip import tcp_wire as wire
from eggnog.training.gossip.messages import (
    CLOCK_SKEW_S,
    MAX_EXCHANGE,
    MAX_ISLANDS,
    Refused,
    merges_of,
    parse_address,
    read,
)
from tests.test_gossip_messages import ALL_KINDS, EXPECTED, HASH, NOW, RUN, body, record


def refusal(data, kinds=ALL_KINDS):
    with pytest.raises(Refused) as caught:
        read(data, EXPECTED, kinds, NOW)
    return caught.value


def admits(data):
    return read(data, EXPECTED, ALL_KINDS, NOW)


# ---- ranges -------------------------------------------------------------------------------------

def test_island_numbers_run_from_0_to_max_islands_minus_1():
    assert MAX_ISLANDS == 4096
    assert admits(body(wire.OFFER, record(wire.OFFER, island=0))).info["island"] == 0
    assert admits(body(wire.OFFER, record(wire.OFFER, island=MAX_ISLANDS - 1))).info["island"] == 4095
    e = refusal(body(wire.OFFER, record(wire.OFFER, island=MAX_ISLANDS)))
    assert e.peer is None and "not a number in 0..4095" in e.reason
    assert refusal(body(wire.OFFER, record(wire.OFFER, island=0)), (wire.MODEL,)).peer == 0  # peer known


def test_exchange_ids_run_from_0_to_2_to_the_56_minus_1():
    assert MAX_EXCHANGE == 1 << 56
    info = record(wire.OFFER)
    assert admits(wire.encode(wire.OFFER, 0, info)).exchange == 0
    assert admits(wire.encode(wire.OFFER, (1 << 56) - 1, info)).exchange == (1 << 56) - 1
    for exchange in (1 << 56, 1 << 57, -1):
        assert "of exchange" in refusal(wire.encode(wire.OFFER, exchange, info)).reason


def test_the_clock_skew_is_60_s_inclusive_either_way():
    assert CLOCK_SKEW_S == 60.0
    for at in (NOW + 60.0, NOW - 60.0):
        assert admits(body(wire.OFFER, record(wire.OFFER, time=at))).info["time"] == at
    for at in (NOW + 60.5, NOW - 60.5, NOW + 61.0):
        assert "not within 60 s of this island's clock" in refusal(body(wire.OFFER, record(wire.OFFER, time=at))).reason


def test_ports_run_from_1_to_65535_in_at_most_5_digits():
    assert parse_address("h:1") == "h:1"
    assert parse_address("h:65535") == "h:65535"
    assert parse_address("h:08080") == "h:8080"  # 5 digits, leading zero
    for text in ("h:0", "h:00000", "h:65536", "h:99999", "h:000080", "h:0000080", "h:ab", "h:8a", "h:", "h:-1"):
        assert parse_address(text) is None, text


def test_a_host_must_match_its_pattern_whatever_the_port():
    for text in (":80", "a b:80", "h/x:80", "x" * 254 + ":80", "h;rm:1"):
        assert parse_address(text) is None, text
    assert parse_address("x" * 253 + ":80") == "x" * 253 + ":80"
    assert parse_address(5000) is None


def test_a_model_echo_may_be_null_or_a_nonce():
    assert admits(body(wire.MODEL, record(wire.MODEL, echo="0f" * 16))).info["echo"] == "0f" * 16
    assert admits(body(wire.MODEL, record(wire.MODEL, echo=None))).info["echo"] is None
    for echo in ("0F" * 16, "0" * 31, "0" * 33, 7):
        assert "echo" in refusal(body(wire.MODEL, record(wire.MODEL, echo=echo))).reason


def test_only_a_model_carries_values_scalars_or_buffer_alone():
    info = record(wire.OFFER)
    scalars_only = wire.encode(wire.OFFER, 9, info, np.array([1.0]), np.zeros(0, np.float32))
    buffer_only = wire.encode(wire.OFFER, 9, info, np.zeros(0), np.ones(3, np.float32))
    for data in (scalars_only, buffer_only):
        assert "carrying model values" in refusal(data).reason
    send_me = wire.encode(wire.SEND_ME, 9, record(wire.SEND_ME), np.array([1.0]), np.zeros(0, np.float32))
    assert "carrying model values" in refusal(send_me).reason


# ---- who is answered --------------------------------------------------------------------------

@pytest.mark.parametrize("change", [{"version": "0.0.0-other"}, {"hash": "ef" * 32}, {"run": "ef" * 16},
                                    {"to": "10.0.0.9:1"}])
def test_a_sender_running_something_else_or_misaddressing_is_answered(change):
    e = refusal(body(wire.OFFER, record(wire.OFFER, **change)))
    assert e.answer is True and e.kind == "offer" and e.peer == 3


@pytest.mark.parametrize("kind, change", [(wire.OFFER, {"island": MAX_ISLANDS}), (wire.OFFER, {"fitness": None}),
                                          (wire.OFFER, {"merge": "steal"}), (wire.SEND_ME, {"nonce": "x"}),
                                          (wire.MODEL, {"echo": 5}), (wire.OFFER, {"time": NOW + 3600})])
def test_a_message_malformed_within_this_run_is_not_answered(kind, change):
    assert refusal(body(kind, record(kind, **change))).answer is False


def test_an_unexpected_kind_or_unreadable_body_is_not_answered():
    assert refusal(body(wire.SEND_ME, record(wire.SEND_ME)), (wire.OFFER,)).answer is False
    e = refusal(b"\x00" * 3)
    assert e.answer is False and e.kind == "unreadable" and e.peer is None
    e = Refused("why")
    assert (e.reason, e.peer, e.kind, e.answer) == ("why", None, "unreadable", False)


def test_a_refusal_names_its_kind_with_its_article():
    assert refusal(body(wire.OFFER, record(wire.OFFER, island=-1))).reason.startswith("an offer message from island")
    assert refusal(body(wire.MODEL, record(wire.MODEL, island=-1))).reason.startswith("a model message from island")
    assert refusal(body(wire.SEND_ME, record(wire.SEND_ME, island=-1))).reason.startswith("a send-me message ")


# ---- configuration ------------------------------------------------------------------------------

def test_expected_is_frozen():
    with pytest.raises(dataclasses.FrozenInstanceError):
        EXPECTED.run_id = "x"
    assert EXPECTED.run_id == RUN


def test_merges_of_splits_only_mixed():
    assert merges_of("mixed") == ("clonal", "recombination")
    assert merges_of("clonal") == ("clonal",)
    assert merges_of("recombination") == ("recombination",)


# ---- how much of a sender's text a refusal echoes -----------------------------------------------

def long_text(n, start=0):
    """n distinct letters/digits, so any cut shows where it fell."""
    alphabet = "abcdefghijklmnopqrstuvwxyz0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZ" * 4
    return alphabet[start:start + n]


def test_the_version_hash_run_and_address_echoed_are_cut_at_40_12_12_and_80():
    version = long_text(60)
    assert f"from eggnog {version[:40]}, not" in refusal(body(wire.OFFER, record(wire.OFFER, version=version))).reason
    other = long_text(30)
    reason = refusal(body(wire.OFFER, record(wire.OFFER, hash=other))).reason
    assert f"(hash {other[:12]}, this run's {HASH[:12]})" in reason
    reason = refusal(body(wire.OFFER, record(wire.OFFER, run=other))).reason
    assert f"(id {other[:12]}, this run's {RUN[:12]})" in reason
    assert reason.endswith(f"{RUN[:12]})")
    to = long_text(100)
    assert f"addressed to {to[:80]}, not" in refusal(body(wire.OFFER, record(wire.OFFER, to=to))).reason


def test_unknown_field_names_are_echoed_eight_at_most_each_cut_at_20():
    info = record(wire.OFFER)
    names = [letter * 25 for letter in "abcdefghij"]
    for name in names:
        info[name] = 1
    reason = refusal(body(wire.OFFER, info)).reason
    shown = [name[:20] for name in sorted(names)[:8]]
    assert f"or unknown {shown}" in reason
    assert "i" * 20 not in reason and "j" * 20 not in reason


def test_the_sender_fields_echoed_are_cut_at_their_lengths():
    island = long_text(40)
    assert f"from island {island[:20]}, not" in refusal(body(wire.OFFER, record(wire.OFFER, island=island))).reason
    address = long_text(120)
    reason = refusal(body(wire.OFFER, record(wire.OFFER, address=address))).reason
    assert f"from the address {address[:80]!r}, not" in reason
    text = long_text(50)
    assert f"sent at {text[:30]}, not" in refusal(body(wire.OFFER, record(wire.OFFER, time=text))).reason
    assert f"fitness {text[:30]}, not" in refusal(body(wire.OFFER, record(wire.OFFER, fitness=text))).reason
    assert f"merge {text[:30]!r}, not" in refusal(body(wire.OFFER, record(wire.OFFER, merge=text))).reason
    assert f"with_state {text[:10]} disagrees" in refusal(body(wire.OFFER, record(wire.OFFER, with_state=text))).reason
