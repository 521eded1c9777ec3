"""A TCP coordinator killed and resumed, and a coordinator sent what it must refuse (processes on
this machine): the run goes on and ends with the synchronous trainer's parameters."""

import sysconfig
from pathlib import Path

from bench.faults import tcp as cases
from eggnog.corpus.prepare import prepare
from eggnog.evolution.coordinator import wire
from tests.faults.test_tcp_workers import assert_undamaged


def test_the_coordinator_killed_and_resumed_the_workers_come_back_by_themselves(tmp_path, fault_corpus,
                                                                                  reference):
    result = cases.coordinator_killed(tmp_path, fault_corpus, reference)
    assert_undamaged(result)
    assert result["workers"] == [0, 0, 0], result  # each reconnected and was stopped at the end
    assert result["steps_redone"] >= 1
    logs = [(tmp_path / f"worker{i}.log").read_text() for i in range(3)]
    assert all("asking to be admitted again" in log for log in logs), logs


def test_wrong_tokens_broken_messages_and_other_workers_are_refused_and_the_run_goes_on(tmp_path, fault_corpus,
                                                                                       reference):
    other = tmp_path / "other.bin"
    prepare([str(Path(sysconfig.get_paths()["stdlib"]) / "html")], other, val_fraction=0.3)
    result = cases.bad_messages(tmp_path / "case", fault_corpus, reference, other)
    assert_undamaged(result)
    assert result["workers"] == [0, 0]
    refused = [wire.REFUSE]
    assert result["answers"] == {"wrong token": [], "corrupted": refused, "truncated": refused,
                                 "short header": refused, "other version": refused,
                                 "result before admission": [wire.WELCOME, wire.REFUSE]}, result["answers"]
    assert result["other_corpus_status"] == 2 and "configuration or corpus differs" in result["other_corpus_log"]
    assert result["refusals"] == 6  # the wrong token's handshake failed: nothing of it was read or logged
