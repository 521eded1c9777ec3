"""The hostile peers of the gossip fault cases (bench/faults/gossip.py,
bench/faults/gossip_hostile.py): a process that holds the token (or not) and speaks to an island on
a connection of its own, and a TCP relay that forwards, and records, every byte between two islands."""

import os
import socket
import threading
import time

import numpy as np
import zmq

from bench.faults.coordinator_cluster import TOKEN
from eggnog import code_version, source_digest
from eggnog.runtime.auth import config_hash, token_key
from eggnog.runtime.rundir import config_from, read_config
from eggnog.runtime.secure_socket import client_socket, derive_keys, message_key, seal
from eggnog.training.gossip import tcp_wire as wire
from eggnog.training.gossip.tcp import TO_INITIATOR, TO_RESPONDER
from eggnog.training.mingru.island import GossipRunConfig

INTRUDER = 99  # the island number the intruder claims


class Intruder:
    """A CURVE client of island `address` with `token`; its messages sealed for `run_id` and its session."""

    def __init__(self, address, token, run_id, config_hash, max_bytes=1 << 26):
        self.address, self.run_id, self.config_hash = address, run_id, config_hash
        self.keys = derive_keys(token_key(environ={"EGGNOG_TOKEN": token}))
        self.session = b"i" + os.urandom(15)
        self.socket = client_socket(zmq.Context.instance(), zmq.DEALER, self.keys, max_bytes)
        self.socket.setsockopt(zmq.ROUTING_ID, self.session)
        self.socket.connect(f"tcp://{address}")

    def record(self, **changes):
        base = {"island": INTRUDER, "address": "127.0.0.1:9", "hash": self.config_hash, "version": code_version(),
                "run": self.run_id, "to": self.address, "time": time.time(), "fitness": 1e9}
        return {k: v for k, v in {**base, **changes}.items() if v is not DROP}

    def offer(self, exchange, **changes):
        return wire.encode(wire.OFFER, exchange, self.record(**{"merge": "clonal", "with_state": True, **changes}))

    def model(self, exchange, values, scalars, **changes):
        return wire.encode(wire.MODEL, exchange, self.record(**{"echo": None, **changes}), np.asarray(scalars),
                           np.asarray(values, np.float32))

    def sealed(self, body, session=None, run_id=None, direction=TO_RESPONDER):
        key = message_key(self.keys, (self.run_id if run_id is None else run_id).encode(), direction)
        return [seal(key, self.session if session is None else session, body), body]

    def ask(self, frames, timeout_s=20):
        """Send; the answer (None: none came in time)."""
        self.socket.send_multipart(frames)
        if self.socket.poll(int(timeout_s * 1000)):
            return self.socket.recv_multipart()
        return None

    def close(self):
        self.socket.close()


DROP = object()  # a field to leave out
WRONG_DIRECTION = TO_INITIATOR


def intruder_for(cluster, number, token=TOKEN):
    """An intruder speaking to island `number` of a GossipCluster, with the run's id and configuration."""
    address = cluster.address(number)  # registered: config.json and run_id are written
    source_digest.cache_clear()  # the sources as the islands read them (not at this process's start)
    cfg = config_from(GossipRunConfig, read_config(cluster.run_dir), {})
    run_id = (cluster.run_dir / "run_id").read_text().strip()
    return Intruder(address, token, run_id, config_hash(cfg, cfg.open_data(cfg.data)))


def model_layout(cluster, islands, timeout=120):
    """(values, scalars) of a model on the wire, from the first model an island sends."""
    found = []

    def sent():
        found.extend(e for n in islands for e in cluster.events(n) if e["event"] == "mix_send")
        return bool(found)
    cluster.wait_until(sent, timeout)
    return found[0]["values"], found[0]["scalars"]


def describe_answer(frames):
    if frames is None:
        return "no answer"
    if len(frames) == 2 and frames[0] == b"":
        return "refused"
    return wire.KINDS.get(int(np.frombuffer(frames[1][:8], np.int64)[0]), "unknown")


class Relay:
    """Listens on 127.0.0.1 and forwards each connection to `target`, recording what the client sent."""

    def __init__(self, target):
        host, _, port = target.rpartition(":")
        self.target = (host, int(port))
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.address = f"127.0.0.1:{self.listener.getsockname()[1]}"
        self.captured = []  # bytes each client sent, one bytearray per connection
        self.answered = 0  # bytes the target sent back
        threading.Thread(target=self.accept, daemon=True).start()

    def accept(self):
        while True:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            server = socket.create_connection(self.target)
            record = bytearray()
            self.captured.append(record)
            threading.Thread(target=self.pump, args=(client, server, record), daemon=True).start()
            threading.Thread(target=self.pump, args=(server, client, None), daemon=True).start()

    def pump(self, source, sink, record):
        try:
            while chunk := source.recv(65536):
                if record is not None:
                    record += chunk
                else:
                    self.answered += len(chunk)
                sink.sendall(chunk)
        except OSError:
            pass
        finally:
            for s in (source, sink):
                try:
                    s.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass

    def close(self):
        self.listener.close()


def replay_raw(target, data, wait_s=1.0):
    """Send captured bytes on a new TCP connection to `target`; the bytes answered."""
    host, _, port = target.rpartition(":")
    answered = 0
    with socket.create_connection((host, int(port)), timeout=wait_s) as s:
        try:
            s.sendall(bytes(data))
            while chunk := s.recv(65536):
                answered += len(chunk)
        except OSError:  # closed on us, or nothing more in time
            pass
    return answered


def junk_frames(target, megabytes, count):
    """`count` connections that each push `megabytes` of junk; the bytes the island took before closing."""
    host, _, port = target.rpartition(":")
    junk, taken = b"\xff" * (megabytes << 20), 0
    for _ in range(count):
        with socket.create_connection((host, int(port)), timeout=10) as s:
            view = memoryview(junk)
            try:
                while view:
                    sent = s.send(view[:1 << 20])
                    taken, view = taken + sent, view[sent:]
            except OSError:
                pass
    return taken


def rss_mb(pid):
    """A process's resident memory in MB (Linux)."""
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return round(int(line.split()[1]) / 1024, 1)
    return None
