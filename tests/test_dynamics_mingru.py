"""bench/dynamics/mingru.py at a tiny size without torch: a fake peer (a script run by this Python in
place of bench/peers/mingru_torch_train.py) answers with fixed curves, so eggnog's side, the JSON, the plot
and the verdicts run for real in seconds; bad flags and a missing peer exit 2 with no result."""

import json
import math
import sys

import numpy as np
import pytest

from bench.dynamics.mingru import parse_configs, torch_default_init, verdict
from tests.helpers import assert_user_error, run_bench

FAKE_PEER = '''
import json, sys
args = sys.argv[1:]
if "--check" in args:
    print(json.dumps({"torch": "fake", "minGRU_pytorch": "fake"}))
    sys.exit(0)
plan = json.load(open(args[args.index("--plan") + 1]))
steps = len(plan["train_starts"])
# every window must lie inside the split files the plan names
for starts in plan["train_starts"]:
    assert all(0 <= s and s + plan["window"] <= len(open(plan["train_file"], "rb").read()) for s in starts)
val = [[s, FINAL] for s in range(0, steps, plan["val_every"])] + [[steps, FINAL]]
print(json.dumps({"train_bpb": [8.0] * steps, "val": val, "s_per_step": 0.01, "torch": "fake"}))
'''

TINY = ["--configs", "8x1:3,16x1:2", "--batch", "2", "--seq", "16", "--val-every", "2", "--val-rows", "2"]


def bench(tmp_path, *args):
    return run_bench("dynamics.mingru", tmp_path, *args)


def fake_peer(tmp_path, final):
    script = tmp_path / "fake_peer.py"
    script.write_text(FAKE_PEER.replace("FINAL", repr(final)))
    return ["--peer-python", sys.executable, "--peer-script", str(script)]


def test_curves_json_png_and_verdict_with_a_fake_peer(tmp_path):
    result = bench(tmp_path, *TINY, *fake_peer(tmp_path, 100.0))
    assert result.returncode == 0, result.stderr
    [path] = (tmp_path / "results").glob("dynamics_mingru-cpu-*.json")
    assert path.with_suffix(".png").stat().st_size > 0
    record = json.loads(path.read_text())
    assert record["settings"]["lr"] == 1e-4 and record["settings"]["clip_nats"] == 0.5
    assert record["peer"]["torch"] == "fake"
    rows = record["rows"]
    assert [(r["model"], r["steps"], r["batch"], r["seq"]) for r in rows] == [("8x1", 3, 2, 16), ("16x1", 2, 2, 16)]
    for row in rows:
        assert set(row["curves"]) == {"peer_adamw", "eggnog_adamw", "eggnog_sf_adamw"}
        for name in ("eggnog_adamw", "eggnog_sf_adamw"):
            curve = row["curves"][name]
            assert len(curve["train_bpb"]) == row["steps"]
            assert [s for s, _ in curve["val"]] == [*range(0, row["steps"], 2), row["steps"]]
            # an untrained byte model sits near log2(256) = 8 bits
            assert all(0 < v < 12 for _, v in curve["val"]) and all(0 < v < 12 for v in curve["train_bpb"])
        assert row["peer_val_bpb"] == 100.0
        assert row["verdict"] == "eggnog better"
        assert row["difference"] == pytest.approx(row["eggnog_adamw_val_bpb"] - 100.0, abs=1e-3)
    assert "eggnog better" in result.stdout


def test_no_peer_runs_eggnog_alone(tmp_path):
    result = bench(tmp_path, *TINY, "--no-peer")
    assert result.returncode == 0, result.stderr
    [path] = (tmp_path / "results").glob("dynamics_mingru-cpu-*.json")
    rows = json.loads(path.read_text())["rows"]
    assert rows and all(r["verdict"] == "peer not run" and r["curves"]["peer_adamw"] is None for r in rows)


def test_verdicts():
    assert verdict(3.00, 3.04, 0.05) == "match"
    assert verdict(3.10, 3.04, 0.05) == "peer better"
    assert verdict(2.90, 3.04, 0.05) == "eggnog better"
    assert verdict(3.0, None, 0.05) == "peer not run"
    assert parse_configs("64x2:500,256x4", 7) == [(64, 2, 500), (256, 4, 7)]


def test_torch_default_init_follows_pytorch_bounds():
    from eggnog.models.mingru import MinGruConfig, MinGruModel

    model = MinGruModel(MinGruConfig(32, 2))
    p = model.views(torch_default_init(model, 0))
    assert abs(float(np.std(p["embed"])) - 1.0) < 0.05  # nn.Embedding: N(0, 1)
    assert np.all(p["norm"] == 1.0) and np.all(p["blocks.1.gru_norm"] == 1.0)
    for name, fan_in in (("head", 32), ("blocks.0.gru_gate", 32), ("blocks.0.gru_out", 48),
                         ("blocks.0.ff_out", 128), ("blocks.0.ff_out_bias", 128), ("blocks.0.ff_in_bias", 32)):
        bound = 1 / math.sqrt(fan_in)
        assert np.abs(p[name]).max() <= bound and np.abs(p[name]).max() > 0.8 * bound, name


@pytest.mark.parametrize("args, message", [
    (["--configs", "64by2", "--no-peer"], "dim x depth"),
    (["--configs", "64x0", "--no-peer"], "dim x depth"),
    (["--init", "xavier", "--no-peer"], "--init"),
    (["--lr", "0", "--no-peer"], "--lr"),
    ([], "--peer-python"),
    (["--peer-python", "/nonexistent/python"], "is not an executable Python"),
])
def test_bad_input_exits_2_with_one_sentence_and_no_result(tmp_path, args, message):
    result = bench(tmp_path, *args)
    assert_user_error(result, message)
    assert not (tmp_path / "results").exists()


def test_a_peer_that_does_not_run_exits_2_before_training(tmp_path):
    broken = tmp_path / "broken_peer.py"
    broken.write_text("raise SystemExit('No module named minGRU_pytorch')\n")
    result = bench(tmp_path, *TINY, "--peer-python", sys.executable, "--peer-script", str(broken))
    assert_user_error(result, "has no torch and minGRU-pytorch", "No module named minGRU_pytorch")
    assert not (tmp_path / "results").exists()
