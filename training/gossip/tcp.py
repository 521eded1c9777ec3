"""Gossip tournaments peer to peer over TCP (ZeroMQ), as gruboros runs them: no MPI world, no rank 0,
and no island ever waits for another.

More in docs/internals.md (training/gossip/tcp.py)."""

import math
import os
import signal
import time
from dataclasses import dataclass

import numpy as np

from eggnog import code_version
from eggnog.runtime.auth import UNSIGNED
from eggnog.runtime.errors import BadInput
from eggnog.runtime.secure_socket import client_socket, message_key, opened, seal, server_socket
from eggnog.training.gossip import tcp_wire as wire
from eggnog.training.gossip.merge import Snapshot, needs_state
from eggnog.training.gossip.messages import CLOCK_SKEW_S, Expected, Refused, merges_of, read
from eggnog.training.gossip.mpi import json_number, merge_into

GOSSIP_STREAM = 0x7C9  # keeps this transport's draws apart from other uses of --seed
LOGGED_REFUSALS = 10  # refusals logged per peer and kind of message (all are counted)
MESSAGES_PER_BOUNDARY = 256  # a flood on the socket cannot hold an island at one boundary
TO_RESPONDER, TO_INITIATOR = "gossip initiator>responder", "gossip responder>initiator"  # message directions
# Test hooks, read only by tests and bench/faults/__main__.py: drop every message for a while from a step
# ("STEP:SECONDS"), and SIGKILL this island the moment it has handed its N-th model to the socket.
DEAF_VAR, DIE_IN_SEND_VAR = "EGGNOG_TEST_GOSSIP_DEAF", "EGGNOG_TEST_GOSSIP_DIE_IN_SEND"


def bind_router(host, port, keys, max_bytes):
    """(ROUTER socket, the port bound): port 0 takes a free one. A CURVE server that admits only holders
    of the token (`keys`: runtime/secure_socket.py); a connection that sends a frame over max_bytes is
    dropped before the frame is read."""
    import zmq

    socket = server_socket(zmq.Context.instance(), zmq.ROUTER, keys, max_bytes)
    try:
        if port == 0:
            port = socket.bind_to_random_port(f"tcp://{host}")
        else:
            socket.bind(f"tcp://{host}:{port}")
    except zmq.ZMQError as e:
        socket.close()
        raise BadInput(f"cannot listen on {host}:{port} ({e.strerror})") from None
    return socket, port


@dataclass
class Exchange:
    id: int
    address: str  # where the peer listens (initiator side) or "" (responder side)
    peer: int | None  # its island number (None: not known yet)
    merge: str
    with_state: bool
    deadline: float
    nonce: str | None = None  # the responder's, for the MODEL that answers its SEND_ME
    to: str = ""  # the peer's address, which this island's messages of the exchange name


class TcpGossip:
    def __init__(self, cfg, island_number, address, router, book, keys, config_hash, events, timeout, run_id,
                 max_bytes):
        """keys: the token's CurveKeys; run_id: the run's (32 hex digits), which every message is sealed with."""
        self.cfg, self.number, self.address, self.router, self.book = cfg, island_number, address, router, book
        self.keys, self.config_hash, self.events, self.timeout = keys, config_hash, events, timeout
        self.run_id, self.max_bytes = run_id, max_bytes
        self.seal_keys = {d: message_key(keys, run_id.encode(), d) for d in (TO_RESPONDER, TO_INITIATOR)}
        self.dealers = {}  # peer address -> DEALER
        self.sessions = {}  # peer address -> the DEALER's routing id: the session its messages are sealed with
        self.started = {}  # exchange id -> Exchange this island initiated
        self.awaiting = {}  # (peer island, exchange id) -> Exchange where this island must receive a MODEL
        self.dropped = {}  # peer address -> when it was dropped
        self.offers_seen = {}  # (peer island, exchange id) -> when: an offer is taken once
        self.islands = {}  # peer address -> island number, learnt from its messages
        self.logged = {}  # (peer, kind) -> refusals logged
        self.counts = {"refused": 0, "timeouts": 0, "stale": 0, "sent_models": 0}
        self.step = 0
        self.deaf = parse_deaf(os.environ.get(DEAF_VAR, ""))
        self.die_after = int(os.environ.get(DIE_IN_SEND_VAR, "0") or 0)

    # ---- one boundary --------------------------------------------------------------------------
    def boundary(self, step, island, fitness):
        """Handle what arrived, end exchanges past their time, maybe start one; returns the outcomes
        ({"won", "merge", "peer"}) of the tournaments that ended here."""
        now = time.monotonic()
        if self.is_deaf(step, now):
            self.drain()
            self.expire(step, now)
            return []
        self.step, self.island, self.fitness, self.outcomes = step, island, fitness, []
        self.serve()
        for address in list(self.dealers):
            self.hear(address)
        self.expire(step, now)
        self.maybe_start(step)
        return self.outcomes

    def is_deaf(self, step, now):
        if self.deaf is None:
            return False
        from_step, seconds, began = self.deaf
        if began is None:
            if step < from_step:
                return False
            self.deaf = (from_step, seconds, now)
            self.events.write(event="deaf", step=step, seconds=seconds)
            return True
        if now - began < seconds:
            return True
        self.deaf = None
        self.events.write(event="hearing", step=step)
        return False

    def drain(self):
        """Drop every message waiting (a partition: nothing in or out)."""
        import zmq

        for socket in [self.router, *self.dealers.values()]:
            while socket.poll(0, zmq.POLLIN):
                socket.recv_multipart()

    # ---- receiving -----------------------------------------------------------------------------
    def serve(self):
        """Messages on the ROUTER: OFFERs, and MODELs answering this island's SEND_ME."""
        import zmq

        for _ in range(MESSAGES_PER_BOUNDARY):
            if not self.router.poll(0, zmq.POLLIN):
                break
            frames = self.router.recv_multipart(copy=False)
            route = frames[0].bytes
            message = self.admit(frames[1:], (wire.OFFER, wire.MODEL), TO_RESPONDER, route,
                                 lambda reason, r=route: self.refuse_on_router(r, reason))
            if message is None:
                continue
            if message.kind == wire.OFFER:
                self.offered(route, message)
                continue
            exchange = self.awaiting.get((message.info["island"], message.exchange))
            if exchange is None:
                self.counts["stale"] += 1
            elif message.info["echo"] != exchange.nonce:
                self.refused(lambda reason: None, "a model message that does not echo this island's nonce "
                                                  "(a replay)", message.info["island"], "model")
            else:
                del self.awaiting[(message.info["island"], message.exchange)]
                self.receive_model(exchange, message)

    def hear(self, address):
        """Answers on the DEALER to `address`: a MODEL, SEND_ME or REFUSE for an exchange this island started."""
        import zmq

        socket = self.dealers.get(address)
        for _ in range(MESSAGES_PER_BOUNDARY):
            if socket is None or not socket.poll(0, zmq.POLLIN):
                break
            frames = socket.recv_multipart(copy=False)
            if len(frames) == 2 and frames[0].bytes == UNSIGNED:  # a refusal from a peer that would not admit us
                self.refused_by(address, frames[1].bytes)
                socket = self.dealers.get(address)
                continue
            message = self.admit(frames, (wire.SEND_ME, wire.MODEL), TO_INITIATOR, self.sessions[address],
                                 lambda reason: None)
            if message is None:
                continue
            exchange = self.started.pop(message.exchange, None)
            if exchange is None or exchange.address != address:
                self.counts["stale"] += 1
                continue
            self.dropped.pop(address, None)
            exchange.peer, exchange.nonce = message.info["island"], message.info.get("nonce")
            self.islands[address] = exchange.peer
            if message.kind == wire.MODEL:
                self.decided(exchange, won=False, peer_fitness=message.info.get("fitness"))
                self.receive_model(exchange, message)
            elif message.kind == wire.SEND_ME:
                self.decided(exchange, won=True, peer_fitness=message.info.get("fitness"))
                self.send_model(exchange, lambda body: send_without_waiting(
                    socket, self.signed(body, TO_RESPONDER, self.sessions[address])))

    def expected(self):
        book = self.book
        return Expected(code_version(), self.config_hash, self.run_id, frozenset([self.address, *(book.fixed or [])]),
                        merges_of(self.cfg.gossip_merge), self.cfg.gossip_optimizer_merge)

    def admit(self, frames, kinds, direction, session, refuse):
        """The message, or None when it is refused (the reason counted, logged and, for a sender that runs
        something else, given to `refuse`)."""
        if len(frames) != 2:
            return self.refused(refuse, f"a message of {len(frames)} frames, not 2")
        body = frames[1].buffer
        if not opened(self.seal_keys[direction], session, frames[0].bytes, body):
            return self.refused(refuse, "a message sealed for another run, direction or session (a replay or a "
                                        "leftover of another run), or corrupted")
        try:
            message = read(body, self.expected(), kinds, time.time())
        except Refused as e:
            return self.refused(refuse if e.answer else (lambda reason: None), e.reason, e.peer, e.kind)
        info = message.info
        if info["address"] in self.dropped:
            self.dropped.pop(info["address"])
            self.events.write(event="peer_back", step=self.step, peer=info["island"], address=info["address"])
        return message

    def refused(self, refuse, reason, peer=None, kind="unreadable"):
        """Count a refusal; log the first LOGGED_REFUSALS of each peer and kind."""
        self.counts["refused"] += 1
        logged = self.logged.get((peer, kind), 0)
        if logged < LOGGED_REFUSALS:
            self.logged[(peer, kind)] = logged + 1
            self.events.write(event="refused", step=self.step, reason=reason, peer=peer, kind=kind,
                              refusals=self.counts["refused"], last_logged=logged + 1 == LOGGED_REFUSALS)
        refuse(reason)
        return None

    def refuse_on_router(self, route, reason):
        self.router.send_multipart([route, UNSIGNED, reason.encode()])

    def refused_by(self, address, reason):
        """A peer refused this island: it runs something else, so it leaves the peer set for good."""
        self.events.write(event="refused_by_peer", step=self.step, address=address,
                          reason=reason.decode(errors="replace"))
        self.started = {x: e for x, e in self.started.items() if e.address != address}
        self.close_dealer(address)
        self.dropped[address] = float("inf")

    # ---- the exchange --------------------------------------------------------------------------
    def offered(self, route, message):
        info = message.info
        now = time.monotonic()
        self.offers_seen = {k: t for k, t in self.offers_seen.items() if now - t <= 2 * CLOCK_SKEW_S}
        if (info["island"], message.exchange) in self.offers_seen:
            self.refused(lambda reason: None, "an offer already taken (a replay)", info["island"], "offer")
            return
        self.offers_seen[(info["island"], message.exchange)] = now
        theirs, mine = float(info["fitness"]), self.fitness.fitness
        won = not theirs >= mine  # the initiator wins ties
        merge, with_state = info["merge"], info["with_state"]
        exchange = Exchange(message.exchange, "", info["island"], merge, with_state, now + self.timeout,
                            os.urandom(16).hex(), info["address"])
        base = {"round": self.step, "step": self.step, "peer": exchange.peer}
        self.events.write(event="mix_attempt", **base, initiator=False, merge=merge, fitness=json_number(mine))
        self.decided(exchange, won, json_number(theirs))
        if won:
            self.send_model(exchange, lambda body: self.router.send_multipart(
                [route, *self.signed(body, TO_INITIATOR, route)]))
            return
        self.awaiting[(exchange.peer, message.exchange)] = exchange
        body = wire.encode(wire.SEND_ME, message.exchange, self.record(info["address"], nonce=exchange.nonce))
        self.router.send_multipart([route, *self.signed(body, TO_INITIATOR, route)])

    def decided(self, exchange, won, peer_fitness):
        self.events.write(event="mix_decision", round=self.step, step=self.step, peer=exchange.peer, won=won,
                          fitness=json_number(self.fitness.fitness), peer_fitness=peer_fitness, merge=exchange.merge)

    def signed(self, body, direction, session):
        """The frames of a message: its seal (run, direction, session), then its body."""
        return [seal(self.seal_keys[direction], session, body), body]

    def snapshot(self, with_state):
        island = self.island
        return Snapshot(island.parameters(), *(island.optimizer_state() if with_state else ({}, {})),
                        self.fitness.fitness)

    def send_model(self, exchange, send):
        started = time.perf_counter()
        buffer, scalars = self.snapshot(exchange.with_state).pack(exchange.with_state)
        body = wire.encode(wire.MODEL, exchange.id, self.record(exchange.to, echo=exchange.nonce), scalars, buffer)
        send(body)
        self.counts["sent_models"] += 1
        if self.die_after and self.counts["sent_models"] >= self.die_after:
            os.kill(os.getpid(), signal.SIGKILL)  # test hook: die while the model is on its way
        self.events.write(event="mix_send", round=self.step, step=self.step, peer=exchange.peer, bytes=len(body),
                          values=buffer.size, scalars=scalars.size, seconds=round(time.perf_counter() - started, 6))
        self.outcomes.append({"won": True, "merge": exchange.merge, "peer": exchange.peer})

    def receive_model(self, exchange, message):
        mine = self.snapshot(exchange.with_state)
        count, scalar_count = mine.wire_sizes(exchange.with_state)
        if message.buffer.size != count or message.scalars.size != scalar_count:
            self.refused(lambda reason: None, f"a model of {message.buffer.size:,} values and "
                                              f"{message.scalars.size} scalars, not this island's {count:,} and "
                                              f"{scalar_count}", exchange.peer, "model")
            return
        theirs = mine.unpack(np.array(message.buffer), np.array(message.scalars), exchange.with_state)
        theirs.fitness = mine.fitness  # the peer's fitness is a claim: it decided the tournament, no more
        base = {"round": self.step, "step": self.step, "peer": exchange.peer}
        self.events.write(event="mix_receive", **base, bytes=message.size, values=message.buffer.size, seconds=0.0)
        merge_into(self.cfg, mine, theirs, exchange.merge, self.island, self.fitness, self.events, base)
        self.outcomes.append({"won": False, "merge": exchange.merge, "peer": exchange.peer})

    def record(self, to, **extra):
        return {"island": self.number, "address": self.address, "hash": self.config_hash, "version": code_version(),
                "run": self.run_id, "to": to, "time": time.time(), "fitness": json_number(self.fitness.fitness),
                **extra}

    # ---- starting and ending exchanges -----------------------------------------------------------
    def maybe_start(self, step):
        cfg = self.cfg
        rng = np.random.default_rng([GOSSIP_STREAM, cfg.seed, self.number, step])
        if self.started or rng.random() >= cfg.gossip_mixing_rate or not math.isfinite(self.fitness.fitness):
            return
        now = time.monotonic()
        live = [a for a in self.book.addresses() if now - self.dropped.get(a, -np.inf) >= self.timeout]
        if not live:
            return
        address = live[int(rng.integers(len(live)))]
        merge = cfg.gossip_merge
        if merge == "mixed":
            merge = "recombination" if rng.random() < cfg.gossip_recombination_prob else "clonal"
        with_state = needs_state(merge, cfg.gossip_optimizer_merge)
        exchange_id = int.from_bytes(os.urandom(7), "little")
        peer = self.book.island_of(address)
        peer = self.islands.get(address) if peer is None else peer
        self.started[exchange_id] = Exchange(exchange_id, address, peer, merge, with_state, now + self.timeout,
                                             to=address)
        self.dropped.pop(address, None)
        body = wire.encode(wire.OFFER, exchange_id, self.record(address, merge=merge, with_state=with_state))
        dealer = self.dealer(address)
        if dealer is None:
            return
        send_without_waiting(dealer, self.signed(body, TO_RESPONDER, self.sessions[address]))
        self.events.write(event="mix_attempt", round=step, step=step, peer=peer, address=address, initiator=True,
                          merge=merge, fitness=json_number(self.fitness.fitness))

    def expire(self, step, now):
        for exchange_id, exchange in list(self.started.items()):
            if now >= exchange.deadline:
                del self.started[exchange_id]
                self.timed_out(step, exchange, exchange.address)
        for key, exchange in list(self.awaiting.items()):
            if now >= exchange.deadline:
                del self.awaiting[key]
                self.timed_out(step, exchange, None)

    def timed_out(self, step, exchange, address):
        self.counts["timeouts"] += 1
        self.events.write(event="peer_lost", step=step, peer=exchange.peer, address=address,
                          detail=f"no answer for {self.timeout:g} s")
        if address is not None:
            self.close_dealer(address)  # what was queued for it is dropped with the socket
            self.dropped[address] = time.monotonic()

    def dealer(self, address):
        import zmq

        if address not in self.dealers:
            socket = client_socket(zmq.Context.instance(), zmq.DEALER, self.keys, self.max_bytes)
            session = b"s" + os.urandom(15)  # a routing id must not start with a zero byte
            socket.setsockopt(zmq.ROUTING_ID, session)
            try:
                socket.connect(f"tcp://{address}")
            except zmq.ZMQError as e:  # the shared files are checked; this is the last guard
                socket.close()
                self.started = {x: e for x, e in self.started.items() if e.address != address}
                self.dropped[address] = float("inf")
                self.events.write(event="peer_unreachable", step=self.step, address=address, reason=e.strerror)
                return None
            self.dealers[address], self.sessions[address] = socket, session
        return self.dealers[address]

    def close_dealer(self, address):
        self.sessions.pop(address, None)
        socket = self.dealers.pop(address, None)
        if socket is not None:
            socket.close()

    def close(self):
        for address in list(self.dealers):
            self.close_dealer(address)
        self.router.close()


def send_without_waiting(dealer, frames):
    """Send on a connection to a peer, or drop the message when it cannot take it: a failed handshake ends
    the connection, and a blocking send would then wait for ever. The exchange then times out."""
    import zmq

    try:
        dealer.send_multipart(frames, flags=zmq.NOBLOCK)
    except zmq.Again:
        pass


def parse_deaf(text):
    if not text:
        return None
    step, _, seconds = text.partition(":")
    return int(step), float(seconds), None
