"""Launch variants of the fused EGG epoch (rows a warp of its matmuls): each variant, chosen through the
tuning file as a tuned GPU would choose it, launches its own kernel and agrees bit for bit with the
per-op reference on a case of one block (the smallest fused width, 64); every variant is
registered for the PTX check under its own name."""

import numpy as np
import pytest

from eggnog.kernels.core import tuning
from eggnog.kernels.core.cuda_api import KERNELS, SIMULATED
from eggnog.kernels.egg import epoch, epoch_cuda
from tests.variant_helpers import Spy, own_tuning_file

pytestmark = pytest.mark.skipif(not SIMULATED, reason="variants are compared on the CUDA simulator")
EGG = epoch_cuda.EGG_EPOCH_TUNABLE


@pytest.fixture
def tuned(tmp_path, monkeypatch):
    """record(problem, variant) into a tuning file of this test's own, which launches then read."""
    record = own_tuning_file(tmp_path, monkeypatch)
    return lambda problem, variant: record(EGG.kernel, problem, variant)


def test_the_default_is_launched_unless_the_tuning_file_names_another(tuned):
    assert EGG.choose((1, 64, 62)) == EGG.default
    tuned(tuning.problem_key(1, 64, 62), "rows16")
    assert EGG.choose((1, 64, 62)) == "rows16" and EGG.choose((1, 64, 61)) == EGG.default


# the default kernel is compared with the reference by the op's own cases (tests/test_egg_epoch.py)
@pytest.mark.parametrize("variant", [v for v in EGG.variants if v != EGG.default])
def test_every_egg_epoch_variant_matches_the_reference(variant, tuned, monkeypatch):
    """One layer runs every kind of stage (both gates, the MLP, the head); 62 members from an odd first
    member: every row tile of every variant's warps holds members (the last two rows are past the slice)."""
    seen = []
    for rows, compiled in list(epoch_cuda.EPOCH.items()):
        monkeypatch.setitem(epoch_cuda.EPOCH, rows, Spy(epoch_cuda.rows_variant(rows), compiled, seen))
    case = epoch._case(np.random.default_rng(61), 1, 64, 62, 1, 3, 4, True)
    n_layer, members, dim = case[2].shape
    tuned(tuning.problem_key(n_layer, dim, members), variant)
    states = case[2].copy()
    got = epoch.cuda_egg_epoch(*case[:2], states, *case[3:])
    want_states = case[2].copy()
    want = epoch.reference_egg_epoch(case[0], case[1], want_states, *case[3:])
    assert seen == [variant]
    np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(states, want_states)


def test_every_variant_is_registered_under_its_own_name():
    names = {spec.name for spec in KERNELS}
    for rows in epoch_cuda.ROW_VARIANTS:
        assert f"eggnog.kernels.egg.epoch_cuda.{epoch_cuda.epoch_name(rows)}" in names
    assert epoch_cuda.EPOCH[epoch_cuda.ROWS] is epoch_cuda.egg_epoch_cuda
    assert EGG.default == "rows32" and EGG.problems[0][1] == (6, 256, 32768)
