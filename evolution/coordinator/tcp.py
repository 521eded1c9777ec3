"""The coordinator's side over TCP (ZeroMQ ROUTER, CurveZMQ): workers connect, leave and come back while
the run goes on.

The socket is a CURVE server keyed from the shared token (runtime/secure_socket.py): a process without
the token cannot finish the handshake, and no frame over the run's largest legal message is read. A
worker is admitted in two messages: HELLO (its code version), on a connection of its own, is answered
with WELCOME (the configuration and run id); READY (the hash of the configuration it built, with its
corpus), on the connection it then works on, makes it a worker. Every message is sealed for the run, its
direction and its connection, and parsed by one function of messages.py; anything else is refused with
one log line (at most MAX_LOGGED_REFUSALS per peer address and kind) and counted, and the run goes on.
A worker silent for --heartbeat-timeout seconds (queued messages read first) is lost: `lost()` hands it
to the coordinator, which requeues its chunks. More in docs/internals.md (evolution/coordinator/tcp.py)."""

import json
import time
from collections import Counter, deque

import numpy as np

from eggnog import code_version
from eggnog.evolution.coordinator import messages, wire
from eggnog.runtime.errors import BadInput
from eggnog.runtime.secure_socket import message_key, opened, seal, server_socket

MAX_LOGGED_REFUSALS = 20  # per peer address and message kind: a flood of junk must not fill the log
DRAIN_LIMIT = 10000  # messages read at most before looking for lost workers
MAX_WELCOMED = 1024  # welcomed workers remembered until their READY
UP, DOWN, BEAT = "worker>coordinator", "coordinator>worker", "heartbeat"


def bind(listen, keys, max_bytes):
    """A CURVE ROUTER socket bound to HOST:PORT; BadInput when the address cannot be taken."""
    import zmq

    socket = server_socket(zmq.Context.instance(), zmq.ROUTER, keys, max_bytes)
    try:
        socket.bind(f"tcp://{listen}")
    except zmq.ZMQError as e:
        socket.close()
        raise BadInput(f"cannot listen on {listen} ({e.strerror})") from None
    return socket


class TcpCoordinatorLink:
    elastic = True

    def __init__(self, socket, keys, welcome, config_hash, heartbeat_timeout, run_id, events=None):
        """welcome: the JSON-able configuration sent to each new worker; config_hash: what its READY
        must say; run_id: 16 bytes naming the run; events: a JsonLog for joins, losses and refusals."""
        self.socket, self.heartbeat_timeout, self.events = socket, heartbeat_timeout, events
        self.welcome = json.dumps({**welcome, "run_id": run_id.hex()}).encode()
        self.config_hash = config_hash
        self.keys = {"admit_up": message_key(keys, b"", UP), "admit_down": message_key(keys, b"", DOWN),
                     "up": message_key(keys, run_id, UP), "down": message_key(keys, run_id, DOWN),
                     "beat": message_key(keys, run_id, BEAT)}
        self.workers = {}  # routing id -> {"name", "last_seen", "address"}
        self.welcomed = {}  # worker name -> when it was welcomed, until its READY: waited for as the run ends
        self.pending, self.dropped = deque(), []  # messages read while draining; workers refused meanwhile
        self.refusals, self.logged = 0, Counter()
        self.stop_deadline, self.address = None, None
        self.stop_status = None  # set when the run has ended: newcomers are told to stop

    # ---- what the coordinator calls ------------------------------------------------------------
    def receive(self, timeout):
        """(message, routing id) of the next message of an admitted worker, or None after `timeout`."""
        if self.pending:
            return self.pending.popleft()
        deadline = time.perf_counter() + timeout
        while True:
            wait_ms = max(0, int((deadline - time.perf_counter()) * 1000))
            if not self.socket.poll(wait_ms):
                return None
            got = self.admit(self.socket.recv_multipart(copy=False))
            if got is not None:
                return got
            if time.perf_counter() >= deadline:
                return None

    def send(self, peer, message):
        body = np.ascontiguousarray(message).tobytes()
        key = self.keys["down"] if peer in self.workers else self.keys["admit_down"]
        self.socket.send_multipart([peer, seal(key, peer, body), body])

    def lost(self):
        """Workers lost or refused since the last call; queued messages (heartbeats) are read first."""
        self.drain()
        now = time.perf_counter()
        gone = [p for p, w in self.workers.items() if now - w["last_seen"] > self.heartbeat_timeout]
        for peer in gone:
            self.address = self.workers[peer]["address"]
            self.note("lost", peer, f"no message for {self.heartbeat_timeout:g} s")
            del self.workers[peer]
        gone += self.dropped
        self.dropped = []
        return gone

    def drain(self):
        for _ in range(DRAIN_LIMIT):
            if not self.socket.poll(0):
                return
            got = self.admit(self.socket.recv_multipart(copy=False))
            if got is not None:
                self.pending.append(got)

    def refuse(self, peer, reason, kind=None):
        self.reject(peer, reason, kind)
        self.workers.pop(peer, None)

    def stopped_worker(self, peer):
        self.workers.pop(peer, None)

    def closing(self, status):
        """The run has ended with `status`: from now on a HELLO or READY is answered with STOP."""
        self.stop_status = status

    def waiting(self):
        """True while an admitted or welcomed worker has not been told to stop, for at most one heartbeat
        timeout after the first call (a worker that never asks again is gone)."""
        if self.stop_deadline is None:
            self.stop_deadline = time.perf_counter() + self.heartbeat_timeout
        return bool(self.workers or self.welcomed) and time.perf_counter() < self.stop_deadline

    def close(self):
        self.socket.close()

    # ---- admission -----------------------------------------------------------------------------
    def admit(self, frames):
        peer = frames[0].bytes
        self.address = frames[-1].get("Peer-Address")  # for the log lines of this message
        if len(frames) != 3:
            if peer in self.workers:
                self.dropped.append(peer)
                return self.refuse(peer, f"a message of {len(frames) - 1} frames, not 2", "frames")
            return self.reject(peer, f"a message of {len(frames) - 1} frames, not 2", "frames")
        received, body = frames[1].bytes, frames[2].bytes
        message = np.frombuffer(body, np.uint8)
        try:
            what = messages.kind_of(message)
            if what == wire.HEARTBEAT:
                return self.heartbeat(messages.parse_heartbeat(message), received, body)
            if what == wire.HELLO:
                if not opened(self.keys["admit_up"], peer, received, body):
                    return self.reject(peer, "a HELLO not sealed with the run's token", what)
                return self.hello(peer, message)
            worker = self.workers.get(peer)
            if worker is None:
                return self.stranger(peer, what, received, body, message)
            if not opened(self.keys["up"], peer, received, body):
                self.dropped.append(peer)
                return self.refuse(peer, "a message not sealed for this run, direction and connection", what)
            worker["last_seen"] = time.perf_counter()
            if what == wire.LEAVE:
                messages.parse_leave(message)
                self.note("left", peer, "stopped by a signal between jobs")
                del self.workers[peer]
                return None
            if what == wire.READY:
                self.dropped.append(peer)
                return self.refuse(peer, "a second READY", what)
            return message, peer
        except wire.Malformed as e:
            if peer in self.workers:
                self.dropped.append(peer)
                return self.refuse(peer, str(e), "malformed")
            return self.reject(peer, str(e), "malformed")

    def heartbeat(self, name, received, body):
        beating = self.workers.get(name)
        if beating is None:  # a worker already lost, or one still building its replica: nothing to renew
            return None
        if not opened(self.keys["beat"], name, received, body):
            return self.reject(name, "a heartbeat not sealed for this run and worker", wire.HEARTBEAT, answer=False)
        beating["last_seen"] = time.perf_counter()
        return None

    def stranger(self, peer, what, received, body, message):
        """A message on a connection not admitted: READY admits it; a REQUEST of a worker this process
        does not know (an earlier coordinator's, or one lost) is told to introduce itself again."""
        if what == wire.READY and opened(self.keys["up"], peer, received, body):
            return self.ready(peer, message)
        if what == wire.REQUEST:
            self.send(peer, wire.encode([wire.HELLO_AGAIN]))
            return None
        return self.reject(peer, "a message before admission, or of another run", what)

    def hello(self, peer, message):
        name, version = messages.parse_hello(message)
        if version != code_version():
            return self.reject(peer, f"eggnog {version} differs from the coordinator's {code_version()}", wire.HELLO)
        if self.stop_status is not None:  # joining a run that has ended
            self.send(peer, wire.encode([wire.STOP, self.stop_status]))
            return None
        if len(self.welcomed) >= MAX_WELCOMED:
            del self.welcomed[min(self.welcomed, key=self.welcomed.get)]
        self.welcomed[name] = time.perf_counter()
        self.send(peer, wire.encode([wire.WELCOME], np.frombuffer(self.welcome, np.uint8)))
        return None

    def ready(self, peer, message):
        name, version, said = messages.parse_ready(message)
        self.welcomed.pop(name, None)
        if version != code_version():
            return self.reject(peer, f"eggnog {version} differs from the coordinator's {code_version()}", wire.READY)
        if said != self.config_hash:
            return self.reject(peer, f"its configuration or corpus differs (hash {said[:12]}, the run's "
                                     f"{self.config_hash[:12]})", wire.READY)
        if self.stop_status is not None:
            self.send(peer, wire.encode([wire.STOP, self.stop_status]))
            return None
        self.workers[peer] = {"name": name, "last_seen": time.perf_counter(), "address": self.address}
        self.note("joined", peer, f"{len(self.workers)} workers")
        self.send(peer, wire.encode([wire.WAIT]))
        return None

    def reject(self, peer, reason, kind=None, answer=True):
        """Count and log the refusal (at most MAX_LOGGED_REFUSALS lines per peer address and kind); tell
        the peer."""
        self.refusals += 1
        host = (self.address or "?").rpartition(":")[0] or self.address
        which = (host, kind)
        self.logged[which] += 1
        if self.logged[which] <= MAX_LOGGED_REFUSALS:
            self.note("refused", peer, reason)
        elif self.logged[which] == MAX_LOGGED_REFUSALS + 1:
            print(f"coordinator: further refusals from {host} of this kind are counted, not logged", flush=True)
        if answer:
            self.send(peer, wire.encode([wire.REFUSE], np.frombuffer(reason.encode(), np.uint8)))
        return None

    def note(self, event, peer, detail):
        name = self.workers.get(peer, {}).get("name") or peer.hex()[:12]
        print(f"coordinator: worker {name} ({self.address}) {event}: {detail}", flush=True)
        if self.events is not None:
            self.events.write(event=event, worker=name, address=self.address, detail=detail,
                              time=round(time.time(), 3))
