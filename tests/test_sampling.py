"""Next-byte sampling: temperature, min-p, presence penalty, top-k, top-p, escaping."""

import math

import numpy as np
import pytest

from eggnog.models.sampling import Sampler, egg_logits_to_nats, escape_byte
from eggnog.runtime.errors import BadInput

LOGITS = np.log(np.array([0.5, 0.3, 0.15, 0.05]))
NONE_SEEN = np.zeros(4, dtype=bool)


def test_plain_softmax_at_temperature_one():
    p = Sampler(temperature=1.0, min_p=0.0, presence_penalty=0.0).probabilities(LOGITS, NONE_SEEN)
    assert np.allclose(p, [0.5, 0.3, 0.15, 0.05])


def test_min_p_drops_unlikely_bytes():
    p = Sampler(temperature=1.0, min_p=0.2, presence_penalty=0.0).probabilities(LOGITS, NONE_SEEN)
    assert p[3] == 0 and p[2] > 0 and math.isclose(p.sum(), 1.0)


def test_presence_penalty_lowers_seen_bytes():
    seen = np.array([True, False, False, False])
    base = Sampler(1.0, 0.0, 0.0).probabilities(LOGITS, seen)
    penalised = Sampler(1.0, 0.0, 1.0).probabilities(LOGITS, seen)
    assert penalised[0] < base[0] and np.isclose(penalised[0] / penalised[1], 0.5 / 0.3 * math.exp(-1))


def test_temperature_zero_is_argmax_and_low_temperature_sharpens():
    assert Sampler(0.0, 0.0, 0.0).probabilities(LOGITS, NONE_SEEN).tolist() == [1, 0, 0, 0]
    assert Sampler(0.5, 0.0, 0.0).probabilities(LOGITS, NONE_SEEN)[0] > 0.5


def test_top_k_and_top_p():
    assert np.count_nonzero(Sampler(1.0, 0.0, 0.0, top_k=2).probabilities(LOGITS, NONE_SEEN)) == 2
    assert np.count_nonzero(Sampler(1.0, 0.0, 0.0, top_p=0.7).probabilities(LOGITS, NONE_SEEN)) == 2


def test_sampling_is_seeded():
    sampler = Sampler(1.0, 0.0, 0.0)

    def draw(seed):
        return [sampler.sample(LOGITS, NONE_SEEN, rng) for rng in [np.random.default_rng(seed)] * 20]

    assert draw(1) == draw(1)


def test_egg_logits_are_sixteenths_of_a_bit():
    assert np.isclose(egg_logits_to_nats([16])[0], math.log(2))


def test_escape_and_bad_settings():
    assert escape_byte(ord("a")) + escape_byte(10) + escape_byte(0) + escape_byte(255) == "a\n\\x00\\xff"
    with pytest.raises(BadInput):
        Sampler(top_p=0).check()


def test_a_degenerate_sample_gets_a_note_with_the_sampling_flags(tmp_path):
    from eggnog.models.sampling import degenerate
    from eggnog.runtime.checkpoint import load_checkpoint, save_checkpoint
    from tests.es_helpers import tiny_corpus
    from tests.helpers import run_script

    assert degenerate([32] * 8) and not degenerate([32] * 7) and not degenerate([32] * 9 + [10])
    run = tmp_path / "r"
    trained = run_script("train_es.py", "--run-dir", run, "--steps", "1", "--dim", "8", "--population", "8",
                         "--group-size", "2", "--tokens-per-update", "8", "--data", tiny_corpus(tmp_path),
                         "--backend", "cpu")
    assert trained.returncode == 0, trained.stderr
    arrays, record = load_checkpoint(run)
    flat = save_checkpoint(tmp_path / "flat", 1, {**arrays, "params": np.zeros_like(arrays["params"])},
                           record["meta"], name="flat.npz")  # equal logits: argmax repeats one byte
    sample = run_script("generate.py", flat, "--temperature", "0", "--presence-penalty", "0", "--length", "20")
    assert sample.returncode == 0, sample.stderr
    assert "note: the sample ends repeating" in sample.stderr and "--temperature" in sample.stderr
    varied = run_script("generate.py", flat, "--temperature", "1", "--min-p", "0", "--length", "20")
    assert varied.returncode == 0 and "note:" not in varied.stderr
