"""A worker's side over TCP (ZeroMQ DEALER): admission, heartbeats, answers with a time limit.

The connection's routing id is a fresh random name per admission. A thread beats on a socket of its
own every fifth of the heartbeat timeout, so the coordinator hears from the worker while it computes
on the GPU (a CPU kernel call holds the interpreter: the timeout must exceed one chunk's evaluation
there). An answer that does not come within the heartbeat timeout, or a
HELLO_AGAIN (a coordinator restarted by --resume), raises LinkLost: the worker keeps its replica and
is admitted again."""

import json
import threading
import time
import uuid

import numpy as np

from eggnog import code_version
from eggnog.evolution.coordinator import wire
from eggnog.runtime.auth import tag, tag_matches
from eggnog.runtime.errors import BadInput


class LinkLost(RuntimeError):
    """No answer from the coordinator in time, or it no longer knows this worker."""


class Refused(BadInput):
    pass


class RunOver(Exception):
    """The coordinator answered admission with STOP: the run has ended (`status` is its exit status)."""

    def __init__(self, status):
        super().__init__(f"the run has ended (status {status})")
        self.status = status


class TcpWorkerLink:
    elastic = True

    def __init__(self, address, key, heartbeat_timeout):
        self.address, self.key, self.timeout = address, key, heartbeat_timeout
        self.socket = self.beat = None

    # ---- connection ----------------------------------------------------------------------------
    def join(self, reconnect_timeout):
        """Admission's first half: HELLO until a WELCOME (the run's configuration, returned) or a
        refusal (Refused), trying for `reconnect_timeout` seconds (then BadInput)."""
        deadline = time.perf_counter() + reconnect_timeout
        while True:
            self.open()
            try:
                hello = json.dumps({"worker": self.name.decode(), "version": code_version()}).encode()
                wait = min(self.timeout, max(deadline - time.perf_counter(), 0.1))
                reply = self.request(wire.encode([wire.HELLO], np.frombuffer(hello, np.uint8)), wait)
            except LinkLost:
                if time.perf_counter() >= deadline:
                    self.close()
                    raise BadInput(f"no coordinator answered at {self.address} for {reconnect_timeout:g} s "
                                   "(--reconnect-timeout)") from None
                continue
            if wire.kind(reply) == wire.STOP:
                raise RunOver(wire.header(reply, 2)[1])
            if wire.kind(reply) != wire.WELCOME:
                raise RuntimeError(f"the coordinator answered HELLO with message kind {wire.kind(reply)}")
            return json.loads(bytes(wire.payload(reply, 1)).decode())

    def ready(self, config_hash):
        """Admission's second half: the hash of the configuration built; Refused when it differs."""
        reply = self.request(wire.encode([wire.READY], np.frombuffer(config_hash.encode(), np.uint8)))
        if wire.kind(reply) == wire.STOP:
            raise RunOver(wire.header(reply, 2)[1])
        if wire.kind(reply) != wire.WAIT:
            raise RuntimeError(f"the coordinator answered READY with message kind {wire.kind(reply)}")

    def open(self):
        import zmq

        self.close()
        self.name = uuid.uuid4().hex.encode()
        context = zmq.Context.instance()
        self.socket = context.socket(zmq.DEALER)
        self.socket.setsockopt(zmq.LINGER, 0)
        self.socket.setsockopt(zmq.ROUTING_ID, self.name)
        self.socket.connect(f"tcp://{self.address}")
        self.beat = Heartbeat(context, self.address, self.key, self.name, self.timeout / 5)

    def close(self):
        if self.beat is not None:
            self.beat.stop()
        if self.socket is not None:
            self.socket.close()
        self.socket = self.beat = None

    # ---- messages ------------------------------------------------------------------------------
    def send(self, message):
        body = np.ascontiguousarray(message).tobytes()
        self.socket.send_multipart([tag(self.key, body), body])

    def request(self, message, wait=None):
        """Send `message` and return the coordinator's answer (LinkLost after `wait` seconds, by default
        the heartbeat timeout)."""
        self.send(message)
        wait = self.timeout if wait is None else wait
        if not self.socket.poll(int(wait * 1000)):
            raise LinkLost(f"no answer from the coordinator at {self.address} for {wait:g} s")
        frames = self.socket.recv_multipart()
        body = frames[-1]
        reply = np.frombuffer(body, np.uint8).copy()  # writable: a job's states are updated in place
        if len(frames) == 2 and frames[0] == b"" and wire.kind(reply) == wire.REFUSE:
            raise Refused(f"the coordinator at {self.address} refused this worker: "
                          f"{bytes(wire.payload(reply, 1)).decode(errors='replace')}")
        if len(frames) != 2 or not tag_matches(self.key, frames[0], body):
            raise LinkLost("an answer without the token's tag")
        if wire.kind(reply) == wire.HELLO_AGAIN:
            raise LinkLost("the coordinator restarted")
        return reply


class Heartbeat:
    """A thread that sends HEARTBEAT + the worker's name every `interval` seconds until stopped."""

    def __init__(self, context, address, key, name, interval):
        import zmq

        self.socket = context.socket(zmq.DEALER)
        self.socket.setsockopt(zmq.LINGER, 0)
        self.socket.connect(f"tcp://{address}")
        body = wire.encode([wire.HEARTBEAT], np.frombuffer(name, np.uint8)).tobytes()
        self.frames = [tag(key, body), body]
        self.interval, self.stopping = interval, threading.Event()
        self.thread = threading.Thread(target=self.run, daemon=True)
        self.thread.start()

    def run(self):
        import zmq

        while not self.stopping.wait(self.interval):
            try:
                self.socket.send_multipart(self.frames, flags=zmq.NOBLOCK)
            except zmq.Again:  # nobody listening: the coordinator is gone, the main loop will notice
                pass
        self.socket.close()

    def stop(self):
        self.stopping.set()
        self.thread.join()
