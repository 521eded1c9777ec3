"""bench/scale/gossip.py: its matching is the protocol's, a genome that always wins only spreads, rate 0
spreads nothing, the half time at rate 1 grows like log2 N, a genome that can lose dies out at the
gambler's-ruin rate, and the command writes its JSON and PNG."""

import json

import numpy as np
import pytest

from bench.scale.gossip import matching, rounds_to, simulate
from eggnog.training.gossip.mpi import round_pairs
from tests.helpers import assert_user_error, run_bench


@pytest.mark.parametrize("size", [2, 7, 64, 513])
@pytest.mark.parametrize("rate", [0.0, 0.3, 1.0])
def test_matching_is_the_protocols_pairing(size, rate):
    for seed, round_number in [(0, 0), (5, 3), (11, 250)]:
        first, second = matching(seed, round_number, size, rate)
        expected = [(p.initiator, p.responder) for p in round_pairs(seed, round_number, size, rate, "clonal", 0.5)]
        assert list(zip(first.tolist(), second.tolist())) == expected


def test_a_genome_that_always_wins_only_spreads():
    for rate in (1.0, 0.2):
        counts = simulate(300, rate, 1.0, seed=3, max_rounds=10_000)
        assert counts[0] == 1 and counts[-1] == 300
        assert np.all(np.diff(counts) >= 0)
        assert np.all(counts[1:] <= 2 * counts[:-1])  # one partner per round: at most one copy per holder


def test_rate_zero_spreads_nothing():
    counts = simulate(256, 0.0, 1.0, seed=1, max_rounds=200)
    assert len(counts) == 201 and np.all(counts == 1)


def test_half_time_at_rate_one_grows_like_log2_n():
    # At rate 1 every holder converts its partner unless the partner holds the genome already, so the
    # count doubles while it is small and the end phase has the same shape for every N: 4x the islands
    # adds 2 rounds. Rounds are whole numbers, so a seed may cross half one round early or late;
    # a mean over 10 seeds within 0.5 of 2 allows that for a quarter of the seeds at each size, while
    # push-only spreading (1.5x per round) would add about 3.4.
    sizes = [64, 256, 1024, 4096]
    means = [np.mean([rounds_to(simulate(n, 1.0, 1.0, seed, 100), n / 2) for seed in range(10)]) for n in sizes]
    assert np.all(np.abs(np.diff(means) - 2) <= 0.5), means


def test_a_genome_that_can_lose_dies_out_at_the_gamblers_ruin_rate():
    # each meeting of a holder with an ordinary island moves the count +1 (p) or -1 (1 - p): from one
    # copy it reaches 0 with probability (1 - p)/p = 1/3 at p = 0.75; 3 binomial deviations of 200 seeds
    seeds = 200
    extinct = sum(simulate(64, 1.0, 0.75, seed, 2000)[-1] == 0 for seed in range(seeds))
    assert abs(extinct - seeds / 3) <= 3 * np.sqrt(seeds * (1 / 3) * (2 / 3)), extinct


def test_the_command_writes_json_and_png(tmp_path):
    result = run_bench("scale.gossip", tmp_path, "--islands", "16,64", "--rates", "1,0.5",
                       "--win-probabilities", "1,0.8", "--seeds", "3", timeout=120)
    assert result.returncode == 0, result.stderr
    record = json.loads(next((tmp_path / "results").glob("gossip_scale-*.json")).read_text())
    assert record["device"] == "cpu" and record["commit"] and record["date"]
    assert [(r["islands"], r["gossip_mixing_rate"], r["win_probability"]) for r in record["rows"]] == [
        (n, rate, p) for p in (1.0, 0.8) for rate in (1.0, 0.5) for n in (16, 64)]
    first = record["rows"][0]
    # doubling at best: 8 of 16 islands no sooner than round 3
    assert first["extinct"] == 0 and first["half_min"] >= 3 and first["all_max"] >= first["half_max"]
    assert first["log2_islands"] == 4 and first["mean_field_half"] == 4
    png = next((tmp_path / "results").glob("gossip_scale-*.png")).read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n"
    assert_user_error(run_bench("scale.gossip", tmp_path, "--rates", "0"), "--rates must lie in (0, 1]")
