"""Coordinator mode without MPI: the coordinator's decisions message by message (through a comm that
records what it sends), d-eggs chunk shaping, and the flags it refuses. The runs on 4 ranks are in
tests/mpi/test_coordinator_mpi.py."""

import numpy as np
import pytest

from eggnog.evolution.coordinator import wire
from eggnog.evolution.coordinator.chunk_shaping import ternary_fitness
from eggnog.evolution.coordinator.coordinator import Coordinator, history_from
from eggnog.evolution.fitness import pack_ternary, pair_signs, unpack_ternary
from eggnog.runtime.checkpoint import load_checkpoint
from eggnog.runtime.errors import BadInput
from eggnog.runtime.world import World
from tests.es_helpers import tiny_config
from tests.helpers import assert_user_error, run_script

POP, CHUNK, DEPTH, DIM = 8, 2, 1, 8


class RecordingLink:
    """A coordinator's link that records what it sends."""

    def __init__(self):
        self.sent = []

    def send(self, dest, message):
        self.sent.append((dest, np.array(message)))

    def last(self, fields):
        dest, message = self.sent[-1]
        return dest, wire.header(message, fields), wire.payload(message, fields)


def coordinator(tmp_path, step=0, fitness_history=None, **overrides):
    cfg = tiny_config(**{**dict(mode="coordinator", population_chunk=CHUNK, steps=4, checkpoint_every=2,
                               validate_every=2), **overrides})
    states = np.arange(cfg.population * DEPTH * DIM, dtype=np.int64).astype(np.int8).reshape(-1, DEPTH, DIM)
    c = Coordinator(cfg, World(None, 0, 4, 0, 4), RecordingLink(), step, states, fitness_history or {}, None, (4, 16))
    from eggnog.runtime.rundir import metrics_log

    (tmp_path / "checkpoints").mkdir(exist_ok=True)
    c.log, c.started = metrics_log(c.world, tmp_path), 0.0
    c.begin_step()
    return c


def result(step, chunk, signs, loglik=-100, states=None):
    packed = pack_ternary(np.asarray(signs, np.int8))
    states = np.full((CHUNK, DEPTH, DIM), chunk + 1, np.int8) if states is None else states
    return wire.encode([wire.RESULT, step, chunk, loglik, 0, packed.size], packed, states)


def test_chunks_go_out_once_each_then_a_straggler_is_handed_out_again(tmp_path):
    c = coordinator(tmp_path, straggler_timeout=0.05)
    handed = []
    for worker in (1, 2, 3, 1):
        c.on_request(worker, 0)
        dest, (kind, step, chunk), states = c.link.last(3)
        assert (dest, kind, step) == (worker, wire.JOB, 0)
        assert np.array_equal(states.view(np.int8).reshape(CHUNK, DEPTH, DIM), c.states[chunk * CHUNK:][:CHUNK])
        handed.append(chunk)
    assert handed == [0, 1, 2, 3]
    c.on_request(2, 0)
    assert c.link.last(1)[1] == [wire.WAIT]  # every chunk in progress and young
    for chunk in (1, 2, 3):
        c.on_result(result(0, chunk, [1]))
    c.assigned_at[0] -= 1.0  # chunk 0 is now past the timeout
    c.on_request(3, 0)
    assert c.link.last(3)[1] == [wire.JOB, 0, 0] and c.counts["requeued"] == 1


def test_the_first_result_wins_and_late_or_stale_ones_are_counted(tmp_path):
    c = coordinator(tmp_path)
    for worker in (1, 2, 3, 1):
        c.on_request(worker, 0)
    c.on_result(result(0, 1, [-1], loglik=-10))
    c.on_result(result(0, 1, [1], loglik=-99, states=np.zeros((CHUNK, DEPTH, DIM), np.int8)))  # a redo's copy
    assert c.counts["duplicates"] == 1 and c.fitness[1] == -1 and (c.states[2:4] == 2).all()
    c.on_result(result(0, 0, [1], loglik=-20))
    c.on_result(result(0, 2, [0], loglik=-30))
    c.on_result(result(0, 3, [1], loglik=-40))
    assert c.step == 1 and c.record["train_bpb"] == pytest.approx(100 / (16 * POP * 8), abs=1e-5)
    assert np.array_equal(unpack_ternary(c.history[0], POP // 2), [1, -1, 0, 1])
    c.on_result(result(0, 2, [1]))  # after the step moved on
    assert c.counts["stale"] == 1


def test_chunks_of_whole_packed_bytes_are_joined_without_unpacking(tmp_path):
    c = coordinator(tmp_path, population=40, population_chunk=20)  # 10 pairs: 2 bytes a chunk
    signs = np.random.default_rng(0).integers(-1, 2, 20).astype(np.int8)
    for chunk in (1, 0):
        c.on_request(1, 0)
        packed = pack_ternary(signs[chunk * 10:(chunk + 1) * 10])
        states = np.zeros((20, DEPTH, DIM), np.int8)
        c.on_result(wire.encode([wire.RESULT, 0, chunk, -1, 0, packed.size], packed, states))
    assert c.step == 1 and np.array_equal(c.history[0], pack_ternary(signs))


def test_a_worker_behind_replays_the_history_or_loads_a_snapshot(tmp_path):
    history = {3: pack_ternary([1, 0, -1, 1]), 4: pack_ternary([-1, -1, 0, 0])}
    c = coordinator(tmp_path, step=5, fitness_history=history, steps=9, history=2)
    c.on_request(1, 4)
    dest, (kind, step), packed = c.link.last(2)
    assert (dest, kind, step) == (1, wire.CATCHUP, 4) and np.array_equal(packed, history[4])
    with pytest.raises(wire.Malformed, match="raise --history"):
        c.on_request(2, 1)
    c.latest = (3, bytes(range(100)))
    for behind_or_ahead in (1, 7):  # past the history; ahead of a coordinator resumed at step 5
        c.on_request(2, behind_or_ahead)
        dest, (kind, step), body = c.link.last(2)
        assert (kind, step, bytes(body)) == (wire.LOAD, 3, c.latest[1])
    c.latest = (4, b"")  # replaying step 3 (1 byte) would move more bytes than this (empty) snapshot
    c.on_request(2, 3)
    assert c.link.last(2)[1] == [wire.LOAD, 4]
    c.latest = (4, bytes(100))
    c.on_request(2, 3)
    assert c.link.last(2)[1] == [wire.CATCHUP, 3]


def test_a_slow_chunk_gets_a_backup_copy_once_nothing_else_is_free(tmp_path):
    c = coordinator(tmp_path, straggler_timeout=1e9, straggler_factor=2.0)
    for worker in (1, 2, 3, 4):
        c.on_request(worker, 0)
    c.assigned_at[1:] -= 1.0  # chunks 1-3 took 1 s each; chunk 0 was handed out 1 s later
    for chunk in (1, 2, 3):
        c.on_result(result(0, chunk, [1]))
    c.on_request(2, 0)
    assert c.link.last(1)[1] == [wire.WAIT]  # chunk 0 is 0 s old: not yet 2 x the median 1 s
    c.assigned_at[0] -= 2.5
    c.on_request(2, 0)
    assert c.link.last(3)[1] == [wire.JOB, 0, 0] and c.counts["requeued"] == 1
    c.on_request(3, 0)
    assert c.link.last(1)[1] == [wire.WAIT]  # the backup's clock starts again
    c.cfg = c.cfg.__class__(**{**c.cfg.__dict__, "straggler_factor": 0.0})  # d-eggs: only the timeout
    c.assigned_at[0] -= 100.0
    c.on_request(3, 0)
    assert c.link.last(1)[1] == [wire.WAIT]


def test_a_lost_workers_chunks_go_to_the_next_that_asks(tmp_path):
    c = coordinator(tmp_path, straggler_timeout=1e9, straggler_factor=0.0)
    for worker in (1, 2, 3, 1):
        c.on_request(worker, 0)
    c.on_request(2, 0)
    assert c.link.last(1)[1] == [wire.WAIT]
    c.forget(1)  # held chunks 0 and 3
    got = []
    for worker in (2, 3):
        c.on_request(worker, 0)
        got.append(c.link.last(3)[1][2])
    assert sorted(got) == [0, 3] and c.counts["requeued"] == 2
    c.on_request(2, 0)
    assert c.link.last(1)[1] == [wire.WAIT]


@pytest.mark.parametrize("damage", ["short header", "chunk out of range", "truncated payload", "unknown kind"])
def test_a_malformed_result_is_refused_without_touching_the_step(tmp_path, damage):
    c = coordinator(tmp_path)
    c.on_request(1, 0)
    message = {"short header": result(0, 0, [1])[:20],
               "chunk out of range": result(0, 9, [1]),
               "truncated payload": result(0, 0, [1])[:-3],
               "unknown kind": wire.encode([99, 0])}[damage]
    refused = []
    c.link.lost, c.link.refuse = (lambda: []), (lambda peer, reason: refused.append(peer))
    c.link.receive = lambda timeout: (message, 1)
    c.serve(tmp_path)
    assert refused == [1] and not c.done.any() and not c.fitness.any()


def test_a_checkpoint_step_waits_for_one_snapshot_and_stores_the_history(tmp_path):
    c = coordinator(tmp_path, step=1, fitness_history={0: pack_ternary([1, 1, 0, -1])})
    for worker in (1, 2, 3, 1):
        c.on_request(worker, 1)
    for chunk in range(4):
        c.on_result(result(1, chunk, [1]))
    assert c.step == 2 and c.snapshot is not None
    c.on_request(3, 1)
    assert c.link.last(2)[1] == [wire.CATCHUP, 1]
    c.on_request(2, 2)
    assert c.link.last(3)[1] == [wire.SNAPSHOT, 2, 1]
    c.on_request(1, 2)
    assert c.link.last(1)[1] == [wire.WAIT]  # nobody starts step 2 before the snapshot is in
    params = (np.arange(c.model.n_params) % 100 - 50).astype(np.int8)
    c.on_snapshot(wire.encode([wire.SNAPSHOT_RESULT, 2, 1, -64 * 16], params), tmp_path)
    arrays, record = load_checkpoint(tmp_path)
    assert record["step"] == 2 and np.array_equal(arrays["params"], params)
    assert np.array_equal(arrays["states"], c.states)
    assert sorted(history_from(arrays)) == [0, 1]
    assert c.snapshot is None and c.record["val_bpb"] == pytest.approx(1.0)
    c.on_request(1, 2)
    assert c.link.last(3)[1][:2] == [wire.JOB, 2]


@pytest.mark.parametrize("mean_filter, threshold, scores, expected", [
    (False, False, [5, 3, 1, 1, 0, 7], [1, 0, -1]),
    (True, False, [10, 0, 0, 2, 4, 0], [1, 1, 1]),  # m = 4 -> +trunc(4^1.2) = +5: [15, 3, 9]
    (True, False, [0, 10, 2, 0], [-1, -1]),  # m = -4 -> -5: [-15, -3]
    (False, True, [100, 0, 3, 0, 0, 50, 0, 0], [1, 0, -1, 0]),  # 0.1 x mean|d| = 3.825
    (False, True, [100, 0, 4, 0, 0, 50, 0, 0], [1, 1, -1, 0]),  # 0.1 x mean|d| = 3.85
])
def test_chunk_shaping_follows_d_eggs(mean_filter, threshold, scores, expected):
    got = ternary_fitness(np.array(scores), mean_filter, threshold)
    assert got.dtype == np.int8 and got.tolist() == expected
    if not (mean_filter or threshold):
        assert np.array_equal(got, pair_signs(scores))


@pytest.mark.parametrize("overrides, ranks, message", [
    (dict(mode="coordinator"), 1, "needs at least 2 ranks"),
    (dict(mode="ring"), 4, "unknown --mode 'ring'"),
    (dict(mode="coordinator", population_chunk=3), 4, "--population-chunk 3 must be even"),
    (dict(mode="coordinator", population_chunk=16), 4, "divide the population 8"),
    (dict(mode="coordinator", fast_fitness=False), 4, "needs --fast-fitness"),
    (dict(mode="coordinator", population_chunk=2, straggler_timeout=0.0), 4, "--straggler-timeout must be positive"),
    (dict(mode="coordinator", population_chunk=2, history=2, checkpoint_every=3), 4, "--history 2 must be at least"),
    (dict(mode="coordinator", population_chunk=2, straggler_factor=-1.0), 4, "--straggler-factor must be 0"),
    (dict(mode="coordinator", population_chunk=2, transport="udp"), 4, "unknown --transport 'udp'"),
    (dict(mode="coordinator", population_chunk=2, transport="tcp"), 4, "as one process, not 4 ranks"),
    (dict(mode="coordinator", population_chunk=2, transport="tcp", listen="12345"), 1, "is not HOST:PORT"),
    (dict(mode="coordinator", population_chunk=2, transport="tcp", listen="h:99999"), 1, "is not HOST:PORT"),
    (dict(mode="coordinator", population_chunk=2, transport="tcp", heartbeat_timeout=0.0), 1,
     "--heartbeat-timeout must be positive"),
    (dict(transport="tcp"), 1, "add --mode coordinator"),
    (dict(chunk_mean_filter=True), 4, "need --mode coordinator"),
    (dict(adaptive_threshold=True), 1, "need --mode coordinator"),
])
def test_bad_coordinator_settings_are_refused(overrides, ranks, message):
    with pytest.raises(BadInput, match=message.replace("(", r"\(")):
        tiny_config(**overrides).check(ranks)


def test_coordinator_mode_on_one_process_exits_2_with_one_sentence(tmp_path):
    result = run_script("train_es.py", "--mode", "coordinator", "--run-dir", tmp_path / "run", "--backend", "cpu")
    assert_user_error(result, "needs at least 2 ranks")
    assert not (tmp_path / "run").exists()


def test_runs_stored_before_the_coordinator_flags_still_resume():
    from dataclasses import asdict

    from eggnog.evolution.es_trainer import check_resume

    cfg = tiny_config()
    stored = {k: v for k, v in asdict(cfg).items()
              if k not in ("mode", "population_chunk", "straggler_timeout", "history", "chunk_mean_filter",
                           "adaptive_threshold")}
    check_resume(stored, asdict(cfg))
    with pytest.raises(BadInput, match="chunk_mean_filter"):
        check_resume(stored, asdict(tiny_config(chunk_mean_filter=True, mode="coordinator")))
