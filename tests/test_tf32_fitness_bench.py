"""bench/gpu/tf32_fitness.py, the evidence for TF32 in the population forward: a tiny run writes its figures,
and bad flags are refused with one sentence and nothing written."""

import json

import pytest

from tests.helpers import assert_user_error
from tests.test_peer_benches import bench


def test_a_tiny_comparison_writes_every_figure(tmp_path):
    result = bench("gpu.tf32_fitness", tmp_path, "--dim", 8, "--depth", 1, "--population", 8, "--group-size", 4,
                   "--tokens", 16, "--bptt-steps", 2, "--epochs", 2, "--data", "random")
    assert result.returncode == 0, result.stderr
    [path] = (tmp_path / "results").glob("tf32_fitness-cpu-*.json")
    record = json.loads(path.read_text())
    assert record["model"] == "8x1" and record["bptt_steps"] == 2 and len(record["rows"]) == 2
    for row in record["rows"]:
        assert row["loss_spread_bits"] > 0 and 0 < row["max_loss_moved_bits"] < row["loss_spread_bits"]
        assert 0 <= row["fitness_1_minus_corr"] < 0.5 and 0 <= row["gradient_1_minus_cos"] < 0.5
        kept, pairs = map(int, row["pair_signs_kept"].split("/"))
        assert pairs == 4 and 0 <= kept <= pairs


@pytest.mark.parametrize("args, message", [
    (["--data", "somewhere"], "--data must be one of"),
    (["--population", "7"], "population"),
    (["--epochs", "0"], "must be positive"),
    (["--bptt-steps", "-1"], "not negative"),
])
def test_bad_flags_exit_2_with_one_sentence(tmp_path, args, message):
    result = bench("gpu.tf32_fitness", tmp_path, *args)
    assert_user_error(result, message)
    assert not (tmp_path / "results").exists()
