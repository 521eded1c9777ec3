"""Gossip over TCP in one process: peer discovery (SLURM's node list, the rendezvous folder, a list),
the wire format, a tournament between two in-process islands on real sockets (both outcomes, with
and without optimiser state), refusals, a peer that never answers, the file-kept population, and bad
flags refused before anything is written. (Islands as processes, killed and cut off:
tests/faults/test_tcp_gossip.py.)"""

import time
from dataclasses import replace

import numpy as np
import pytest

from eggnog.runtime.auth import UNSIGNED, token_key
from eggnog.runtime.errors import BadInput
from eggnog.runtime.secure_socket import client_socket, derive_keys
from eggnog.training.gossip import tcp_wire as wire
from eggnog.training.gossip.file_population import FilePopulation
from eggnog.training.gossip.fitness import FitnessEma
from eggnog.training.gossip.peers import PeerBook, Rendezvous, advertised, expand_nodelist, listed_peers, slurm_peers
from eggnog.training.gossip.population import FIELDS
from eggnog.training.gossip.tcp import TcpGossip, bind_router
from eggnog.training.mingru.island import GossipRunConfig
from tests.test_gossip import assert_refused, invoke

HASH = "ab" * 32
RUN_ID = "cd" * 16
KEYS = derive_keys(token_key(environ={"EGGNOG_TOKEN": "t"}))
MAX_BYTES = 1 << 26  # what an island of the learning-direction tests sends fits


def test_slurm_node_lists_expand_as_scontrol_would():
    assert expand_nodelist("gpu[01-03,07],login5") == ["gpu01", "gpu02", "gpu03", "gpu07", "login5"]
    assert expand_nodelist("n[8-10]-ib") == ["n8-ib", "n9-ib", "n10-ib"]
    assert expand_nodelist("a1") == ["a1"]
    with pytest.raises(BadInput, match="cannot read the SLURM node list"):
        expand_nodelist("gpu[01-x]")


def test_slurm_peers_follow_the_port_rule():
    env = {"SLURM_JOB_NODELIST": "n[1-2],m7", "SLURM_TASKS_PER_NODE": "2(x2),1"}
    assert slurm_peers(29500, env) == ["n1:29500", "n1:29501", "n2:29500", "n2:29501", "m7:29500"]
    assert slurm_peers(100, {"SLURM_JOB_NODELIST": "a,b", "SLURM_TASKS_PER_NODE": "3"}) == [
        f"{h}:{100 + i}" for h in "ab" for i in range(3)]
    with pytest.raises(BadInput, match="needs SLURM_JOB_NODELIST"):
        slurm_peers(1, {})
    with pytest.raises(BadInput, match="names 1 nodes, the node list 2"):
        slurm_peers(1, {"SLURM_JOB_NODELIST": "a,b", "SLURM_TASKS_PER_NODE": "2(x1)"})
    assert advertised("0.0.0.0", 5, {"SLURMD_NODENAME": "n2"}) == "n2:5" and advertised("10.0.0.1", 5) == "10.0.0.1:5"


def test_listed_peers_and_the_rendezvous_folder(tmp_path):
    assert listed_peers("a:1, b:2,") == ["a:1", "b:2"]
    with pytest.raises(BadInput, match="peer address 'a' is not HOST:PORT"):
        listed_peers("a")
    folder = Rendezvous(tmp_path / "peers")
    folder.register(0, "h:1")
    folder.register(1, "h:2")
    folder.register(1, "h:3")  # restarted elsewhere: the newest address wins
    (tmp_path / "peers" / "island-02.json").write_text("{half")  # being written: skipped
    assert folder.addresses() == {0: "h:1", 1: "h:3"}
    assert PeerBook("h:1", ["x:9"], folder).addresses() == ["h:3", "x:9"]


def test_the_wire_format_round_trips_and_refuses_what_does_not_add_up():
    body = wire.encode(wire.MODEL, 5, {"island": 2}, np.arange(3.0), np.arange(4, dtype=np.float32))
    message = wire.decode(body)
    assert (message.kind, message.exchange, message.info, message.size) == (wire.MODEL, 5, {"island": 2}, len(body))
    assert message.scalars.tolist() == [0, 1, 2] and message.buffer.tolist() == [0, 1, 2, 3]
    for bad, reason in [(body[:-4], "not the size its header gives"), (body + b"x", "not the size"),
                        (body[:10], "shorter than its header"),
                        (wire.encode(99, 0, {}), "unknown message kind 99"),
                        (wire.encode(wire.OFFER, 0, [1]), "not a JSON object")]:
        with pytest.raises(wire.Malformed, match=reason):
            wire.decode(bad)


class FakeIsland:
    """What a tournament needs of an island, on host arrays."""

    def __init__(self, value, n=6):
        self.params = np.full(n, value, np.float32)
        self.arrays, self.scalars = {"z": np.full(n, value, np.float32)}, {"k": 3}

    def parameters(self):
        return self.params.copy()

    def optimizer_state(self):
        return {k: v.copy() for k, v in self.arrays.items()}, dict(self.scalars)

    def load(self, params, arrays=None, scalars=None):
        self.params = np.asarray(params, np.float32)
        if arrays is not None:
            self.arrays, self.scalars = arrays, scalars


class Events:
    def __init__(self):
        self.lines = []

    def write(self, **record):
        self.lines.append(record)

    def kinds(self):
        return [e["event"] for e in self.lines]


def gossip_pair(merge="clonal", rates=(1.0, 0.0), timeout=5.0, optimizer_merge="interpolate"):
    """Two islands on sockets of this machine; island 0 starts exchanges (rate 1), island 1 answers."""
    sides = []
    for number in range(2):
        router, port = bind_router("127.0.0.1", 0, KEYS, MAX_BYTES)
        sides.append((number, router, f"127.0.0.1:{port}"))
    gossips = []
    for number, router, address in sides:
        cfg = GossipRunConfig(seed=1, gossip_mixing_rate=rates[number], gossip_merge=merge,
                              gossip_recombination_alpha=0.25, gossip_optimizer_merge=optimizer_merge)
        other = sides[1 - number][2]
        gossips.append(TcpGossip(cfg, number, address, router, PeerBook(address, [other]), KEYS, HASH, Events(),
                                 timeout, RUN_ID, MAX_BYTES))
    return gossips


def boundaries(gossips, islands, fitness, rounds=40):
    """Walk both islands through boundaries until both have an outcome and no exchange is open; island
    0 starts one exchange (at step 1)."""
    outcomes = [[], []]
    for step in range(1, rounds + 1):
        for n in (0, 1):
            outcomes[n] += gossips[n].boundary(step, islands[n], fitness[n])
        gossips[0].cfg = replace(gossips[0].cfg, gossip_mixing_rate=0.0)
        time.sleep(0.01)
        if outcomes[0] and outcomes[1] and not any(g.started or g.awaiting for g in gossips):
            break
    return outcomes


@pytest.mark.parametrize("initiator_fitter", [True, False])
def test_a_tournament_over_sockets_sends_the_fitter_model_to_the_loser(initiator_fitter):
    gossips = gossip_pair("clonal")
    try:
        islands = [FakeIsland(1.0), FakeIsland(2.0)]
        fitness = [FitnessEma(ema=3.0 if initiator_fitter else 5.0), FitnessEma(ema=4.0)]
        outcomes = boundaries(gossips, islands, fitness)
        winner, loser = (0, 1) if initiator_fitter else (1, 0)
        assert outcomes[winner] == [{"won": True, "merge": "clonal", "peer": loser}]
        assert outcomes[loser] == [{"won": False, "merge": "clonal", "peer": winner}]
        value = 1.0 if initiator_fitter else 2.0
        assert np.all(islands[loser].params == value) and np.all(islands[loser].arrays["z"] == value)
        assert fitness[loser].ema == (4.0 if initiator_fitter else 5.0)  # a claimed fitness is not inherited
        assert "mix_merge" in gossips[loser].events.kinds() and "mix_send" in gossips[winner].events.kinds()
    finally:
        for g in gossips:
            g.close()


def test_recombination_with_the_optimiser_reset_moves_the_parameters_only():
    gossips = gossip_pair("recombination", optimizer_merge="reset")
    try:
        islands = [FakeIsland(1.0), FakeIsland(2.0)]
        boundaries(gossips, islands, [FitnessEma(ema=5.0), FitnessEma(ema=4.0)])
        assert np.allclose(islands[0].params, 0.75 * 1.0 + 0.25 * 2.0)
        sent = [e for e in gossips[1].events.lines if e["event"] == "mix_send"]
        assert [e["values"] for e in sent] == [6]  # the parameters only, no optimiser state
    finally:
        for g in gossips:
            g.close()


def test_a_peer_that_never_answers_is_dropped_then_retried():
    gossips = gossip_pair("clonal", timeout=0.2)
    try:
        island, fitness = FakeIsland(1.0), FitnessEma(ema=3.0)
        gossips[1].close()  # the peer is gone
        assert gossips[0].boundary(1, island, fitness) == []
        assert gossips[0].started
        time.sleep(0.25)
        gossips[0].boundary(2, island, fitness)
        assert "peer_lost" in gossips[0].events.kinds() and gossips[0].counts["timeouts"] == 1
        assert gossips[0].dropped and not gossips[0].started  # not tried again at once
        time.sleep(0.25)
        gossips[0].boundary(3, island, fitness)
        assert gossips[0].started  # retried after as long again
    finally:
        gossips[0].close()


def test_a_refused_offer_moves_no_weights_and_the_refused_island_stops_asking():
    gossips = gossip_pair("clonal")
    gossips[1].config_hash = "cd" * 32  # another configuration
    try:
        islands = [FakeIsland(1.0), FakeIsland(2.0)]
        fitness = [FitnessEma(ema=5.0), FitnessEma(ema=4.0)]
        boundaries(gossips, islands, fitness, rounds=10)
        assert gossips[1].counts["refused"] >= 1 and "another configuration" in gossips[1].events.lines[0]["reason"]
        assert "refused_by_peer" in gossips[0].events.kinds()
        assert np.all(islands[0].params == 1.0) and np.all(islands[1].params == 2.0)
        assert "mix_send" not in gossips[0].events.kinds() + gossips[1].events.kinds()
    finally:
        for g in gossips:
            g.close()


def test_a_message_sealed_for_another_session_gets_an_unsigned_refusal():
    import zmq

    gossips = gossip_pair("clonal", rates=(0.0, 0.0))
    socket = client_socket(zmq.Context.instance(), zmq.DEALER, KEYS, MAX_BYTES)
    socket.connect(f"tcp://{gossips[0].address}")
    try:
        body = wire.encode(wire.OFFER, 1, {})
        socket.send_multipart(gossips[1].signed(body, "gossip initiator>responder", b"another session"))
        for step in range(50):
            gossips[0].boundary(step, FakeIsland(0.0), FitnessEma())
            if socket.poll(20):
                break
        assert socket.recv_multipart()[0] == UNSIGNED
        assert "sealed for another run, direction or session" in gossips[0].events.lines[0]["reason"]
    finally:
        socket.close()
        for g in gossips:
            g.close()


def test_a_process_without_the_token_cannot_reach_an_island():
    """CURVE: a client with another token never finishes the handshake; nothing it sends is read."""
    import zmq

    gossips = gossip_pair("clonal", rates=(0.0, 0.0))
    strangers = [client_socket(zmq.Context.instance(), zmq.DEALER, derive_keys(token_key(environ={
        "EGGNOG_TOKEN": "other"})), MAX_BYTES), zmq.Context.instance().socket(zmq.DEALER)]
    try:
        for socket in strangers:
            socket.setsockopt(zmq.LINGER, 0)
            socket.connect(f"tcp://{gossips[0].address}")
            socket.send_multipart([b"x" * 32, wire.encode(wire.OFFER, 1, {})])
        for step in range(30):
            gossips[0].boundary(step, FakeIsland(0.0), FitnessEma())
            time.sleep(0.01)
        assert gossips[0].counts["refused"] == 0 and gossips[0].events.lines == []
        assert not any(socket.poll(50) for socket in strangers)
    finally:
        for socket in strangers:
            socket.close()
        for g in gossips:
            g.close()


def test_the_population_on_disk_ranks_islands_and_summarises_once(tmp_path):
    for n in range(3):
        (tmp_path / f"rank-{n:02d}").mkdir()
    pops = [FilePopulation(tmp_path, n, every=5, stale_s=60) for n in range(3)]
    record = np.zeros(len(FIELDS))
    for n, pop in enumerate(pops[:2]):
        record[FIELDS.index("step")], record[FIELDS.index("fitness")] = 10 + n, -5.0 + n
        table, live = pop.post(record)
    assert live == [0, 1] and table.shape == (3, len(FIELDS)) and np.isnan(table[2]).all()
    assert pops[1].percentile(1) == 0.0 and pops[1].percentile(0) == 0.5 and pops[1].percentile(2) == 1.0
    # island 0 posted before island 1: it has heard from nobody else yet; island 1 has heard from island 0
    assert pops[0].furthest() is None and pops[1].furthest() == (0, 10)
    pops[0].read()
    assert pops[0].furthest() == (1, 11)
    record[FIELDS.index("step")] = 12
    pops[2].post(record)
    assert pops[1].read()[1] == [0, 1, 2] and pops[1].furthest() == (2, 12)
    written = []
    assert pops[1].summarize_if_due(written.append) == 10 and written == [10]
    assert pops[0].summarize_if_due(written.append) is None  # the point was summarised already


@pytest.mark.parametrize("args,message", [
    (["--transport", "tcp"], "--transport tcp needs --island N"),
    (["--transport", "tcp", "--island", "0", "--listen", "nowhere"], "--listen 'nowhere' is not HOST:PORT"),
    (["--transport", "tcp", "--island", "0", "--peers", "a:1", "--rendezvous", "x"], "give one"),
    (["--transport", "tcp", "--island", "0", "--peer-timeout", "0"], "--peer-timeout must be positive"),
    (["--transport", "tcp", "--island", "-1"], "--island must lie in 0..4095"),
    (["--transport", "tcp", "--island", "4096"], "--island must lie in 0..4095"),
    (["--transport", "udp"], "unknown --transport 'udp'"),
])
def test_bad_tcp_flags_are_refused_before_anything_is_written(tmp_path, args, message):
    assert_refused(invoke(["--run-dir", tmp_path / "run", *args]), message)
    assert not (tmp_path / "run").exists()


def test_tcp_needs_a_run_folder_a_token_and_a_free_port(tmp_path, monkeypatch):
    monkeypatch.delenv("EGGNOG_TOKEN", raising=False)
    base = ["--transport", "tcp", "--island", "0", "--backend", "cpu", "--peers", "127.0.0.1:1"]
    assert_refused(invoke(base), "--transport tcp needs --run-dir RUN")
    assert_refused(invoke([*base, "--run-dir", tmp_path / "run"]), "needs a shared token")
    monkeypatch.setenv("EGGNOG_TOKEN", "t")
    router, port = bind_router("127.0.0.1", 0, KEYS, MAX_BYTES)
    try:
        assert_refused(invoke([*base, "--run-dir", tmp_path / "run", "--listen", f"127.0.0.1:{port}"]),
                       f"cannot listen on 127.0.0.1:{port}")
    finally:
        router.close()
    assert not (tmp_path / "run").exists()
