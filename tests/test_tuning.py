"""The tuning file's choice logic with injected timings: the fastest variant by median wins only by a
clear margin, a choice is kept per device and problem and read back, an unknown or damaged entry falls
back to the default, and EGGNOG_TUNING=0 uses the defaults."""

import pytest

from eggnog.kernels.core import tuning
from eggnog.runtime.errors import BadInput

VARIANTS = ("a", "b", "c")


def test_the_fastest_by_median_wins_by_a_clear_margin_only():
    assert tuning.fastest({"a": [1.0, 1.0, 9.0], "b": [0.5, 0.6, 0.5], "c": [0.8]}, default="a") == "b"
    assert tuning.fastest({"a": [1.0], "b": [0.99]}, default="a") == "a"  # 1 %: noise
    assert tuning.fastest({"a": [1.0], "b": [0.9]}, default="a") == "b"
    with pytest.raises(BadInput):
        tuning.fastest({"a": [1.0], "b": []}, default="a")
    with pytest.raises(BadInput):
        tuning.fastest({}, default="a")


def test_a_choice_is_kept_per_device_and_problem_and_read_back(tmp_path):
    path = str(tmp_path / "cache" / tuning.FILE)
    assert tuning.variant_for("scan", "H100", "4x256", VARIANTS, "a", path=path) == "a"
    tuning.record("scan", "H100", "4x256", "c", path=path)
    tuning.record("scan", "H200", "4x256", "b", path=path)
    assert tuning.variant_for("scan", "H100", "4x256", VARIANTS, "a", path=path) == "c"
    assert tuning.variant_for("scan", "H200", "4x256", VARIANTS, "a", path=path) == "b"
    assert tuning.variant_for("scan", "H100", "8x256", VARIANTS, "a", path=path) == "a"
    assert tuning.variant_for("scan", "H100", "4x256", VARIANTS, "a", path=path, environ={"EGGNOG_TUNING": "0"}) == "a"
    tuning._cache.clear()  # a new process reads the file
    assert tuning.variant_for("scan", "H100", "4x256", VARIANTS, "a", path=path) == "c"
    assert tuning.variant_for("scan", "H100", "4x256", ("a", "b"), "a", path=path) == "a"  # c no longer exists


def test_a_damaged_file_gives_the_defaults(tmp_path):
    path = tmp_path / tuning.FILE
    path.write_text("{not json")
    assert tuning.variant_for("scan", "H100", "4x256", VARIANTS, "b", path=str(path)) == "b"
    tuning._cache.clear()
    path.write_text('["a list"]')
    assert tuning.variant_for("scan", "H100", "4x256", VARIANTS, "b", path=str(path)) == "b"


def test_problem_keys():
    assert tuning.problem_key(4, 256) == "4x256"
