"""What a hostile or broken peer of a TCP coordinator does, by hand: a token holder speaking the protocol
with messages of its own making (`TokenHolder`), and an attacker on the network who records a real
worker's connections and replays their bytes (`CaptureProxy`, `replay`). bench/faults/tcp_hostile.py
drives them against a running coordinator."""

import json
import socket as pysocket
import threading
import time

import numpy as np
import zmq

from eggnog import code_version
from eggnog.evolution.coordinator import wire
from eggnog.evolution.coordinator.tcp import UP
from eggnog.runtime.auth import token_key
from eggnog.runtime.secure_socket import client_socket, derive_keys, message_key, seal

CAP_BYTES = 1 << 28


class TokenHolder:
    """A peer that holds the token: it passes the handshake and seals what it likes."""

    def __init__(self, address, token):
        self.address, self.keys = address, derive_keys(token_key(environ={"EGGNOG_TOKEN": token}))
        self.sockets = []

    def connect(self, name):
        s = client_socket(zmq.Context.instance(), zmq.DEALER, self.keys, CAP_BYTES)
        s.setsockopt(zmq.ROUTING_ID, name)
        s.connect(f"tcp://{self.address}")
        self.sockets.append(s)
        return s

    def key(self, run_id, direction=UP):
        return message_key(self.keys, run_id, direction)

    def send(self, s, session, message, run_id, direction=UP):
        body = np.ascontiguousarray(message).tobytes()
        s.send_multipart([seal(self.key(run_id, direction), session, body), body])

    @staticmethod
    def answer(s, wait_s=3.0):
        """The kind of the next answer, or None when none comes."""
        if not s.poll(int(wait_s * 1000)):
            return None
        return wire.kind(np.frombuffer(s.recv_multipart()[-1], np.uint8))

    def welcome(self):
        """The run's WELCOME (configuration and run id), asked on a connection of its own."""
        s = self.connect(b"hostile-hello")
        hello = json.dumps({"worker": "hostile", "version": code_version()}).encode()
        self.send(s, b"hostile-hello", wire.encode([wire.HELLO], np.frombuffer(hello, np.uint8)), b"")
        if not s.poll(5000):
            raise RuntimeError("no answer to HELLO")
        reply = np.frombuffer(s.recv_multipart()[-1], np.uint8)
        if wire.kind(reply) != wire.WELCOME:
            raise RuntimeError(f"HELLO answered with kind {wire.kind(reply)}: {bytes(reply[8:])[:200]!r}")
        return json.loads(bytes(reply[8:]).decode())

    def admitted(self, name, run_id, config_hash):
        """A connection admitted as a worker (READY answered with WAIT)."""
        s = self.connect(name)
        said = json.dumps({"worker": name.decode(), "version": code_version(), "config_hash": config_hash})
        self.send(s, name, wire.encode([wire.READY], np.frombuffer(said.encode(), np.uint8)), run_id)
        kind = self.answer(s, 5.0)
        if kind != wire.WAIT:
            raise RuntimeError(f"READY answered with {kind}")
        return s

    def close(self):
        for s in self.sockets:
            s.close()
        self.sockets = []


class CaptureProxy:
    """Forwards each TCP connection made to `port` to the coordinator, recording every connection's bytes
    from the client side: what an attacker on the path sees (CurveZMQ: ciphertext)."""

    def __init__(self, target_port):
        self.target = ("127.0.0.1", target_port)
        self.server = pysocket.create_server(("127.0.0.1", 0))
        self.port = self.server.getsockname()[1]
        self.captures, self.stopping = [], False
        threading.Thread(target=self.accept, daemon=True).start()

    def accept(self):
        while not self.stopping:
            try:
                client, _ = self.server.accept()
            except OSError:
                return
            try:
                upstream = pysocket.create_connection(self.target)
            except OSError:  # the coordinator not listening yet: the client tries again
                client.close()
                continue
            record = bytearray()
            self.captures.append(record)
            threading.Thread(target=pump, args=(client, upstream, record), daemon=True).start()
            threading.Thread(target=pump, args=(upstream, client, None), daemon=True).start()

    def close(self):
        self.stopping = True
        self.server.close()


def pump(source, dest, record):
    try:
        while True:
            data = source.recv(65536)
            if not data:
                break
            if record is not None:
                record += data
            dest.sendall(data)
    except OSError:
        pass
    for s in (source, dest):
        try:
            s.shutdown(pysocket.SHUT_RDWR)
        except OSError:
            pass


def replay(port, data, read_s=0.5):
    """Send recorded bytes on a new connection; the bytes the coordinator sends back."""
    got = bytearray()
    with pysocket.create_connection(("127.0.0.1", port)) as s:
        s.settimeout(0.05)
        try:
            s.sendall(bytes(data))
        except OSError:
            return bytes(got)
        deadline = time.monotonic() + read_s
        while time.monotonic() < deadline:
            try:
                chunk = s.recv(65536)
            except TimeoutError:
                continue
            except OSError:
                break
            if not chunk:
                break
            got += chunk
    return bytes(got)


def raw_huge_frame(port, size):
    """A ZMTP greeting (NULL mechanism, no token) and the header of one `size`-byte frame, then as much of
    its body as the coordinator reads: the bytes sent."""
    sent = 0
    with pysocket.create_connection(("127.0.0.1", port)) as s:
        try:
            s.sendall(b"\xff" + b"\0" * 8 + b"\x7f\x03\x00" + b"NULL".ljust(20, b"\0") + b"\0" * 32)
            s.sendall(b"\x02" + size.to_bytes(8, "big"))
            block = bytes(1 << 20)
            while sent < size:
                s.sendall(block)
                sent += len(block)
        except OSError:
            pass
    return sent
