"""Workers of a TCP coordinator killed, joining late, or slow (processes on this machine): the run
finishes, every step is logged once, and the final parameters equal the synchronous trainer's bit for
bit. Each case's docstring in bench/faults/tcp.py says what it loses."""

from bench.faults import tcp as cases


def assert_undamaged(result):
    assert result["status"] == 0, result
    assert result["steps_lost"] == 0 and result["steps_logged_twice"] == 0, result
    assert result["params_equal"], result


def test_one_of_three_workers_killed(tmp_path, fault_corpus, reference):
    result = cases.one_of_three_killed(tmp_path, fault_corpus, reference)
    assert_undamaged(result)
    assert result["workers"] == [None, 0, 0] and result["chunks_redone"] >= 1


def test_two_of_four_killed_and_two_new_ones_join(tmp_path, fault_corpus, reference):
    result = cases.two_killed_two_joined(tmp_path, fault_corpus, reference)
    assert_undamaged(result)
    assert result["workers"] == [None, None, 0, 0, 0, 0] and result["chunks_redone"] >= 1


def test_a_ten_times_slower_worker_costs_at_most_half_a_step(tmp_path, fault_corpus, reference):
    result = cases.slow_worker(tmp_path, fault_corpus, reference)
    assert_undamaged(result)
    assert result["chunks_redone"] >= 1, result
    assert result["time_ratio"] <= 1.5, result
