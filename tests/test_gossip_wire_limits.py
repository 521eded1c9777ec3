"""Gossip's wire at its limits: the kinds' numbers on the wire, a record of exactly the largest size read and one
byte more refused, the socket bound equal to the largest legal body, empty scalars and buffers by default, and
refusals that name the kind with its article; the shared token's tag and the configuration hash, pinned."""

import hashlib
from dataclasses import dataclass

import numpy as np
import pytest

from eggnog.runtime.auth import config_hash, tag, token_key
from eggnog.training.gossip import tcp_wire
from eggnog.training.gossip.tcp_wire import MAX_RECORD_BYTES, MODEL, OFFER, SEND_ME, Malformed, Message


def test_the_kinds_are_30_31_32_on_the_wire():
    assert (OFFER, SEND_ME, MODEL) == (30, 31, 32) and tcp_wire.KINDS == {30: "offer", 31: "send-me", 32: "model"}
    for kind in (OFFER, SEND_ME, MODEL):
        assert tcp_wire.decode(tcp_wire.encode(kind, 1, {})).kind == kind


def record_of(size):
    return {"p": "x" * (size - len('{"p": ""}'))}


def test_the_largest_record_is_read_and_one_byte_more_is_refused():
    values, scalars = np.arange(3, dtype=np.float32), np.arange(2, dtype=np.float64)
    largest = tcp_wire.encode(MODEL, 4, record_of(MAX_RECORD_BYTES), scalars, values)
    assert len(largest) == tcp_wire.max_body_bytes(3, 2) == 40 + 4096 + 16 + 12
    assert tcp_wire.decode(largest).info == record_of(MAX_RECORD_BYTES)
    with pytest.raises(Malformed, match="a model message whose record is 4097 bytes, not 0..4096"):
        tcp_wire.decode(tcp_wire.encode(MODEL, 4, record_of(MAX_RECORD_BYTES + 1), scalars, values))
    with pytest.raises(Malformed, match="an offer message whose record is not JSON"):  # an empty record
        tcp_wire.decode(np.array([OFFER, 4, 0, 0, 0], np.int64).tobytes())


def test_a_message_holds_no_scalars_buffer_or_body_unless_given():
    made = Message(OFFER, 1, {})
    assert (made.scalars.size, made.buffer.size, made.size) == (0, 0, 0)
    sent = tcp_wire.decode(tcp_wire.encode(SEND_ME, 2, {"a": 1}))
    assert (sent.scalars.size, sent.buffer.size, sent.size) == (0, 0, 40 + len('{"a": 1}'))


@pytest.mark.parametrize("kind, said", [(OFFER, "an offer"), (SEND_ME, "a send-me"), (MODEL, "a model")])
def test_a_refusal_names_the_kind_with_its_article(kind, said):
    with pytest.raises(Malformed, match=f"^{said} message whose record is not a JSON object"):
        tcp_wire.decode(tcp_wire.encode(kind, 1, [1]))


def test_the_message_tag_is_pinned():
    key = hashlib.sha256(b"t").digest()
    assert tag(key, b"body").hex() == "befaef8430649defd35bc5edd198dc5d5316750fb49ffc2f4e013c3961d93665"


def test_an_unreadable_token_file_is_named_with_the_errors_text(tmp_path):
    from eggnog.runtime.errors import BadInput

    with pytest.raises(BadInput, match="missing' \\(No such file or directory\\)$"):
        token_key(tmp_path / "missing", environ={})


@dataclass
class Ab:
    a: int = 1
    b: int = 2

    @classmethod
    def fixed_on_resume(cls):
        return ("a", "b")


@dataclass
class Ba:
    b: int = 2
    a: int = 1

    @classmethod
    def fixed_on_resume(cls):
        return ("b", "a")


def test_the_configuration_hash_does_not_depend_on_the_order_of_the_fields():
    first, second = Ab(), Ba()
    first.model_name = second.model_name = "m"
    assert config_hash(first, None) == config_hash(second, None)
    assert config_hash(Ab(a=3), None) != config_hash(Ab(), None)
