"""Hostile and broken peers of a TCP coordinator (processes on this machine): every attack is refused or
survived, no step is lost and the final parameters equal the synchronous trainer's bit for bit. Each
case's docstring in bench/faults/tcp_hostile.py says what it sends."""

from bench.faults import tcp_hostile as cases
from eggnog.evolution.coordinator import wire
from tests.faults.test_tcp_workers import assert_undamaged


def test_captured_connections_replayed_without_the_token_admit_no_one_and_keep_no_dead_worker_alive(
        tmp_path, fault_corpus, reference):
    result = cases.captured_replays(tmp_path, fault_corpus, reference)
    assert_undamaged(result)
    assert result["connections_captured"] >= 3 and result["admitted_by_replay"] == 0, result
    assert result["most_bytes_back"] < 512, result  # the handshake's bytes, never a WELCOME, LOAD or CATCHUP
    assert result["victim_lost_after_s"] is not None and result["victim_lost_after_s"] < 5.0 + 2.0, result


def test_messages_sealed_for_another_run_direction_or_connection_and_malformed_fields_are_refused(
        tmp_path, fault_corpus, reference):
    result = cases.sealed_elsewhere_and_malformed(tmp_path, fault_corpus, reference)
    assert_undamaged(result)
    assert result["workers"] == [0, 0]
    assert result["attacks_refused"] == result["attacks"] == 17, result["answers"]
    assert all(a == [wire.REFUSE] * len(a) for a in result["answers"].values()), result["answers"]


def test_huge_frames_are_not_read(tmp_path, fault_corpus, reference):
    result = cases.huge_frames(tmp_path, fault_corpus, reference)
    assert_undamaged(result)
    assert result["peak_rss_mb_after"] - result["peak_rss_mb_before"] < 100, result
    assert result["answer_to_token_holder"] is None and result["workers_lost"] == 0, result


def test_a_leftover_worker_of_an_earlier_run_ahead_of_a_new_one_starts_afresh(tmp_path, fault_corpus, reference):
    result = cases.leftover_worker(tmp_path, fault_corpus, reference)
    assert_undamaged(result)
    assert result["leftover_was_at"] >= 10 and result["leftover_restarted"] and result["leftover_status"] == 0, result
