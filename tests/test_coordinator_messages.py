"""Every message kind of the coordinator's protocol, both directions: random and mutated bytes make each
parser return or refuse (wire.Malformed), never raise anything else; the coordinator, its TCP link and a
worker survive them; the fields the issue named are refused."""

import json
from types import SimpleNamespace

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from eggnog import code_version
from eggnog.evolution.coordinator import messages, wire
from eggnog.evolution.coordinator.tcp import TcpCoordinatorLink
from eggnog.evolution.coordinator.worker import Worker
from eggnog.evolution.eggroll import full_state, snapshot_bytes
from eggnog.evolution.fitness import pack_ternary
from eggnog.kernels.core.backend import Backend
from eggnog.runtime.auth import token_key
from eggnog.runtime.secure_socket import derive_keys, message_key, seal
from tests.es_helpers import tiny_config, tiny_corpus
from tests.test_coordinator import CHUNK, coordinator, result

CFG = tiny_config(mode="coordinator", population_chunk=CHUNK, optimizer="adamw")
MODEL = CFG.build_model()
SHAPE = messages.run_shape(CFG, MODEL)
SNAPSHOT = np.frombuffer(snapshot_bytes(CFG, MODEL, MODEL.init_params(3), full_state(CFG, MODEL, {})), np.uint8)
FAST = settings(max_examples=150, deadline=None, database=None,
                suppress_health_check=[HealthCheck.function_scoped_fixture])


def json_message(kind, value):
    return wire.encode([kind], np.frombuffer(json.dumps(value).encode(), np.uint8))


VALID = {  # one legal message of each kind
    wire.HELLO: json_message(wire.HELLO, {"worker": "w", "version": code_version()}),
    wire.READY: json_message(wire.READY, {"worker": "w", "version": code_version(), "config_hash": "a" * 64}),
    wire.HEARTBEAT: wire.encode([wire.HEARTBEAT], np.frombuffer(b"0123abcd", np.uint8)),
    wire.LEAVE: wire.encode([wire.LEAVE]),
    wire.REQUEST: wire.encode([wire.REQUEST, 2, 0]),
    wire.RESULT: result(1, 2, [1]),
    wire.SNAPSHOT_RESULT: wire.encode([wire.SNAPSHOT_RESULT, 2, 1, -500], SNAPSHOT),
    wire.WELCOME: json_message(wire.WELCOME, {"model": "egg", "config": {}, "run_id": "0" * 32}),
    wire.REFUSE: wire.encode([wire.REFUSE], np.frombuffer(b"no", np.uint8)),
    wire.STOP: wire.encode([wire.STOP, 0]),
    wire.WAIT: wire.encode([wire.WAIT]),
    wire.HELLO_AGAIN: wire.encode([wire.HELLO_AGAIN]),
    wire.JOB: wire.encode([wire.JOB, 1, 2], np.zeros(SHAPE.state_bytes, np.uint8)),
    wire.CATCHUP: wire.encode([wire.CATCHUP, 1], pack_ternary(np.ones(CFG.population // 2, np.int8))),
    wire.SNAPSHOT: wire.encode([wire.SNAPSHOT, 2, 1]),
    wire.LOAD: wire.encode([wire.LOAD, 2], SNAPSHOT),
}
PARSERS = {
    wire.HELLO: messages.parse_hello, wire.READY: messages.parse_ready, wire.HEARTBEAT: messages.parse_heartbeat,
    wire.LEAVE: messages.parse_leave, wire.REQUEST: lambda m: messages.parse_request(m, SHAPE),
    wire.RESULT: lambda m: messages.parse_result(m, SHAPE),
    wire.SNAPSHOT_RESULT: lambda m: messages.parse_snapshot_result(m, SHAPE),
    wire.WELCOME: messages.parse_welcome, wire.REFUSE: messages.parse_refuse, wire.STOP: messages.parse_stop,
    wire.WAIT: messages.parse_wait, wire.HELLO_AGAIN: messages.parse_hello_again,
    wire.JOB: lambda m: messages.parse_job(m, SHAPE), wire.CATCHUP: lambda m: messages.parse_catchup(m, SHAPE),
    wire.SNAPSHOT: lambda m: messages.parse_snapshot(m, SHAPE), wire.LOAD: lambda m: messages.parse_load(m, SHAPE),
}
KINDS = sorted(PARSERS)


def parsed_or_refused(parse, message):
    try:
        parse(message)
        return True
    except wire.Malformed:
        return False


@st.composite
def mutated(draw, kinds=tuple(KINDS)):
    """A legal message of some kind with bytes changed, cut, grown or a header field set to an edge."""
    message = VALID[draw(st.sampled_from(kinds))].copy()
    how = draw(st.sampled_from(["bytes", "cut", "grow", "field"]))
    if how == "bytes" and message.size:
        for _ in range(draw(st.integers(1, 4))):
            message[draw(st.integers(0, message.size - 1))] = draw(st.integers(0, 255))
    elif how == "cut":
        message = message[:draw(st.integers(0, message.size))]
    elif how == "grow":
        message = np.concatenate([message, np.frombuffer(draw(st.binary(min_size=1, max_size=64)), np.uint8)])
    elif message.size >= 16:
        field = draw(st.integers(1, message.size // 8 - 1))
        value = draw(st.sampled_from([-1, 0, 1, 2, 255, 2**31, 2**62, -2**63, 2**63 - 1]))
        message[8 * field:8 * field + 8] = np.frombuffer(np.int64(value).tobytes(), np.uint8)
    return message


def test_every_kind_has_a_parser_and_its_legal_message_parses():
    assert set(PARSERS) == set(VALID) == {v for k, v in vars(wire).items() if k.isupper() and k not in
                                          ("UP", "DOWN", "POLL_S")}
    for kind in KINDS:
        assert parsed_or_refused(PARSERS[kind], VALID[kind]), kind


@FAST
@given(kind=st.sampled_from(KINDS), data=st.binary(max_size=300))
def test_random_bytes_are_parsed_or_refused(kind, data):
    parsed_or_refused(PARSERS[kind], np.frombuffer(data, np.uint8))
    parsed_or_refused(PARSERS[kind], np.concatenate([wire.encode([kind]), np.frombuffer(data, np.uint8)]))


@FAST
@given(message=mutated())
def test_mutated_messages_are_parsed_or_refused_by_every_parser(message):
    for parse in PARSERS.values():
        parsed_or_refused(parse, message)


@pytest.mark.parametrize("message, says", [
    (wire.encode([wire.RESULT, 1, 2, 0, 0, 1], np.array([255], np.uint8), np.zeros(SHAPE.state_bytes, np.uint8)),
     "not a ternary code"),
    (wire.encode([wire.RESULT, 1, 2, 0, 0, 1], np.array([3], np.uint8), np.zeros(SHAPE.state_bytes, np.uint8)),
     "more pairs than the chunk has"),  # a chunk of 2 members: one pair, codes 0..2
    (wire.encode([wire.RESULT, 1, 99, 0, 0, 1], np.zeros(1 + SHAPE.state_bytes, np.uint8)), "chunk 99"),
    (wire.encode([wire.RESULT, 1, 1, 2**62, 0, 1], np.zeros(1 + SHAPE.state_bytes, np.uint8)), "log-likelihood"),
    (wire.encode([wire.RESULT, -1, 1, 0, 0, 1], np.zeros(1 + SHAPE.state_bytes, np.uint8)), "step -1"),
    (wire.encode([wire.REQUEST, 2, 300]), "signal 300"),
    (wire.encode([wire.CATCHUP, 1], np.array([255], np.uint8)), "not a ternary code"),
    (wire.encode([wire.JOB, 1, 4], np.zeros(SHAPE.state_bytes, np.uint8)), "chunk 4"),
    (wire.encode([wire.STOP, 256]), "status 256"),
    (wire.encode([wire.SNAPSHOT_RESULT, 2, 0, -5], SNAPSHOT), "validation sum"),
    (wire.encode([wire.SNAPSHOT_RESULT, 2, 1, 0], SNAPSHOT[:-1]), "bytes where this model's takes"),
    (json_message(wire.HELLO, {"worker": None, "version": 1}), "not a short printable string"),
    (json_message(wire.HELLO, [1, 2]), "not a JSON object"),
    (json_message(wire.READY, {"worker": "w", "version": "v", "config_hash": "x" * 64}), "not a SHA-256"),
    (wire.encode([wire.HEARTBEAT], np.zeros(500, np.uint8)), "HEARTBEAT naming a worker id of 500 bytes"),
    (wire.encode([wire.LEAVE, 0]), "LEAVE message of 16 bytes"),
    (np.zeros(5, np.uint8), "shorter than its 6-field header"),
])
def test_the_fields_named_in_the_issue_are_refused(message, says):
    with pytest.raises(wire.Malformed, match=says):
        PARSERS[wire.kind(message) if message.size >= 8 else wire.RESULT](message)


def with_nan(kind, header):
    body = SNAPSHOT.copy()
    at = MODEL.n_params  # the first float array after the int8 parameters: adamw's first moment
    body[at:at + 4] = np.frombuffer(np.float32(np.nan).tobytes(), np.uint8)
    return wire.encode([kind, *header], body)


def test_a_snapshot_or_load_that_is_not_finite_is_refused():
    with pytest.raises(wire.Malformed, match="not finite"):
        messages.parse_snapshot_result(with_nan(wire.SNAPSHOT_RESULT, [2, 1, 0]), SHAPE)
    with pytest.raises(wire.Malformed, match="not finite"):
        messages.parse_load(with_nan(wire.LOAD, [2]), SHAPE)


def test_the_largest_legal_message_fits_the_frame_cap():
    largest = max(VALID[k].size for k in (wire.RESULT, wire.SNAPSHOT_RESULT, wire.JOB, wire.CATCHUP, wire.LOAD))
    assert largest < SHAPE.max_message_bytes() <= largest + 2 * messages.SLACK_BYTES


# ---- the coordinator, its TCP link and a worker survive -----------------------------------------
class OneMessageLink:
    """The coordinator's link: hands over one message, records refusals and replies."""

    def __init__(self):
        self.next, self.refused, self.sent = None, [], []

    def lost(self):
        return []

    def receive(self, timeout):
        got, self.next = self.next, None
        return got

    def refuse(self, peer, reason):
        self.refused.append(reason)

    def send(self, peer, message):
        self.sent.append(np.array(message))


@FAST
@given(message=mutated((wire.REQUEST, wire.RESULT, wire.SNAPSHOT_RESULT, wire.LEAVE, wire.HELLO)))
def test_the_coordinator_serves_or_refuses_any_message(tmp_path, message):
    c = coordinator(tmp_path, step=1, fitness_history={0: pack_ternary(np.ones(4, np.int8))})
    c.link = OneMessageLink()
    c.link.next = (message, 1)
    c.serve(tmp_path)  # raises nothing: a bad message is refused
    assert c.step in (1, 2) and len(c.link.refused) <= 1


class FakeFrame:
    def __init__(self, data, address="10.0.0.9:4000"):
        self.bytes, self.address = data, address

    def get(self, name):
        return self.address


class FakeRouter:
    def __init__(self):
        self.sent, self.queued = [], []

    def send_multipart(self, frames):
        self.sent.append(frames)

    def poll(self, ms):
        return len(self.queued)

    def recv_multipart(self, copy=True):
        return self.queued.pop(0)


KEYS = derive_keys(token_key(environ={"EGGNOG_TOKEN": "t"}))
RUN = bytes(range(16))


def tcp_link():
    return TcpCoordinatorLink(FakeRouter(), KEYS, {"model": "egg", "config": {}}, "a" * 64, 5.0, RUN)


@FAST
@given(message=mutated(), sealing=st.sampled_from(["run", "admission", "other run", "other direction", "none"]),
       peer=st.sampled_from([b"w", b"0123abcd"]), extra=st.integers(0, 2))
def test_the_tcp_link_admits_or_refuses_any_frames(message, sealing, peer, extra):
    link = tcp_link()
    ready = VALID[wire.READY].tobytes()
    link.admit([FakeFrame(peer), FakeFrame(seal(message_key(KEYS, RUN, "worker>coordinator"), peer, ready)),
                FakeFrame(ready)])
    assert peer in link.workers
    run, direction = {"run": (RUN, "worker>coordinator"), "admission": (b"", "worker>coordinator"),
                      "other run": (bytes(16), "worker>coordinator"), "other direction": (RUN, "coordinator>worker"),
                      "none": (b"x", "none")}[sealing]
    body = message.tobytes()
    frames = [FakeFrame(peer), FakeFrame(seal(message_key(KEYS, run, direction), peer, body)), FakeFrame(body)]
    got = link.admit(frames + [FakeFrame(b"")] * extra)
    if got is not None:  # handed to the coordinator: only a run-sealed message of an admitted worker
        assert sealing == "run" and extra == 0 and got[1] == peer
    kind = wire.kind(message) if message.size >= 8 else None
    if sealing in ("other run", "other direction", "none") and kind not in (wire.HEARTBEAT, wire.HELLO):
        assert got is None and peer not in link.workers  # refused and dropped


def test_the_refusal_log_is_capped_per_peer_address_and_kind(capsys):
    link = tcp_link()
    junk = wire.encode([wire.RESULT]).tobytes()
    for address in ("10.0.0.1:1", "10.0.0.2:1"):
        for n in range(30):
            link.admit([FakeFrame(b"p%d" % n), FakeFrame(b"x" * 32), FakeFrame(junk, address)])
    lines = capsys.readouterr().out.splitlines()
    assert link.refusals == 60
    assert sum("refused" in line for line in lines) == 2 * 20  # each address logged on its own
    assert sum("counted, not logged" in line for line in lines) == 2


@pytest.fixture(scope="module")
def worker(tmp_path_factory):
    from eggnog.corpus.reader import open_corpus
    from eggnog.evolution.es_trainer import val_sample

    path = tiny_corpus(tmp_path_factory.mktemp("corpus"))
    corpus = open_corpus(path)
    cfg = tiny_config(mode="coordinator", population_chunk=CHUNK, optimizer="adamw", data=str(path))
    model = cfg.build_model()
    link = SimpleNamespace(name=1, elastic=False, reply=None)
    link.request = lambda message: link.reply
    link.send = lambda message: None
    return Worker(cfg, link, Backend("cpu"), corpus, model, model.init_params(cfg.seed), 1, val_sample(cfg, corpus))


@settings(max_examples=60, deadline=None, database=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(message=mutated((wire.STOP, wire.WAIT, wire.JOB, wire.CATCHUP, wire.SNAPSHOT, wire.LOAD, wire.REFUSE)))
def test_a_worker_serves_or_refuses_any_answer(worker, message):
    worker.link.reply = message
    at = worker.strategy.step
    try:
        worker.serve_one(0)
    except wire.Malformed:
        assert worker.strategy.step == at  # a refused answer changes nothing
    worker.strategy.step = 1  # the next example starts where this one did


@pytest.mark.parametrize("message", [
    wire.encode([wire.CATCHUP, 1], np.array([255], np.uint8)),  # not a ternary code
    wire.encode([wire.JOB, 0, 1], np.zeros(SHAPE.state_bytes, np.uint8)),  # another step than the worker's
    wire.encode([wire.CATCHUP, 2], np.array([1], np.uint8)),
    wire.encode([wire.SNAPSHOT, 3, 0]),
    with_nan(wire.LOAD, [1]),
])
def test_a_worker_refuses_an_answer_that_does_not_fit_its_replica(worker, message):
    worker.link.reply = message
    params = worker.strategy.host_params().copy()
    with pytest.raises(wire.Malformed):
        worker.serve_one(0)
    assert worker.strategy.step == 1 and np.array_equal(worker.strategy.host_params(), params)


def test_a_worker_ahead_of_a_fresh_run_loads_its_initial_parameters_or_is_refused(tmp_path):
    row = pack_ternary(np.ones(4, np.int8))
    c = coordinator(tmp_path, step=2, fitness_history={0: row, 1: row})
    c.on_request(1, 7)  # ahead, and the run has no snapshot yet
    dest, (kind, step), body = c.link.last(2)
    model = c.cfg.build_model()
    initial = snapshot_bytes(c.cfg, model, model.init_params(c.cfg.seed), full_state(c.cfg, model, {}))
    assert (dest, kind, step) == (1, wire.LOAD, 0) and bytes(body) == initial
    c.on_request(1, 0)  # then it replays the history
    assert c.link.last(2)[1] == [wire.CATCHUP, 0]
    c = coordinator(tmp_path, step=2, fitness_history={1: row})  # step 0 no longer kept: refused, no crash
    with pytest.raises(wire.Malformed, match="can bring to step 2"):
        c.on_request(1, 7)


def test_queued_heartbeats_are_read_before_a_worker_is_declared_lost():
    link = tcp_link()
    ready = VALID[wire.READY].tobytes()
    link.admit([FakeFrame(b"w"), FakeFrame(seal(message_key(KEYS, RUN, "worker>coordinator"), b"w", ready)),
                FakeFrame(ready)])
    link.workers[b"w"]["last_seen"] -= 10.0  # silent for longer than the timeout, as far as was read
    beat = wire.encode([wire.HEARTBEAT], np.frombuffer(b"w", np.uint8)).tobytes()
    junk = wire.encode([wire.RESULT]).tobytes()
    link.socket.queued = [[FakeFrame(b"flood"), FakeFrame(b"x" * 32), FakeFrame(junk)]] * 500
    link.socket.queued += [[FakeFrame(b"beat"), FakeFrame(seal(message_key(KEYS, RUN, "heartbeat"), b"w", beat)),
                            FakeFrame(beat)]]
    assert link.lost() == [] and not link.socket.queued  # the beat behind the flood was read
    link.workers[b"w"]["last_seen"] -= 10.0
    assert link.lost() == [b"w"]


def welcome_of(cfg):
    from dataclasses import asdict

    return {"model": cfg.model_name, "config": asdict(cfg), "run_id": "0" * 32}


TCP_CFG = tiny_config(mode="coordinator", population_chunk=CHUNK, transport="tcp")


def test_a_worker_takes_the_coordinators_configuration_and_refuses_a_bad_one():
    from eggnog.evolution.coordinator.tcp_worker import config_of
    from eggnog.runtime.errors import BadInput

    assert config_of(welcome_of(TCP_CFG), None) == TCP_CFG
    transformer = tiny_config("transformer", mode="coordinator", population_chunk=CHUNK, transport="tcp")
    assert config_of(welcome_of(transformer), None) == transformer
    for field, value, says in [("dim", "x", "dim = 'x'"), ("dim", 1.5, "dim = 1.5"),
                               ("fast_fitness", 1, "fast_fitness"), ("population", -8, "does not check"),
                               ("population_chunk", 3, "does not check"), ("token_file", [1], "token_file")]:
        welcome = welcome_of(TCP_CFG)
        welcome["config"][field] = value
        with pytest.raises(BadInput, match=says):
            config_of(welcome, None)


@FAST
@given(changes=st.dictionaries(st.sampled_from(sorted(welcome_of(TCP_CFG)["config"])),
                               st.one_of(st.none(), st.booleans(), st.integers(-2**40, 2**40),
                                         st.floats(allow_nan=True), st.text(max_size=8)), max_size=4))
def test_any_configuration_in_a_welcome_is_taken_or_refused_in_one_sentence(changes):
    from eggnog.evolution.coordinator.tcp_worker import config_of
    from eggnog.runtime.errors import BadInput

    welcome = welcome_of(TCP_CFG)
    welcome["config"].update(changes)
    try:
        config_of(welcome, None)
    except BadInput:
        pass


def test_a_run_keeps_its_run_id_on_resume_and_another_run_has_another(tmp_path):
    from eggnog.evolution.coordinator.trainer import RUN_ID_FILE, run_id

    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    first = run_id(tmp_path / "a")
    assert len(first) == 16 and run_id(tmp_path / "a") == first and run_id(tmp_path / "b") != first
    (tmp_path / "a" / RUN_ID_FILE).write_bytes(b"\xff\xfe not hex")
    drawn = run_id(tmp_path / "a")
    assert drawn != first and run_id(tmp_path / "a") == drawn
