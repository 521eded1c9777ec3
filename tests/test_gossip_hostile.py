"""A gossip island on a real socket against a peer that holds the token and misbehaves: replays, bad
fields, non-finite and wrong-size models, claims of fitness, generated messages; and against bad shared
files. Each is refused (counted, logged per peer and kind) and the island goes on. (The same as
processes, with figures: bench/faults/gossip.py, tests/faults/test_tcp_gossip.py.)"""

import json
import os
import time

import numpy as np
import pytest
import zmq
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from eggnog import code_version
from eggnog.runtime.auth import UNSIGNED
from eggnog.runtime.secure_socket import client_socket, message_key, seal
from eggnog.training.gossip import tcp_wire as wire
from eggnog.training.gossip.file_population import FilePopulation
from eggnog.training.gossip.fitness import FitnessEma
from eggnog.training.gossip.peers import PeerBook, Rendezvous
from eggnog.training.gossip.population import FIELDS
from eggnog.training.gossip.tcp import LOGGED_REFUSALS, TO_RESPONDER
from tests.test_gossip_tcp import HASH, KEYS, MAX_BYTES, RUN_ID, Events, FakeIsland, gossip_pair


class Holder:
    """A peer with the token, speaking to island `target` of a gossip pair on a connection of its own."""

    def __init__(self, target, number=7, run_id=RUN_ID):
        self.target, self.number = target, number
        self.session = b"h" + os.urandom(15)
        self.socket = client_socket(zmq.Context.instance(), zmq.DEALER, KEYS, MAX_BYTES)
        self.socket.setsockopt(zmq.ROUTING_ID, self.session)
        self.socket.connect(f"tcp://{target.address}")
        self.key = message_key(KEYS, run_id.encode(), TO_RESPONDER)

    def record(self, **extra):
        return {"island": self.number, "address": "127.0.0.1:9", "hash": HASH, "version": code_version(),
                "run": RUN_ID, "to": self.target.address, "time": time.time(), "fitness": 1e6, **extra}

    def offer(self, exchange, **changes):
        info = {**self.record(merge="clonal", with_state=True), **changes}
        return wire.encode(wire.OFFER, exchange, {k: v for k, v in info.items() if v is not DROP})

    def model(self, exchange, values, scalars=(1e6, 0.0), **changes):
        return wire.encode(wire.MODEL, exchange, {**self.record(echo=None), **changes}, np.array(scalars),
                           np.asarray(values, np.float32))

    def send(self, body, session=None):
        self.socket.send_multipart([seal(self.key, self.session if session is None else session, body), body])

    def answer(self, island, fitness, steps=40):
        """Step the target until an answer comes (None: none)."""
        for step in range(steps):
            self.target.boundary(step, island, fitness)
            if self.socket.poll(10):
                return self.socket.recv_multipart()
        return None

    def drain(self):
        frames = []
        while self.socket.poll(50):
            frames.append(self.socket.recv_multipart())
        return frames

    def close(self):
        self.socket.close()


DROP = object()


@pytest.fixture
def pair():
    gossips = gossip_pair("clonal", rates=(0.0, 0.0))
    yield gossips
    for g in gossips:
        g.close()


def step(gossip, island, fitness, n=20):
    for s in range(n):
        gossip.boundary(s, island, fitness)
        time.sleep(0.005)


def reasons(gossip):
    return [e["reason"] for e in gossip.events.lines if e["event"] == "refused"]


def test_bad_offers_are_refused_and_a_good_one_is_taken_once(pair):
    island, fitness, holder = FakeIsland(1.0), FitnessEma(ema=5.0), Holder(pair[0])
    try:
        for body in [holder.offer(1, merge=DROP), holder.offer(2, fitness=None), holder.offer(3, merge="steal"),
                     holder.offer(4, to="127.0.0.1:1"), holder.offer(5, island=-1)]:
            holder.send(body)
        step(pair[0], island, fitness)
        assert pair[0].counts["refused"] == 5 and len(reasons(pair[0])) == 5
        answers = holder.drain()
        assert len(answers) == 1 and answers[0][0] == UNSIGNED and b"a relay" in answers[0][1]  # told: misaddressed
        good = holder.offer(6)
        holder.send(good)
        answer = holder.answer(island, fitness)
        assert wire.decode(answer[1]).kind == wire.SEND_ME  # it lost to a claimed 1e6
        holder.send(good)  # the same offer again, on the same connection
        step(pair[0], island, fitness)
        assert reasons(pair[0])[-1] == "an offer already taken (a replay)"
        holder.send(holder.offer(7), session=b"another connection")  # sealed for another session
        assert holder.answer(island, fitness)[0] == UNSIGNED
    finally:
        holder.close()


def test_a_non_finite_or_wrong_size_or_unechoed_model_is_never_merged(pair):
    island, fitness, holder = FakeIsland(1.0), FitnessEma(ema=5.0), Holder(pair[0])
    size = 12  # 6 parameters and the 6 values of "z"
    try:
        for exchange, model in [(1, lambda nonce: holder.model(1, np.full(size, np.nan), (0.0, 0.0), fitness=0.0,
                                                               echo=nonce)),
                                (2, lambda nonce: holder.model(2, np.zeros(size + 1), echo=nonce)),
                                (3, lambda nonce: holder.model(3, np.zeros(size), echo=None))]:
            holder.send(holder.offer(exchange))
            nonce = wire.decode(holder.answer(island, fitness)[1]).info["nonce"]
            holder.send(model(nonce))
            step(pair[0], island, fitness)
        assert np.all(island.params == 1.0) and fitness.ema == 5.0
        assert "mix_merge" not in pair[0].events.kinds()
        last = reasons(pair[0])[-3:]
        assert "not finite" in last[0] and "not this island's" in last[1] and "echo" in last[2], last
        # a finite model of the right size is merged; its claimed fitness (1e6) is not taken
        holder.send(holder.offer(4))
        nonce = wire.decode(holder.answer(island, fitness)[1]).info["nonce"]
        holder.send(holder.model(4, np.full(size, 2.0), echo=nonce))
        step(pair[0], island, fitness)
        assert np.all(island.params == 2.0) and fitness.ema == 5.0
    finally:
        holder.close()


def test_refusals_are_logged_per_peer_and_kind_so_a_flood_hides_nothing(pair):
    island, fitness = FakeIsland(1.0), FitnessEma(ema=5.0)
    flood, other = Holder(pair[0], number=3), Holder(pair[0], number=4)
    try:
        for n in range(150):
            flood.send(flood.offer(n, fitness=None))
        step(pair[0], island, fitness)
        other.send(other.offer(500))
        nonce = wire.decode(other.answer(island, fitness)[1]).info["nonce"]
        other.send(other.model(500, np.zeros(3), echo=nonce))
        step(pair[0], island, fitness)
    finally:
        flood.close()
        other.close()
    refused = [e for e in pair[0].events.lines if e["event"] == "refused"]
    assert pair[0].counts["refused"] == 151
    assert sum(e["peer"] == 3 for e in refused) == LOGGED_REFUSALS and refused[LOGGED_REFUSALS - 1]["last_logged"]
    assert refused[-1]["peer"] == 4 and "a model of 3 values" in refused[-1]["reason"]


def test_a_leftover_island_of_another_run_is_refused_and_told(pair):
    island, fitness, leftover = FakeIsland(1.0), FitnessEma(ema=5.0), Holder(pair[0], run_id="ef" * 16)
    try:
        leftover.send(leftover.offer(1))
        assert leftover.answer(island, fitness)[0] == UNSIGNED
    finally:
        leftover.close()
    assert "sealed for another run, direction or session" in reasons(pair[0])[0]


SAFE = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                         HealthCheck.function_scoped_fixture])


@SAFE
@given(st.binary(max_size=300), st.dictionaries(st.sampled_from(["island", "fitness", "merge", "to", "with_state",
                                                                  "time", "echo", "nonce"]),
                                                st.none() | st.integers() | st.floats() | st.text(max_size=10),
                                                max_size=3),
       st.sampled_from([wire.OFFER, wire.SEND_ME, wire.MODEL, 99]))
def test_an_island_fed_generated_messages_keeps_stepping(pair, raw, changes, kind):
    holder = LIVE.get("holder")
    if holder is None or holder.target is not pair[0]:
        holder = LIVE["holder"] = Holder(pair[0])
    info = {**holder.record(merge="clonal", with_state=True), **changes}
    meta = json.dumps(info, allow_nan=True).encode()
    head = np.array([kind, 1, len(meta), 1, 2], np.int64).tobytes()
    for body in (raw, head + meta + np.zeros(1).tobytes() + np.zeros(2, np.float32).tobytes()):
        holder.send(body)
    island, fitness = FakeIsland(1.0), FitnessEma(ema=5.0)
    for s in range(3):
        pair[0].boundary(s, island, fitness)
    assert np.all(island.params == 1.0)


LIVE = {}


# ---- shared files ------------------------------------------------------------------------------

def test_a_bad_rendezvous_file_is_ignored_with_one_log_line(tmp_path):
    events = Events()
    folder = Rendezvous(tmp_path / "peers", warn=lambda **r: events.write(event="bad_shared_file", **r))
    folder.register(0, "127.0.0.1:5000")
    (tmp_path / "peers" / "island-07.json").write_text(json.dumps({"island": 7, "address": "foo"}))
    (tmp_path / "peers" / "island-08.json").write_text(json.dumps({"island": 9, "address": "h:1"}))
    for _ in range(3):
        assert folder.addresses() == {0: "127.0.0.1:5000"}
    assert sorted(e["reason"][:12] for e in events.lines) == ["island 9 in ", "the address "]
    assert PeerBook("127.0.0.1:1", None, folder).addresses() == ["127.0.0.1:5000"]


def test_bad_status_files_are_ignored_with_one_log_line(tmp_path):
    for n in range(3):
        (tmp_path / f"rank-{n:02d}").mkdir()
    (tmp_path / "rank-99999999").mkdir()  # no table of a hundred million rows
    lines = []
    population = FilePopulation(tmp_path, 0, every=5, stale_s=60, warn=lambda **r: lines.append(r))
    now = time.time()
    (tmp_path / "rank-01" / "status.json").write_text(json.dumps({"island": 1, "time": now + 1e6,
                                                                  "record": [0.0] * len(FIELDS)}))
    (tmp_path / "rank-02" / "status.json").write_text(json.dumps({"island": 2, "time": now, "record": [1, 2]}))
    (tmp_path / "population.json").write_text('{"point": "x"}')
    for _ in range(2):
        table, live = population.post(np.zeros(len(FIELDS)))
    assert live == [0] and table.shape == (3, len(FIELDS)) and len(lines) == 2
    assert population.summarize_if_due(lambda point: None) == 0  # a damaged summary record: summarised again


def test_peer_lost_names_the_peer_from_the_rendezvous_folder(tmp_path):
    gossips = gossip_pair("clonal", rates=(1.0, 0.0), timeout=0.2)
    folder = Rendezvous(tmp_path / "peers")
    folder.register(1, gossips[1].address)
    gossips[0].book = PeerBook(gossips[0].address, None, folder)
    gossips[1].close()
    try:
        island, fitness = FakeIsland(1.0), FitnessEma(ema=3.0)
        gossips[0].boundary(1, island, fitness)
        time.sleep(0.25)
        gossips[0].boundary(2, island, fitness)
        lost = [e for e in gossips[0].events.lines if e["event"] == "peer_lost"]
        assert [(e["peer"], e["address"]) for e in lost] == [(1, gossips[1].address)]
    finally:
        gossips[0].close()
