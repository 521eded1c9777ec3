"""The coordinator's side over TCP (ZeroMQ ROUTER): workers connect, leave and come back while the
run goes on.

A worker is admitted in two messages: HELLO (its code version) is answered with WELCOME (the run's
configuration), READY (the hash of the configuration it built, with its corpus) makes it a worker.
Every message must carry the token's tag. Anything else (a wrong token, a corrupted or truncated
message, another version or configuration, a message before admission) is refused with one line in
the coordinator's log and events.jsonl, and the run goes on. A worker that sends nothing, heartbeats
included, for --heartbeat-timeout seconds is lost: `lost()` hands it to the coordinator, which puts
its chunks back in the queue."""

import json
import time

import numpy as np

from eggnog import code_version
from eggnog.evolution.coordinator import wire
from eggnog.runtime.auth import UNSIGNED, tag, tag_matches
from eggnog.runtime.errors import BadInput

MAX_LOGGED_REFUSALS = 100  # a flood of junk must not fill the log


def bind(listen):
    """A ROUTER socket bound to HOST:PORT; BadInput when the address cannot be taken."""
    import zmq

    context = zmq.Context.instance()
    socket = context.socket(zmq.ROUTER)
    socket.setsockopt(zmq.LINGER, 0)
    try:
        socket.bind(f"tcp://{listen}")
    except zmq.ZMQError as e:
        socket.close()
        raise BadInput(f"cannot listen on {listen} ({e.strerror})") from None
    return socket


class TcpCoordinatorLink:
    elastic = True

    def __init__(self, socket, key, welcome, config_hash, heartbeat_timeout, events=None):
        """welcome: the JSON-able configuration sent to each new worker; config_hash: what its READY
        must say; events: a JsonLog for joins, losses and refusals."""
        self.socket, self.key, self.heartbeat_timeout, self.events = socket, key, heartbeat_timeout, events
        self.welcome = json.dumps(welcome).encode()
        self.config_hash = config_hash
        self.workers = {}  # routing id -> {"name", "last_seen", "ready"}
        self.refusals, self.stop_deadline, self.address = 0, None, None
        self.stop_status = None  # set when the run has ended: newcomers are told to stop

    # ---- what the coordinator calls ------------------------------------------------------------
    def receive(self, timeout):
        """(message, routing id) of the next message of an admitted worker, or None after `timeout`."""
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
        self.socket.send_multipart([peer, tag(self.key, body), body])

    def lost(self):
        now = time.perf_counter()
        gone = [p for p, w in self.workers.items() if now - w["last_seen"] > self.heartbeat_timeout]
        for peer in gone:
            self.address = self.workers[peer]["address"]
            self.note("lost", peer, f"no message for {self.heartbeat_timeout:g} s")
            del self.workers[peer]
        return gone

    def refuse(self, peer, reason):
        self.reject(peer, reason)
        self.workers.pop(peer, None)

    def stopped_worker(self, peer):
        self.workers.pop(peer, None)

    def closing(self, status):
        """The run has ended with `status`: from now on a HELLO or READY is answered with STOP."""
        self.stop_status = status

    def waiting(self):
        """True while a worker admitted or being admitted has not been told to stop, for at most one
        heartbeat timeout after the first call (a worker that never asks again is gone)."""
        if self.stop_deadline is None:
            self.stop_deadline = time.perf_counter() + self.heartbeat_timeout
        return bool(self.workers) and time.perf_counter() < self.stop_deadline

    def close(self):
        self.socket.close()

    # ---- admission -----------------------------------------------------------------------------
    def admit(self, frames):
        peer = frames[0].bytes
        self.address = frames[-1].get("Peer-Address")  # for the log lines of this message
        if len(frames) != 3:
            return self.reject(peer, f"a message of {len(frames) - 1} frames, not 2")
        body = frames[2].bytes
        if not tag_matches(self.key, frames[1].bytes, body):
            return self.reject(peer, "wrong token or a corrupted message")
        message = np.frombuffer(body, np.uint8)
        try:
            what = wire.kind(message)
        except wire.Malformed as e:
            return self.reject(peer, str(e))
        worker = self.workers.get(peer)
        if what == wire.HEARTBEAT:
            beating = self.workers.get(body[8:])
            if beating is not None:
                beating["last_seen"] = time.perf_counter()
            return None
        if self.stop_status is not None and what in (wire.HELLO, wire.READY):  # joining a run that has ended
            self.workers.pop(peer, None)  # before the answer: the worker may look at the run once it has it
            self.send(peer, wire.encode([wire.STOP, self.stop_status]))
            return None
        if what == wire.HELLO:
            return self.hello(peer, message)
        if worker is None:
            if what == wire.REQUEST:  # a worker of an earlier coordinator process: admit it again
                self.send(peer, wire.encode([wire.HELLO_AGAIN]))
            return None
        worker["last_seen"] = time.perf_counter()
        if what == wire.READY:
            return self.ready(peer, message)
        if what == wire.LEAVE:
            self.note("left", peer, "stopped by a signal between jobs")
            del self.workers[peer]
            return None
        if not worker["ready"]:
            return self.refuse(peer, "a message before its configuration was checked")
        return message, peer

    def hello(self, peer, message):
        try:
            said = json.loads(bytes(wire.payload(message, 1)).decode())
            name, version = str(said["worker"]), str(said["version"])
        except (ValueError, KeyError, TypeError):
            return self.reject(peer, "an unreadable HELLO")
        if version != code_version():
            return self.reject(peer, f"eggnog {version} differs from the coordinator's {code_version()}")
        self.workers[peer] = {"name": name, "last_seen": time.perf_counter(), "ready": False,
                              "address": self.address}
        self.send(peer, wire.encode([wire.WELCOME], np.frombuffer(self.welcome, np.uint8)))
        return None

    def ready(self, peer, message):
        said = bytes(wire.payload(message, 1)).decode(errors="replace")
        if said != self.config_hash:
            return self.refuse(peer, f"its configuration or corpus differs (hash {said[:12]}, the run's "
                                     f"{self.config_hash[:12]})")
        self.workers[peer]["ready"] = True
        self.note("joined", peer, f"{sum(w['ready'] for w in self.workers.values())} workers")
        self.send(peer, wire.encode([wire.WAIT]))
        return None

    def reject(self, peer, reason):
        """Log the refusal; tell the peer, unsigned (it may not hold the token)."""
        self.refusals += 1
        if self.refusals <= MAX_LOGGED_REFUSALS:
            self.note("refused", peer, reason)
        elif self.refusals == MAX_LOGGED_REFUSALS + 1:
            print("coordinator: further refusals are counted, not logged", flush=True)
        self.socket.send_multipart([peer, UNSIGNED, wire.encode([wire.REFUSE], np.frombuffer(reason.encode(),
                                                                                             np.uint8)).tobytes()])
        return None

    def note(self, event, peer, detail):
        name = self.workers.get(peer, {}).get("name") or peer.hex()[:12]
        print(f"coordinator: worker {name} ({self.address}) {event}: {detail}", flush=True)
        if self.events is not None:
            self.events.write(event=event, worker=name, address=self.address, detail=detail,
                              time=round(time.time(), 3))
