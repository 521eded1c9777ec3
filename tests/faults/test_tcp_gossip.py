"""Gossip islands over TCP, as processes on this machine, through the failures of bench/faults/__main__.py:
a kill in mid-transfer, islands killed and one restarted, a partition, a slow island, bad messages.
The partition lasts 6 s here (30 s in the bench); runs are longer than the bench's where islands
must overlap in time, since a loaded test machine starts them unevenly."""

import subprocess
import sys

import pytest

from bench.faults import gossip as cases
from bench.faults import gossip_hostile as hostile
from bench.faults.coordinator_cluster import quiet_env
from bench.faults.gossip_cluster import RUN, GossipCluster
from eggnog.runtime.rundir import read_jsonl
from tests.helpers import ROOT

LONG = 150  # steps of 50 ms


@pytest.fixture(scope="module")
def undisturbed(tmp_path_factory, fault_corpus):
    return cases.undisturbed(tmp_path_factory.mktemp("undisturbed"), fault_corpus, steps=LONG)


def assert_finished(result, islands):
    assert all(result["status"][n] == 0 for n in islands), result
    assert result["steps_lost"] == 0, result


def test_four_islands_meet_and_merge(undisturbed):
    assert_finished(undisturbed, range(4))
    assert all(count > 0 for count in undisturbed["merges"].values()), undisturbed
    assert undisturbed["refused"] == 0


def test_a_kill_in_mid_transfer_leaves_the_others_to_finish_with_whole_models_only(tmp_path, fault_corpus,
                                                                                   undisturbed):
    result = cases.compared(cases.killed_mid_transfer(tmp_path, fault_corpus, steps=LONG), undisturbed)
    assert_finished(result, range(3))
    assert result["status"][3] == -9, result
    assert result["partial_models_merged"] == 0 and result["refused"] == 0, result
    assert result["fitness_within_noise"], result


def test_two_of_six_killed_and_the_restarted_one_rejoins_from_its_checkpoint(tmp_path, fault_corpus):
    result = cases.two_of_six_killed_one_restarted(tmp_path, fault_corpus, steps=400)
    assert_finished(result, range(5))
    assert result["restarted_from"].startswith("from its own checkpoint"), result
    assert result["models_received_after_restart"] >= 1, result


def test_a_partitioned_island_is_dropped_and_comes_back(tmp_path, fault_corpus):
    result = cases.partitioned(tmp_path, fault_corpus, seconds=6.0)
    assert_finished(result, range(4))
    assert all(count > 0 for count in result["others_mixes_during"].values()), result
    assert result["partitioned_mixes_after"] > 0, result


def test_the_others_do_not_wait_for_a_slow_island_and_it_catches_up_from_disk(tmp_path, fault_corpus):
    result = cases.slow_island(tmp_path, fault_corpus)
    assert_finished(result, range(3))
    assert result["status"][3] in (0, 143), result  # finished from the step it caught up to, or stopped, saved
    assert result["slow_island_steps"] < cases.STEPS // 2, result  # the others finished long before it
    assert result["slow_island_catch_ups"] >= 1 and result["catch_up_took_the_step"], result


def test_bad_messages_are_refused_counted_and_never_merged(tmp_path, fault_corpus):
    result = cases.bad_messages(tmp_path, fault_corpus)
    assert_finished(result, range(2))
    assert result["answers"] == {"wrong token": "no answer", "corrupted": "refused",
                                 "another configuration": "refused", "unreadable record": "no answer",
                                 "offer": "send-me"}, result
    assert result["intruder_merges"] == 0
    assert result["refusals_counted"] == 4, result  # the wrong token never reaches the island
    assert "not this island's" in result["refusal_reasons"][-1]


def test_an_island_without_checkpoints_of_its_own_starts_from_the_populations_best(tmp_path, fault_corpus):
    cluster = GossipCluster(tmp_path, fault_corpus, 12, peer_timeout=0.5)
    try:
        for n in range(2):
            cluster.start(n)
        assert cluster.finish(range(2)) == {0: 0, 1: 0}
        best = (cluster.run_dir / "checkpoints" / "best").resolve().name
        cluster.start(2)  # a new island, with the others gone
        assert cluster.finish([2]) == {2: 0}, cluster.log(2)
    finally:
        cluster.stop_all()
    start = cluster.events(2)[0]
    assert start["event"] == "start" and start["origin"] == f"from the population's best checkpoint ({best})"
    assert start["fitness"] is not None  # the best checkpoint's fitness came with it
    # the late island is in the run's records: its last summary counts it, and `latest` is its final checkpoint
    summary = read_jsonl(cluster.run_dir / "metrics.jsonl")[-1]
    assert summary["written_by"] == 2 and summary["steps"][2] == 12, summary
    latest = (cluster.run_dir / "checkpoints" / "latest").resolve()
    assert latest.parent.parent.name == "rank-02", latest


EGG = dict(trainer="egg", depth=1, dim=8, population=8, group_size=2, tokens_per_update=8, validate_every=4,
           checkpoint_every=4, val_rows=4, val_tokens=16, seed=3, gossip_mixing_rate=0.5)
RGE = dict(trainer="rge", max_seq_len=8, hidden_size=8, num_heads=2, batch_size=4, probes=4, checkpoint_every=4, seed=3,
           gossip_mixing_rate=0.5)


@pytest.mark.parametrize("base,corpus", [(EGG, True), (RGE, False)], ids=["egg", "rge"])
def test_egg_and_cd_rge_islands_gossip_over_tcp_too(tmp_path, fault_corpus, base, corpus):
    cluster = GossipCluster(tmp_path, fault_corpus if corpus else None, 12, step_seconds=0.1, base=base)
    try:
        for n in range(2):
            cluster.start(n)
        assert cluster.finish(range(2)) == {0: 0, 1: 0}, cluster.log(0) + cluster.log(1)
        assert sum(e["event"] == "mix_merge" for n in range(2) for e in cluster.events(n)) > 0
        assert all(cluster.step_of(n) == 12 for n in range(2))
    finally:
        cluster.stop_all()


def test_the_tcp_events_log_has_the_mpi_runs_kinds_of_events(tmp_path, fault_corpus):
    """The same tournament events, with at least the MPI run's fields, as a 4-rank MPI run's log."""
    cluster = GossipCluster(tmp_path / "tcp", fault_corpus, 30, step_seconds=0.2)
    try:
        for n in range(4):
            cluster.start(n)
        assert cluster.finish(range(4)) == {0: 0, 1: 0, 2: 0, 3: 0}
        tcp_events = [e for n in range(4) for e in cluster.events(n)]
    finally:
        cluster.stop_all()
    flags = [f"--{k.replace('_', '-')}={v}" for k, v in RUN.items() if k not in ("catch_up_steps",)]
    mpi_run = tmp_path / "mpi"
    subprocess.run(["mpiexec", "-n", "4", sys.executable, f"{ROOT}/bin/train_gossip.py", *flags, "--steps=30",
                    f"--data={fault_corpus}", "--backend=cpu", "--no-plots", f"--run-dir={mpi_run}"],
                   env=quiet_env(), check=True, capture_output=True, timeout=300)
    mpi_events = [e for n in range(4) for e in read_jsonl(mpi_run / f"rank-{n:02d}" / "events.jsonl")]
    tournament = {"start", "mix_attempt", "mix_decision", "mix_send", "mix_receive", "mix_merge", "save"}
    for kind in tournament:
        mpi_keys = set().union(*(e.keys() for e in mpi_events if e["event"] == kind))
        tcp_keys = set().union(*(e.keys() for e in tcp_events if e["event"] == kind))
        assert mpi_keys and mpi_keys <= tcp_keys, (kind, mpi_keys - tcp_keys)
    assert {e["event"] for e in mpi_events} <= {e["event"] for e in tcp_events} | {"stop"}


# ---- hostile peers (bench/faults/gossip_hostile.py) ------------------------------------------

def test_a_token_holders_bad_fields_replays_and_poisoned_models_are_refused_and_never_merged(tmp_path, fault_corpus,
                                                                                             undisturbed):
    result = cases.compared(hostile.bad_fields(tmp_path, fault_corpus, steps=LONG), undisturbed)
    assert_finished(result, range(2))
    answers = result["answers"]
    assert {answers[k] for k in ("offer without merge", "offer with fitness null", "offer an hour old")} == {
        "no answer"}, answers
    for k in ("offer replayed on another connection", "offer sealed in the wrong direction",
              "offer of another run (a leftover island)"):
        assert answers[k] == "refused", answers
    assert all(v == "send-me" for k, v in answers.items() if k.startswith("offer before")), answers
    assert result["intruder_merges"] == 0 and result["refusals_counted"] == 9, result
    reasons = " | ".join(result["refusal_reasons"])
    for said in ("missing ['merge']", "fitness None", "not within", "sealed for another run", "not finite",
                 "not this island's", "echo"):
        assert said in reasons, (said, reasons)


def test_a_relay_in_the_rendezvous_folder_is_refused_and_its_capture_replays_to_nothing(tmp_path, fault_corpus,
                                                                                        undisturbed):
    result = cases.compared(hostile.relay_and_replay(tmp_path, fault_corpus, steps=LONG), undisturbed)
    assert_finished(result, range(2))
    assert result["relayed_connections"] >= 1 and not result["plaintext_seen"], result
    assert result["relay_refusals"] >= 1 and result["relay_dropped"], result
    assert result["replays"] >= 1 and result["other_refusals"] == [] and result["replay_merges"] == 0, result


def test_huge_frames_are_dropped_unread(tmp_path, fault_corpus, undisturbed):
    result = cases.compared(hostile.huge_frames(tmp_path, fault_corpus, steps=LONG), undisturbed)
    assert_finished(result, range(2))
    assert result["holder_answer"] == "no answer" and result["refusals_counted"] == 0, result
    assert result["rss_mb_after"] < result["rss_mb_before"] + 50, result  # not 5 x 200 MB read
    assert result["junk_bytes_taken"] < 5 * (200 << 20), result


def test_bad_shared_files_are_ignored_with_one_line_each(tmp_path, fault_corpus, undisturbed):
    result = cases.compared(hostile.bad_files(tmp_path, fault_corpus, steps=LONG), undisturbed)
    assert_finished(result, range(2))
    for reasons in result["bad_files_logged"].values():
        assert len(reasons) == 4, result  # island-07, island-08, rank-05, rank-06: once each
    assert result["fitness_within_noise"], result
