"""A worker's side over TCP (ZeroMQ DEALER, CurveZMQ): admission, heartbeats, answers with a time limit.

Admission: HELLO on a connection of its own (a frame cap for admission only) is answered with WELCOME,
the run's configuration and run id; the worker builds that configuration and opens the connection it
works on, its frame cap the run's largest legal message, with a fresh random routing id (its session),
and sends READY. Every message is sealed for the run, its direction and this connection
(runtime/secure_socket.py); an answer that is not is refused. A thread beats on a socket of its own
every fifth of the heartbeat timeout, so the coordinator hears from the worker while it computes on the
GPU (a CPU kernel call holds the interpreter: the timeout must exceed one chunk's evaluation there). An
answer that does not come within the heartbeat timeout, a connection the coordinator closed (killed: its
replacement may finish a short run before the timeout), or a HELLO_AGAIN (a coordinator restarted by
--resume) raises LinkLost: the worker keeps its replica and is admitted again. A handshake the
coordinator refuses (another token) raises Refused."""

import json
import threading
import time
import uuid

import numpy as np

from eggnog import code_version
from eggnog.evolution.coordinator import messages, wire
from eggnog.evolution.coordinator.tcp import BEAT, DOWN, UP
from eggnog.runtime.errors import BadInput
from eggnog.runtime.secure_socket import client_socket, derive_keys, message_key, opened, seal

ADMISSION_BYTES = (1 << 20) + messages.SLACK_BYTES  # the largest WELCOME
BEAT_BYTES = 4096
ADMISSION_KINDS = (wire.WELCOME, wire.REFUSE, wire.STOP, wire.HELLO_AGAIN)
# the monitor's events (zmq is imported where used): EVENT_HANDSHAKE_FAILED_NO_DETAIL, _PROTOCOL and _AUTH;
# EVENT_DISCONNECTED
HANDSHAKE_FAILED, DISCONNECTED = 0x0800 | 0x2000 | 0x4000, 0x0200


HANDSHAKE_REFUSED = "the coordinator at {} refused this worker's encrypted handshake: its token differs from the " \
    "coordinator's"


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
        """key: the token's key (runtime.auth.token_key)."""
        self.address, self.curve, self.timeout = address, derive_keys(key), heartbeat_timeout
        self.admit_keys = (message_key(self.curve, b"", UP), message_key(self.curve, b"", DOWN))
        self.run_id = self.run_keys = None
        self.label = uuid.uuid4().hex  # this worker's name in HELLO and READY, whatever its connection
        self.socket = self.beat = self.monitor = None

    # ---- connection ----------------------------------------------------------------------------
    def join(self, reconnect_timeout):
        """Admission's first half: HELLO until a WELCOME (the run's configuration, returned) or a
        refusal (Refused), trying for `reconnect_timeout` seconds (then BadInput)."""
        deadline = time.perf_counter() + reconnect_timeout
        while True:
            self.open(ADMISSION_BYTES)
            try:
                hello = json.dumps({"worker": self.label, "version": code_version()}).encode()
                wait = min(self.timeout, max(deadline - time.perf_counter(), 0.1))
                reply = self.request(wire.encode([wire.HELLO], np.frombuffer(hello, np.uint8)), wait)
            except LinkLost:
                if time.perf_counter() >= deadline:
                    self.close()
                    raise BadInput(f"no coordinator answered at {self.address} for {reconnect_timeout:g} s "
                                   "(--reconnect-timeout)") from None
                continue
            what = messages.kind_of(reply)
            if what == wire.STOP:
                raise RunOver(messages.parse_stop(reply))
            try:
                welcome = messages.parse_welcome(reply)
            except wire.Malformed as e:
                raise LinkLost(f"the coordinator answered HELLO with {e}") from None
            self.run_id = bytes.fromhex(welcome["run_id"])
            self.run_keys = tuple(message_key(self.curve, self.run_id, d) for d in (UP, DOWN, BEAT))
            self.close()
            return welcome

    def ready(self, config_hash, max_bytes):
        """Admission's second half, on the connection the worker then works on (frames up to `max_bytes`):
        the hash of the configuration built; Refused when it differs."""
        self.open(max_bytes, beat=True)
        said = json.dumps({"worker": self.label, "version": code_version(), "config_hash": config_hash})
        reply = self.request(wire.encode([wire.READY], np.frombuffer(said.encode(), np.uint8)))
        what = messages.kind_of(reply)
        if what == wire.STOP:
            raise RunOver(messages.parse_stop(reply))
        if what != wire.WAIT:
            raise LinkLost(f"the coordinator answered READY with message kind {what}")
        messages.parse_wait(reply)

    def open(self, max_bytes, beat=False):
        import zmq

        self.close()
        self.name = uuid.uuid4().hex.encode()
        context = zmq.Context.instance()
        self.socket = client_socket(context, zmq.DEALER, self.curve, max_bytes)
        self.socket.setsockopt(zmq.ROUTING_ID, self.name)
        self.monitor = self.socket.get_monitor_socket(events=HANDSHAKE_FAILED | DISCONNECTED)
        self.refused = self.dropped = self.answered = False
        self.socket.connect(f"tcp://{self.address}")
        if beat:
            self.beat = Heartbeat(context, self.address, self.curve, self.run_keys[2], self.name, self.timeout / 5)

    def close(self):
        if self.beat is not None:
            self.beat.stop()
        if self.socket is not None:
            self.socket.disable_monitor()
            self.monitor.close()
            self.socket.close()
        self.socket = self.beat = self.monitor = None

    def read_events(self):
        """Take the monitor's reports: a failed handshake (another token) or a dropped connection."""
        from zmq.utils.monitor import recv_monitor_message

        while self.monitor is not None and self.monitor.poll(0):
            event = recv_monitor_message(self.monitor)["event"]
            self.refused |= bool(event & HANDSHAKE_FAILED)
            self.dropped |= event == DISCONNECTED

    def handshake_failed(self):
        self.read_events()
        return self.refused

    # ---- messages ------------------------------------------------------------------------------
    def send(self, message):
        import zmq

        body = np.ascontiguousarray(message).tobytes()
        key = self.run_keys[0] if messages.kind_of(message) != wire.HELLO else self.admit_keys[0]
        # a failed handshake ends the connection, but its pipe is torn down after the monitor reports it: a
        # send in between would be queued and lost, so the report is read first
        if self.handshake_failed():
            raise Refused(HANDSHAKE_REFUSED.format(self.address))
        try:
            # never blocking: once the connection is gone, a send would wait for ever
            self.socket.send_multipart([seal(key, self.name, body), body], flags=zmq.NOBLOCK)
        except zmq.Again:
            if self.handshake_failed():
                raise Refused(HANDSHAKE_REFUSED.format(self.address)) from None
            raise LinkLost(f"no connection to the coordinator at {self.address}") from None

    def request(self, message, wait=None):
        """Send `message` and return the coordinator's answer (LinkLost after `wait` seconds, by default
        the heartbeat timeout)."""
        self.send(message)
        wait = self.timeout if wait is None else wait
        if not self.answer_or_drop(wait):
            if self.dropped and self.answered:  # a coordinator killed: ask again at once, not after the wait
                raise LinkLost(f"the coordinator at {self.address} closed the connection")
            if self.handshake_failed():
                raise Refused(HANDSHAKE_REFUSED.format(self.address))
            raise LinkLost(f"no answer from the coordinator at {self.address} for {wait:g} s")
        frames = self.socket.recv_multipart()
        self.answered = True
        body = frames[-1]
        reply = np.frombuffer(body, np.uint8).copy()  # writable: a job's states are updated in place
        try:
            what = messages.kind_of(reply)
        except wire.Malformed as e:
            raise LinkLost(f"an unreadable answer ({e})") from None
        keys = [self.run_keys[1]] if self.run_keys else []
        keys += [self.admit_keys[1]] if what in ADMISSION_KINDS else []
        if len(frames) != 2 or not any(opened(k, self.name, frames[0], body) for k in keys):
            raise LinkLost("an answer not sealed for this run and connection")
        if what == wire.REFUSE:
            raise Refused(f"the coordinator at {self.address} refused this worker: {messages.parse_refuse(reply)}")
        if what == wire.HELLO_AGAIN:
            raise LinkLost("the coordinator restarted")
        return reply

    def answer_or_drop(self, wait):
        """Whether an answer came within `wait` seconds; False as soon as the monitor reports a connection
        that has answered before dropped. A connection that never answered is left to zmq's own reconnects
        (a handshake cut short by a coordinator still starting), and judged when the wait is over."""
        import zmq

        poller = zmq.Poller()
        poller.register(self.socket, zmq.POLLIN)
        poller.register(self.monitor, zmq.POLLIN)
        deadline = time.perf_counter() + wait
        while (left := deadline - time.perf_counter()) > 0:
            ready = dict(poller.poll(int(left * 1000) + 1))
            if self.socket in ready:
                return True
            self.read_events()
            if self.dropped and self.answered:
                return False
        return False


class Heartbeat:
    """A thread that sends HEARTBEAT + the worker's routing id every `interval` seconds until stopped."""

    def __init__(self, context, address, curve, key, name, interval):
        import zmq

        self.socket = client_socket(context, zmq.DEALER, curve, BEAT_BYTES)
        self.socket.connect(f"tcp://{address}")
        body = wire.encode([wire.HEARTBEAT], np.frombuffer(name, np.uint8)).tobytes()
        self.frames = [seal(key, name, body), body]
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
