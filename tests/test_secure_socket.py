"""runtime/secure_socket.py: only token holders get through; sealed messages stay in their run, direction
and session; oversize frames are dropped."""

import hashlib
import socket as pysocket
import struct

import pytest
import zmq

from eggnog.runtime.secure_socket import client_socket, derive_keys, message_key, opened, seal, server_socket
from eggnog.training.gossip.tcp import send_without_waiting  # a refused handshake ends the connection for good

KEYS = derive_keys(hashlib.sha256(b"the run's token").digest())
OTHER = derive_keys(hashlib.sha256(b"another token").digest())


@pytest.fixture
def server():
    context = zmq.Context.instance()
    s = server_socket(context, zmq.ROUTER, KEYS, max_bytes=4096)
    port = s.bind_to_random_port("tcp://127.0.0.1")
    yield s, port
    s.close()


def dealer(keys, port, max_bytes=4096):
    d = client_socket(zmq.Context.instance(), zmq.DEALER, keys, max_bytes)
    d.connect(f"tcp://127.0.0.1:{port}")
    return d


def heard(s, wait_ms=1500):
    return s.recv_multipart() if s.poll(wait_ms) else None


def test_a_token_holder_gets_through_both_ways(server):
    s, port = server
    d = dealer(KEYS, port)
    d.send_multipart([b"hello"])
    frames = heard(s)
    assert frames is not None and frames[1] == b"hello"
    s.send_multipart([frames[0], b"back"])
    assert d.poll(1500) and d.recv_multipart() == [b"back"]
    d.close()


def test_a_client_with_another_token_is_not_heard(server):
    s, port = server
    d = dealer(OTHER, port)
    send_without_waiting(d, [b"inject"])
    assert heard(s, 800) is None
    d.close()


def test_a_client_that_knows_the_server_key_but_not_the_token_is_refused(server):
    """The server's public key is no secret: the ZAP handler admits only the token's client key."""
    s, port = server
    public, secret = zmq.curve_keypair()
    d = zmq.Context.instance().socket(zmq.DEALER)
    d.setsockopt(zmq.LINGER, 0)
    d.setsockopt(zmq.CURVE_SERVERKEY, KEYS.server_public)
    d.setsockopt(zmq.CURVE_SECRETKEY, secret)
    d.setsockopt(zmq.CURVE_PUBLICKEY, public)
    d.connect(f"tcp://127.0.0.1:{port}")
    send_without_waiting(d, [b"inject"])
    assert heard(s, 800) is None
    d.close()


def test_a_client_without_curve_is_not_heard(server):
    s, port = server
    d = zmq.Context.instance().socket(zmq.DEALER)
    d.setsockopt(zmq.LINGER, 0)
    d.connect(f"tcp://127.0.0.1:{port}")
    send_without_waiting(d, [b"inject"])
    assert heard(s, 800) is None
    d.close()


def test_a_server_with_another_token_is_not_heard():
    """A client holding the token talks only to a server holding it."""
    context = zmq.Context.instance()
    s = server_socket(context, zmq.ROUTER, OTHER, max_bytes=4096)
    port = s.bind_to_random_port("tcp://127.0.0.1")
    d = dealer(KEYS, port)
    send_without_waiting(d, [b"result"])
    assert heard(s, 800) is None
    d.close()
    s.close()


def test_an_oversize_frame_is_dropped_and_the_server_goes_on(server):
    s, port = server
    d = dealer(KEYS, port)
    d.send_multipart([b"x" * 5000])
    assert heard(s, 800) is None
    d.close()
    d = dealer(KEYS, port)
    d.send_multipart([b"small"])
    frames = heard(s)
    assert frames is not None and frames[1] == b"small"
    d.close()


def test_a_raw_huge_frame_before_the_handshake_is_not_read(server):
    s, port = server
    raw = pysocket.create_connection(("127.0.0.1", port))
    # a ZMTP 3 greeting, then a 200 MB long-frame header and some of its body
    raw.sendall(b"\xff" + b"\0" * 8 + b"\x7f\x03\x00" + b"NULL".ljust(20, b"\0") + b"\0" * 32)
    try:
        raw.sendall(b"\x02" + struct.pack(">Q", 200 << 20) + b"\0" * 65536)
    except OSError:
        pass  # the server already closed the connection
    raw.close()
    assert heard(s, 500) is None
    d = dealer(KEYS, port)
    d.send_multipart([b"still here"])
    frames = heard(s)
    assert frames is not None and frames[1] == b"still here"
    d.close()


@pytest.mark.parametrize("run, direction, session", [
    (b"run-B", "worker>coordinator", b"worker-1"),  # another run
    (b"run-A", "coordinator>worker", b"worker-1"),  # another direction
    (b"run-A", "worker>coordinator", b"worker-2"),  # another session
])
def test_a_sealed_message_is_refused_in_another_run_direction_or_session(run, direction, session):
    body = b"\x02" + b"\0" * 63
    tag = seal(message_key(KEYS, b"run-A", "worker>coordinator"), b"worker-1", body)
    assert opened(message_key(KEYS, b"run-A", "worker>coordinator"), b"worker-1", tag, body)
    assert not opened(message_key(KEYS, run, direction), session, tag, body)


def test_a_changed_body_or_short_tag_is_refused():
    key = message_key(KEYS, b"run-A", "worker>coordinator")
    body = b"\x02" * 64
    tag = seal(key, b"s", body)
    assert not opened(key, b"s", tag, body[:-1] + b"\x03")
    assert not opened(key, b"s", tag[:-1], body)
    assert not opened(message_key(OTHER, b"run-A", "worker>coordinator"), b"s", tag, body)


def test_both_sides_derive_the_same_keys_and_labels_differ():
    again = derive_keys(hashlib.sha256(b"the run's token").digest())
    assert again == KEYS
    assert len({KEYS.server_secret, KEYS.client_secret, KEYS.server_public, KEYS.client_public}) == 4
    assert KEYS.server_public != OTHER.server_public
