"""No flag value gives a traceback or a run that cannot fit: non-finite floats and out-of-range seeds
are refused, every size is checked against its meaning, and the host memory a run would need is
estimated from its config and refused before anything is allocated or written (1e9 below means the
integer 1000000000)."""

import pytest

from tests.helpers import assert_user_error, run_script

BIG = "1000000000"
NEEDS = "of host memory per rank"


@pytest.mark.parametrize("script,args,message", [
    ("train_es.py", ["--seed", "-1"], "--seed must lie in [0, 2^63), got -1"),
    ("train_es.py", ["--alpha", BIG], "--alpha must be at most 64"),
    ("train_es.py", ["--alpha", "inf"], "--alpha must be a finite number, got inf"),
    ("train_es.py", ["--alpha", "nan"], "--alpha must be a finite number, got nan"),
    ("train_bptt.py", ["--expansion-factor", "nan"], "--expansion-factor must be a finite number"),
    ("train_bptt.py", ["--ff-mult", "nan"], "--ff-mult must be a finite number"),
    ("train_bptt.py", ["--ff-mult", BIG], "GiB of host memory"),
    ("train_bptt.py", ["--dim", BIG], "GiB of host memory"),
    ("train_bptt.py", ["--depth", BIG], "GiB of host memory"),
    ("train_bptt.py", ["--batch-size", BIG], "GiB of host memory"),
    ("train_rge.py", ["--target-loss", "nan"], "--target-loss must be a finite number, got nan"),
    ("train_rge.py", ["--hidden-size", BIG, "--num-heads", "1"], NEEDS),
    ("train_rge.py", ["--input-size", BIG], NEEDS),
    ("train_rge.py", ["--batch-size", BIG], NEEDS),
    ("train_rge.py", ["--max-seq-len", BIG], NEEDS),
    ("train_rge.py", ["--probes", str(10**12)], NEEDS),
    ("train_es.py", ["--depth", BIG], NEEDS),
    ("train_es.py", ["--n-embd", BIG], NEEDS),
    ("train_es.py", ["--model", "transformer", "--depth", BIG], NEEDS),
    ("train_es.py", ["--model", "mingru", "--population", BIG], NEEDS),
    ("train_es.py", ["--model", "mingru", "--perturbation-rank", BIG], "--perturbation-rank must be at most --dim"),
    ("train_gossip.py", ["--trainer", "egg", "--population", BIG], NEEDS),
    ("print_arch.py", ["egg", "--depth", BIG], "--depth must be at most 100,000"),
])
def test_bad_values_get_one_sentence_and_nothing_written(tmp_path, script, args, message):
    run = tmp_path / "run"
    extra = [] if script == "print_arch.py" else ["--run-dir", run]
    assert_user_error(run_script(script, *args, *extra, timeout=120), message)
    assert not run.exists()
