"""bench/dynamics/nano_egg.py at a tiny size without JAX: a fake peer (a script run by this Python in place
of bench/peers/nano_egg_train.py) answers with fixed curves after checking the data files it was given, so
eggnog's runs, the JSON, the plot and the verdicts run for real; bad flags and a missing peer exit 2 with
no result."""

import json
import sys

import numpy as np
import pytest

from bench.dynamics.nano_egg import parse_configs, summary, verdict
from tests.helpers import assert_user_error, run_bench

FAKE_PEER = '''
import json, os, sys
import numpy as np
args = sys.argv[1:]
if "--check" in args:
    print(json.dumps({"jax": "fake"}))
    sys.exit(0)
opt = lambda name: args[args.index(name) + 1]
folder, epochs, every = opt("--data-dir"), int(opt("--epochs")), int(opt("--validate-every"))
assert os.path.isfile(os.path.join(opt("--nano-egg"), "run.py"))
train = np.load(os.path.join(folder, "minipile_train.npy"))
valid = np.load(os.path.join(folder, "minipile_valid.npy"))
assert train.dtype == valid.dtype == np.uint8 and valid.size % int(opt("--validation-batch-size")) == 0
final = FINAL + 0.01 * int(opt("--seed"))
for epoch in range(1, epochs + 1):
    line = {"epoch": epoch, "avg_fitness": 8.0}
    if epoch % every == 0:
        line["validation_score"] = final
    print(json.dumps(line))
'''

TINY = ["--configs", "1x8:4", "--epochs", "2", "--seeds", "2", "--validate-every", "1", "--val-rows", "2",
        "--val-tokens", "8"]


def bench(tmp_path, *args):
    return run_bench("dynamics.nano_egg", tmp_path, *args)


def fake_peer(tmp_path, final):
    script = tmp_path / "fake_peer.py"
    script.write_text(FAKE_PEER.replace("FINAL", repr(final)))
    checkout = tmp_path / "nano-egg"
    checkout.mkdir(exist_ok=True)
    (checkout / "run.py").write_text("# stands for nano-egg's run.py\n")
    return ["--peer-python", sys.executable, "--peer-script", str(script), "--nano-egg", str(checkout)]


def test_curves_json_png_and_verdict_with_a_fake_peer(tmp_path):
    result = bench(tmp_path, *TINY, *fake_peer(tmp_path, 100.0))
    assert result.returncode == 0, result.stderr
    [path] = (tmp_path / "results").glob("dynamics_nano_egg-1x8p4-cpu-*.json")
    assert path.with_suffix(".png").stat().st_size > 0
    record = json.loads(path.read_text())
    assert record["settings"]["group_size"] == 2 and record["settings"]["seeds"] == [0, 1]
    assert record["peer"]["jax"] == "fake" and len(record["peer"]["run_py_sha256"]) == 64
    [row] = record["rows"]
    assert (row["model"], row["population"], row["epochs"], row["seeds"]) == ("1x8", 4, 2, 2)
    assert row["nano_egg_val_bpb"] == {"mean": 100.005, "std": 0.0071, "se": 0.005, "n": 2}
    assert len(row["runs"]["eggnog"]) == 2  # a run a seed
    for run in row["runs"]["eggnog"]:  # eggnog really trained: a figure a step, validations at 1 and 2
        assert len(run["train_bpb"]) == 2 and [s for s, _ in run["val"]] == [1, 2]
        assert all(0 < v < 16 for _, v in run["val"])
    assert row["verdict"] == "eggnog better" and row["difference"] < -90
    first, second = row["runs"]["eggnog"]
    assert first["train_bpb"] != second["train_bpb"]  # another seed: other weights and noise


def test_eggnog_alone_is_reported_as_such(tmp_path):
    result = bench(tmp_path, *TINY, "--seeds", "1", "--epochs", "1", "--no-peer")
    assert result.returncode == 0, result.stderr
    [path] = (tmp_path / "results").glob("dynamics_nano_egg-1x8p4-cpu-*.json")
    [row] = json.loads(path.read_text())["rows"]
    assert row["verdict"] == "nano-egg not run" and row["runs"]["nano_egg"] == []
    assert row["eggnog_val_bpb"]["n"] == 1


@pytest.mark.parametrize("args, words", [
    (["--configs", "1x64"], "depth x dim"),
    (["--configs", "1x64:511"], "even population"),
    (["--epochs", "15", "--validate-every", "10"], "multiple of --validate-every"),
    (["--seeds", "0"], "must be positive"),
    (["--tolerance", "-1"], "not negative"),
    ([], "give --peer-python"),
    (["--peer-python", sys.executable], "give --peer-python"),
])
def test_bad_flags_exit_2_and_write_nothing(tmp_path, args, words):
    result = bench(tmp_path, *args)
    assert_user_error(result, words)
    assert not (tmp_path / "results").exists()


def test_a_peer_without_run_py_or_jax_exits_2(tmp_path):
    result = bench(tmp_path, "--peer-python", sys.executable, "--nano-egg", str(tmp_path))
    assert_user_error(result, "holds no run.py")
    (tmp_path / "run.py").write_text("")
    result = bench(tmp_path, "--peer-python", sys.executable, "--nano-egg", str(tmp_path))
    assert_user_error(result, "has no jax")
    assert not (tmp_path / "results").exists()


def test_verdict_counts_the_spread_of_both_sides():
    tight = summary([4.00, 4.01, 4.02])
    assert tight["mean"] == 4.01 and tight["n"] == 3
    assert verdict(summary([4.10, 4.11, 4.12]), tight, 0.02) == "nano-egg better"
    assert verdict(summary([3.90, 3.91, 3.92]), tight, 0.02) == "eggnog better"
    assert verdict(summary([4.015, 4.025, 4.035]), tight, 0.02) == "match"  # within the tolerance
    assert verdict(summary([3.8, 4.3, 4.1]), tight, 0.02) == "match"  # 2 standard errors are wide
    assert verdict(tight, None, 0.02) == "nano-egg not run"
    assert parse_configs("1x64:512,2x128:4096") == [(1, 64, 512), (2, 128, 4096)]
    assert np.isclose(summary([1.0, 3.0])["se"], 1.0)
