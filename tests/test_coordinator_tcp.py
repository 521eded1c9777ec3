"""The TCP transport's pieces in one process: the token, the configuration hash, admission and
heartbeats between a coordinator link and a worker link, and the refusals of both scripts. The
runs with processes killed and restarted are in tests/faults."""

import dataclasses
import socket
import threading
import time

import numpy as np
import pytest

from bench.faults.coordinator_cluster import free_port
from eggnog.evolution.coordinator import wire
from eggnog.evolution.coordinator.tcp import TcpCoordinatorLink, bind
from eggnog.evolution.coordinator.tcp_worker_link import LinkLost, Refused, RunOver, TcpWorkerLink
from eggnog.runtime.auth import config_hash, token_key
from eggnog.runtime.errors import BadInput
from eggnog.runtime.secure_socket import derive_keys
from tests.es_helpers import tiny_config, tiny_corpus
from tests.helpers import assert_user_error, run_script


def test_the_token_comes_from_the_file_or_the_environment(tmp_path):
    (tmp_path / "token").write_text("s3cret\n")
    assert token_key(tmp_path / "token", environ={}) == token_key(None, environ={"EGGNOG_TOKEN": "s3cret"})
    assert token_key(None, environ={"EGGNOG_TOKEN": "other"}) != token_key(None, environ={"EGGNOG_TOKEN": "s3cret"})
    with pytest.raises(BadInput, match="cannot read the token file"):
        token_key(tmp_path / "missing", environ={})
    (tmp_path / "empty").write_text(" \n")
    with pytest.raises(BadInput, match="is empty"):
        token_key(tmp_path / "empty", environ={})
    with pytest.raises(BadInput, match="needs a shared token"):
        token_key(None, environ={})


class FakeCorpus:
    def __init__(self, train, val, sha="abc"):
        self.train, self.val = np.zeros(train, np.uint8), np.zeros(val, np.uint8)
        self.meta = {"splits": {"train": {"sha256": sha}, "val": {"sha256": sha}}}


def test_the_configuration_hash_covers_the_model_and_corpus_not_where_things_are():
    cfg, corpus = tiny_config(mode="coordinator"), FakeCorpus(100, 10)
    same = config_hash(cfg, corpus)
    assert config_hash(tiny_config(mode="coordinator", listen="10.0.0.1:1", data="/elsewhere/c.bin", steps=99,
                                   token_file="t"), corpus) == same
    assert config_hash(tiny_config(mode="coordinator", seed=4), corpus) != same
    assert config_hash(tiny_config(mode="coordinator", dim=16), corpus) != same
    assert config_hash(cfg, FakeCorpus(100, 10, sha="abd")) != same
    assert config_hash(cfg, FakeCorpus(101, 10)) != same
    assert config_hash(tiny_config("transformer", mode="coordinator"), corpus) != same


HASH, OTHER_HASH, RUN_ID = "a" * 64, "b" * 64, bytes(range(16))
SMALL = 1 << 16


@pytest.fixture
def links():
    """A coordinator link served by a thread that answers every REQUEST with WAIT, and its address."""
    address = f"127.0.0.1:{free_port()}"
    key = token_key(None, environ={"EGGNOG_TOKEN": "t"})
    keys = derive_keys(key)
    link = TcpCoordinatorLink(bind(address, keys, 1 << 16), keys, {"model": "egg", "config": {"seed": 3}}, HASH,
                              heartbeat_timeout=0.6, run_id=RUN_ID)
    got, lost, stop = [], [], threading.Event()

    def serve():
        while not stop.is_set():
            lost.extend(link.lost())
            message = link.receive(0.02)
            if message is not None:
                got.append(message)
                link.send(message[1], wire.encode([wire.WAIT]))

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    yield address, key, link, got, lost
    stop.set()
    thread.join()
    link.close()


def test_a_worker_is_admitted_in_two_steps_and_beats_while_it_is_silent(links):
    address, key, link, got, lost = links
    worker = TcpWorkerLink(address, key, heartbeat_timeout=0.6)
    assert worker.join(5.0) == {"model": "egg", "config": {"seed": 3}, "run_id": RUN_ID.hex()}
    worker.ready(HASH, SMALL)
    reply = worker.request(wire.encode([wire.REQUEST, 0, 0]))
    assert wire.kind(reply) == wire.WAIT and wire.header(got[-1][0], 3) == [wire.REQUEST, 0, 0]
    time.sleep(1.5)  # silent but for the heartbeat thread: still admitted
    assert lost == [] and wire.kind(worker.request(wire.encode([wire.REQUEST, 0, 0]))) == wire.WAIT
    worker.beat.stop()  # now truly silent
    time.sleep(1.0)
    assert lost == [worker.name]
    with pytest.raises(LinkLost, match="restarted"):  # forgotten: told to introduce itself again
        worker.request(wire.encode([wire.REQUEST, 0, 0]))
    worker.close()


def test_another_configuration_or_token_is_refused(links):
    address, key, link, got, lost = links
    worker = TcpWorkerLink(address, key, heartbeat_timeout=0.6)
    worker.join(5.0)
    with pytest.raises(Refused, match="configuration or corpus differs"):
        worker.ready(OTHER_HASH, SMALL)
    worker.close()
    stranger = TcpWorkerLink(address, token_key(None, environ={"EGGNOG_TOKEN": "guess"}), heartbeat_timeout=0.6)
    with pytest.raises(Refused, match="token differs from the coordinator's"):
        stranger.join(5.0)
    stranger.close()
    assert got == [] and link.refusals == 1  # the stranger's handshake failed: nothing of it was read


def test_a_stranger_whose_handshake_was_refused_is_told_so_not_left_waiting(links):
    """The coordinator's refusal of a client key (which knows the server's public key, no secret) ends the
    connection for good; a blocking send on it would then wait for ever."""
    address, key, link, got, lost = links
    stranger = TcpWorkerLink(address, key, heartbeat_timeout=0.6)
    guessed = derive_keys(token_key(None, environ={"EGGNOG_TOKEN": "guess"}))
    stranger.curve = dataclasses.replace(stranger.curve, client_secret=guessed.client_secret,
                                         client_public=guessed.client_public)
    stranger.open(SMALL)
    deadline = time.perf_counter() + 10
    while not stranger.handshake_failed() and time.perf_counter() < deadline:
        time.sleep(0.01)
    assert stranger.handshake_failed()
    with pytest.raises(Refused, match="token differs from the coordinator's"):
        stranger.send(wire.encode([wire.HELLO]))
    stranger.close()


def test_a_worker_joining_as_the_run_ends_is_told_to_stop(links):
    address, key, link, got, lost = links
    late = TcpWorkerLink(address, key, heartbeat_timeout=0.6)
    late.join(5.0)  # welcomed, still compiling when the last step ends
    link.closing(143)
    assert link.waiting()  # the coordinator waits for it (at most a heartbeat timeout) to tell it to stop
    with pytest.raises(RunOver) as over:
        late.ready(HASH, SMALL)
    assert over.value.status == 143 and not link.workers
    newcomer = TcpWorkerLink(address, key, heartbeat_timeout=0.6)
    with pytest.raises(RunOver):
        newcomer.join(5.0)
    late.close()
    newcomer.close()


def test_a_coordinator_that_dies_while_a_request_waits_is_noticed_at_once():
    """A killed coordinator's replacement may finish a short run within one heartbeat timeout: a worker that
    waited out the timeout would find no coordinator left. The closed connection ends the wait."""
    address = f"127.0.0.1:{free_port()}"
    key = token_key(None, environ={"EGGNOG_TOKEN": "t"})
    keys = derive_keys(key)
    link = TcpCoordinatorLink(bind(address, keys, SMALL), keys, {"model": "egg", "config": {}}, HASH,
                              heartbeat_timeout=60.0, run_id=RUN_ID)

    def answer_one_request_then_die():
        requests = 0
        while requests < 2:
            message = link.receive(0.02)
            if message is not None:
                requests += 1
                if requests == 1:
                    link.send(message[1], wire.encode([wire.WAIT]))
        link.close()  # as a killed process's connections are closed

    thread = threading.Thread(target=answer_one_request_then_die, daemon=True)
    thread.start()
    worker = TcpWorkerLink(address, key, heartbeat_timeout=60.0)
    worker.join(5.0)
    worker.ready(HASH, SMALL)
    assert wire.kind(worker.request(wire.encode([wire.REQUEST, 0, 0]))) == wire.WAIT
    asked = time.monotonic()
    with pytest.raises(LinkLost, match="closed the connection"):
        worker.request(wire.encode([wire.REQUEST, 0, 0]))
    assert time.monotonic() - asked < 30  # not at the end of the 60 s wait: a deadline, not a speed
    thread.join()
    worker.close()


def test_a_worker_with_no_coordinator_gives_up_after_its_reconnect_timeout():
    worker = TcpWorkerLink(f"127.0.0.1:{free_port()}", token_key(None, environ={"EGGNOG_TOKEN": "t"}), 0.3)
    started = time.monotonic()
    with pytest.raises(BadInput, match="no coordinator answered"):
        worker.join(1.0)
    assert time.monotonic() - started < 3


TCP = ("--mode", "coordinator", "--transport", "tcp", "--backend", "cpu", "--population-chunk", "64")


def test_a_tcp_coordinator_without_a_token_or_port_exits_2_and_writes_nothing(tmp_path):
    data = ("--data", tiny_corpus(tmp_path))
    result = run_script("train_es.py", *TCP, *data, "--listen", f"127.0.0.1:{free_port()}", "--run-dir",
                        tmp_path / "run",
                        env={"EGGNOG_TOKEN": ""})
    assert_user_error(result, "needs a shared token")
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = run_script("train_es.py", *TCP, *data, "--listen", f"127.0.0.1:{port}", "--run-dir", tmp_path / "run",
                            env={"EGGNOG_TOKEN": "t"})
    assert_user_error(result, f"cannot listen on 127.0.0.1:{port}")
    assert not (tmp_path / "run").exists()


def test_a_worker_without_a_token_or_a_coordinator_exits_2(tmp_path):
    address = f"127.0.0.1:{free_port()}"
    assert_user_error(run_script("es_worker.py", "--connect", address, env={"EGGNOG_TOKEN": ""}),
                      "needs a shared token")
    assert_user_error(run_script("es_worker.py", "--connect", address, "--reconnect-timeout", "1",
                                 env={"EGGNOG_TOKEN": "t"}), "no coordinator answered at " + address)
