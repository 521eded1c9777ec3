"""The wire formats and message tags at their edges: a coordinator header read from exactly its own bytes and
refused one byte short, a gossip body refused for any negative count or a size one byte off, records that
are not JSON, and keyed tags that refuse a wrong length, a wrong key or a changed body."""

import numpy as np
import pytest

from eggnog.evolution.coordinator import wire
from eggnog.runtime.auth import TAG_BYTES, config_hash, corpus_fingerprint, tag, tag_matches, token_key
from eggnog.training.gossip import tcp_wire


def test_a_coordinator_message_is_its_int64_header_then_its_payload():
    payload = np.arange(5, dtype=np.float32)
    message = wire.encode([wire.RESULT, 7, -3], payload, np.array([1, 2], np.int16))
    assert message.dtype == np.uint8 and message.size == 3 * 8 + 5 * 4 + 2 * 2
    assert wire.header(message, 3) == [wire.RESULT, 7, -3] and wire.kind(message) == wire.RESULT
    assert np.array_equal(np.frombuffer(wire.payload(message, 3)[:20].tobytes(), np.float32), payload)
    assert wire.payload(message, 3).size == 24


def test_a_header_is_read_from_exactly_its_bytes_and_refused_one_short():
    message = wire.encode([wire.STOP, 130])
    assert wire.header(message, 2) == [wire.STOP, 130] and wire.payload(message, 2).size == 0
    with pytest.raises(wire.Malformed, match="a message of 15 bytes is shorter than its 2-field header"):
        wire.header(message[:15], 2)
    with pytest.raises(wire.Malformed, match="shorter than its 1-field header"):
        wire.kind(np.zeros(7, np.uint8))


def body(kind=tcp_wire.OFFER, n_meta=None, n64=0, n32=0, meta=b"{}", extra=b""):
    n_meta = len(meta) if n_meta is None else n_meta
    head = np.array([kind, 3, n_meta, n64, n32], np.int64).tobytes()
    return head + meta + bytes(8 * max(n64, 0) + 4 * max(n32, 0)) + extra


def test_a_gossip_body_of_exactly_its_header_size_is_read():
    message = tcp_wire.decode(body(tcp_wire.SEND_ME, n64=2, n32=3))
    assert (message.kind, message.exchange, message.info) == (tcp_wire.SEND_ME, 3, {})
    assert message.scalars.size == 2 and message.buffer.size == 3 and message.size == 40 + 2 + 16 + 12
    assert tcp_wire.decode(bytes(tcp_wire.encode(tcp_wire.OFFER, 1, {"f": 1.5}))).info == {"f": 1.5}


@pytest.mark.parametrize("bad, reason", [
    (body(n_meta=-1, meta=b""), "not the size its header gives|record is -1 bytes"),
    (body(n64=-1), "not the size"),
    (body(n32=-1), "not the size"),
    (body(n32=2)[:-1], "not the size"),
    (body(n64=1, extra=b"\0"), "not the size"),
    (body()[:39], "a message of 39 bytes is shorter than its header"),
    (body(kind=tcp_wire.MODEL + 1), f"unknown message kind {tcp_wire.MODEL + 1}"),
    (body(meta=b"\xff\xfe"), "an? offer message whose record is not JSON"),
    (body(meta=b"{no"), "record is not JSON"),
    (body(meta=b"[1]"), "not a JSON object"),
], ids=["negative-record", "negative-scalars", "negative-buffer", "short", "padded", "short-header", "unknown-kind",
        "not-utf8", "not-json", "not-an-object"])
def test_a_gossip_body_that_does_not_add_up_is_refused(bad, reason):
    with pytest.raises(tcp_wire.Malformed, match=reason):
        tcp_wire.decode(bad)


def test_negative_counts_that_sum_to_the_right_size_are_refused():
    cheat = np.array([tcp_wire.MODEL, 0, 10, -1, 0], np.int64).tobytes() + b"{}"  # 10 - 8 = 2 bytes of record
    with pytest.raises(tcp_wire.Malformed, match="not the size"):
        tcp_wire.decode(cheat)


def test_a_tag_is_refused_for_another_length_key_or_body():
    key = token_key(None, environ={"EGGNOG_TOKEN": "t"})
    good = tag(key, b"body")
    assert len(good) == TAG_BYTES and tag_matches(key, good, b"body")
    assert not tag_matches(key, good[:-1], b"body") and not tag_matches(key, good + b"x", b"body")
    assert not tag_matches(key, good, b"bodY")
    assert not tag_matches(token_key(None, environ={"EGGNOG_TOKEN": "u"}), good, b"body")
    assert not tag_matches(key, b"", b"body")


def test_the_token_is_stripped_and_its_key_is_its_sha256(tmp_path):
    import hashlib

    assert token_key(None, environ={"EGGNOG_TOKEN": " s \n"}) == hashlib.sha256(b"s").digest()
    (tmp_path / "token").write_text("s\n")
    assert token_key(tmp_path / "token", environ={"EGGNOG_TOKEN": "other"}) == hashlib.sha256(b"s").digest()


class Corpus:
    def __init__(self, meta):
        self.train, self.val, self.meta = np.zeros(5, np.uint8), np.zeros(2, np.uint8), meta


def test_a_corpus_fingerprint_is_each_splits_length_and_hash():
    assert corpus_fingerprint(None) is None
    assert corpus_fingerprint(Corpus({"splits": {"train": {"sha256": "a"}}})) == {"train": [5, "a"], "val": [2, None]}
    assert corpus_fingerprint(Corpus({})) == {"train": [5, None], "val": [2, None]}


def test_the_configuration_hash_is_the_sha256_of_the_sorted_record():
    from tests.es_helpers import tiny_config

    cfg = tiny_config(mode="coordinator")
    one, other = config_hash(cfg, None), config_hash(tiny_config(mode="coordinator", transport="tcp"), None)
    assert one == other and len(one) == 64  # the transport is local to each process


def test_the_key_and_seal_derivations_are_pinned():
    """Known answers: a change to how keys, labels or seals are derived (a field's width, a label's text) would
    make two builds of one release unable to talk, so it must be made on purpose, here too."""
    from eggnog.runtime.secure_socket import derive_keys, message_key, seal

    keys = derive_keys(token_key(None, environ={"EGGNOG_TOKEN": "pinned"}))
    assert (keys.server_public, keys.client_public) == (b"5NtNnq/&ciNC)nu&98T6whdtshpq+4/5JBX:EYOo",
                                                        b"vvknGGO}JQN}n%r]ESW7t#[H?]XeZnYbAZf[<0V#")
    key = message_key(keys, b"run-7", "up")
    assert key.hex() == "9ba8aa1d3cd8625b3d74b86ee1f22406256018b5e9865351d2338eeb3ff96d7c"
    assert seal(key, b"session-3", b"body").hex() == "f5251e67447b1b5a2bddce641a34773346fef1999237eca0419a17bdbfd75fb2"
