"""bench/dynamics/zorn.py at a tiny size without torch or the authors' code: a fake peer (run by this
Python in place of bench/peers/zorn_torch_train.py) writes initial tensors and answers with fixed curves, so
eggnog's side, the JSON, the plot and the verdicts run for real; bad flags exit 2 with no result. The
authors' target positions and the mapping of their nn.LSTM onto eggnog's LSTM are checked directly."""

import json
import sys

import numpy as np
import pytest

from bench.dynamics.zorn import SPACE, Cell, authors_mask, eggnog_params, own_mask, torch_default_init, verdict
from tests.helpers import assert_user_error, run_bench

FAKE_PEER = '''
import json, sys
import numpy as np
args = sys.argv[1:]
value = lambda flag: args[args.index(flag) + 1]
if "--check" in args:
    print(json.dumps({"torch": "fake", "code_sha256": "fake"}))
    sys.exit(0)
h, e = int(value("--hidden")), int(value("--embed"))
if "--init-out" in args:
    rng = np.random.default_rng(0)
    shapes = {"weight_ih": (4 * h, e), "weight_hh": (4 * h, h), "bias_ih": (4 * h,), "bias_hh": (4 * h,),
              "proj_weight": (100, h), "proj_bias": (100,), "embed": (100, e)}
    np.savez(value("--init-out"), **{k: rng.uniform(-0.2, 0.2, s).astype(np.float32) for k, s in shapes.items()})
problem = np.load(value("--problem"))
assert problem["train"].shape[1:] == (64, 9) and problem["val"].shape[1] == 109
steps = int(value("--steps"))
every = int(value("--eval-every"))
evals = [[s, FINAL, FINAL, 6.0, 6.0] for s in [*range(0, steps, every), steps]]
print(json.dumps({"train_loss": [4.0] * steps, "evals": evals, "s_per_step": 0.01}))
'''

TINY = ["--steps", "3", "--lrs", "0.1", "--eval-every", "2", "--samples", "8"]


def bench(tmp_path, *args):
    return run_bench("dynamics.zorn", tmp_path, *args)


def fake_peer(tmp_path, final):
    script = tmp_path / "fake_peer.py"
    script.write_text(FAKE_PEER.replace("FINAL", repr(final)))
    repo = tmp_path / "repo"
    repo.mkdir(exist_ok=True)
    (repo / "rge_series_experiments.py").write_text("")
    return ["--peer-python", sys.executable, "--peer-repo", str(repo), "--peer-script", str(script)]


def test_curves_json_png_and_verdicts_with_a_fake_peer(tmp_path):
    result = bench(tmp_path, *TINY, *fake_peer(tmp_path, 100.0))
    assert result.returncode == 0, result.stderr
    [path] = (tmp_path / "results").glob("dynamics_zorn-cpu-*.json")
    assert path.with_suffix(".png").stat().st_size > 0
    record = json.loads(path.read_text())
    assert record["peer"]["torch"] == "fake" and record["settings"]["probes"] == 96
    rows = record["rows"]
    assert [(r["cell"], r["method"], r["lr"], r["steps"]) for r in rows] == [("copy", "cdrge", 0.1, 3),
                                                                           ("copy", "bptt", 0.01, 3)]
    curves = record["cells"]["copy"]["curves"]
    assert set(curves) == {"eggnog_cdrge_0.1", "eggnog_bptt_0.01", "eggnog_cdrge_0.1_own", "peer_cdrge_0.1",
                           "peer_bptt_0.01"}
    for name in ("eggnog_cdrge_0.1", "eggnog_bptt_0.01", "eggnog_cdrge_0.1_own"):
        assert len(curves[name]["train_loss"]) == 3
        assert [e[0] for e in curves[name]["evals"]] == [0, 2, 3]
        # an untrained copy model: about ln 100 nats and log2 100 bits a target
        assert all(3 < e[1] < 6 and 5 < e[3] < 8 for e in curves[name]["evals"])
    for row in rows:
        assert row["peer_clean_nats"] == 100.0 and row["verdict"] == "eggnog better"
        assert row["init_difference"] > 90  # the fake peer's scores are not the model's
    assert "eggnog better" in result.stdout


def test_no_peer_runs_eggnog_alone(tmp_path):
    result = bench(tmp_path, *TINY, "--no-peer")
    assert result.returncode == 0, result.stderr
    [path] = (tmp_path / "results").glob("dynamics_zorn-cpu-*.json")
    rows = json.loads(path.read_text())["rows"]
    assert rows and all(r["verdict"] == "peer not run" and r["peer_clean_nats"] is None for r in rows)


def test_verdicts():
    assert verdict([2.0, 3.0], [2.05, 2.95], 0.1) == "match"
    assert verdict([2.0, 3.0], [2.05, 3.2], 0.1) == "eggnog better"
    assert verdict([2.3, 3.0], [2.05, 3.0], 0.1) == "peer better"
    assert verdict([2.0, 3.0], None, 0.1) == "peer not run"


def authors_rule(row):
    """The authors' compute_task_loss target choice, transcribed loop for loop: (logit index, target)."""
    pos = list(row).index(SPACE)
    out = list(row[pos + 1:])
    content = [i for i, t in enumerate(out) if t != SPACE]
    return [(pos + 1 + i, out[i + 1]) for i in range(len(out) - 1)
            if (i in content or (i - 1 in content and out[i] == SPACE)) and pos + 1 + i < len(row)]


def test_authors_mask_is_the_authors_target_choice():
    from eggnog.zorn.tasks import make_task, validation_task

    for batch in (make_task("copy", 2, 4, 0).batch(0, 32), validation_task("copy", 5, 54, 0).batch(0, 16)):
        rows = np.concatenate([batch.inputs, batch.targets[:, -1:]], axis=1)
        mask = authors_mask(rows)
        for r, row in enumerate(rows):
            chosen = authors_rule(row)
            assert [t for t in range(mask.shape[1]) if mask[r, t]] == [t for t, _ in chosen]
            assert [row[t + 1] for t, _ in chosen] == [target for _, target in chosen]
        assert np.array_equal(own_mask(rows), batch.mask)  # eggnog's own: every answer letter


def test_the_authors_nn_lstm_maps_onto_eggnogs_one_head_lstm():
    from eggnog.models.lstm import LstmConfig, LstmModel

    cell = Cell(8, 1, 5, 4, 2, 4, False, (0.1,))
    init = torch_default_init(cell, 3)
    model = LstmModel(LstmConfig(100, 5, 8, 1))
    tokens = np.random.default_rng(1).integers(0, 100, (3, 6))
    got = model.logits("cpu", eggnog_params(model, init), tokens)
    sigmoid = lambda x: 1 / (1 + np.exp(-x))  # noqa: E731
    h, c = np.zeros((3, 8)), np.zeros((3, 8))
    for t in range(tokens.shape[1]):  # torch.nn.LSTM: gates i, f, g, o of W_ih x + b_ih + W_hh h + b_hh
        x = init["embed"][tokens[:, t]]
        raw = x @ init["weight_ih"].T + init["bias_ih"] + h @ init["weight_hh"].T + init["bias_hh"]
        i, f, g, o = np.split(raw, 4, axis=1)
        c = sigmoid(f) * c + sigmoid(i) * np.tanh(g)
        h = sigmoid(o) * np.tanh(c)
        np.testing.assert_allclose(got[:, t], h @ init["proj_weight"].T + init["proj_bias"], atol=1e-5)


@pytest.mark.parametrize("args, message", [
    (["--cells", "sort", "--no-peer"], "--cells"),
    (["--lrs", "fast", "--no-peer"], "--lrs"),
    (["--steps", "0", "--no-peer"], "--steps"),
    (["--tolerance", "-1", "--no-peer"], "--tolerance"),
    ([], "--peer-python"),
    (["--peer-python", sys.executable], "--peer-repo"),
    (["--peer-python", "/nonexistent/python", "--peer-repo", "."], "is not an executable Python"),
    (["--peer-python", sys.executable, "--peer-repo", "/nonexistent"], "is not a checkout of zero_order_rnn"),
])
def test_bad_input_exits_2_with_one_sentence_and_no_result(tmp_path, args, message):
    result = bench(tmp_path, *args)
    assert_user_error(result, message)
    assert not (tmp_path / "results").exists()


def test_a_peer_that_does_not_run_exits_2_before_training(tmp_path):
    flags = fake_peer(tmp_path, 1.0)
    broken = tmp_path / "broken_peer.py"
    broken.write_text("raise SystemExit('No module named torch')\n")
    result = bench(tmp_path, *TINY, *flags[:4], "--peer-script", str(broken))
    assert_user_error(result, "has no torch and numpy", "No module named torch")
    assert not (tmp_path / "results").exists()
