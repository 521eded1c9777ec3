"""Faults of runs under MPI (bench/faults/mpi.py drives them: mpiexec jobs of a tiny model on the
CPU): a rank killed with kill -9, a gossip run stopped by SIGINT or SIGTERM, a gossip island killed."""

import signal

import pytest

from bench.faults import mpi as cases

pytestmark = pytest.mark.skipif(cases.MPIEXEC is None, reason="no mpiexec")


def assert_resumed(result):
    assert result["resumed_status"] == 0, result["resumed_output"]
    assert result["steps_logged_once"], result


@pytest.mark.parametrize("mode", ["sync", "coordinator"])
def test_a_killed_rank_ends_the_job_which_resumes_from_its_checkpoint(tmp_path, fault_corpus, mode):
    """Lost: the steps since the last checkpoint, redone after --resume."""
    result = cases.es_rank_killed(tmp_path, fault_corpus, mode=mode)
    assert result["exit_status"] != 0 and result["seconds_to_exit"] < 10, result
    assert result["resume_printed"], result
    assert_resumed(result)


def test_sigint_to_mpiexec_saves_every_island_at_the_same_step_and_resumes(tmp_path, fault_corpus):
    """Lost: nothing; every island finishes the round under way and saves it."""
    result = cases.gossip_stopped(tmp_path, fault_corpus, signal.SIGINT)
    assert result["exit_status"] == 130, result
    assert len(set(result["islands_saved"])) == 1 and result["steps_lost"] == 0, result
    assert result["resume_printed"], result
    assert_resumed(result)


def test_sigterm_to_one_island_stops_them_all_at_the_same_step(tmp_path, fault_corpus):
    """Lost: nothing; the signalled rank tells the others, which walk on to the furthest round and save."""
    result = cases.gossip_stopped(tmp_path, fault_corpus, signal.SIGTERM, to_rank=1, resume=False)
    assert result["exit_status"] == 143, result
    assert len(set(result["islands_saved"])) == 1 and result["steps_lost"] == 0, result


def test_a_killed_island_ends_the_gossip_job_which_resumes(tmp_path, fault_corpus):
    """Lost: each island's steps since its own last checkpoint (MPICH ends the whole job)."""
    result = cases.gossip_island_killed(tmp_path, fault_corpus)
    assert result["exit_status"] != 0 and result["seconds_to_exit"] < 10, result
    assert result["resume_printed"], result
    assert_resumed(result)
