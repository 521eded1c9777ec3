"""Integer EGGROLL's `update` (the second half of `tell`) on the device (the CUDA kernels on the
simulator) moves only the pair fitness to the device and reads back one number, the count of parameters
moved; with adaptive noise it reads the parameters back before and after, as the overlay is updated on
the host."""

import numpy as np

from eggnog.evolution.eggroll import IntEggroll, IntEggrollConfig
from eggnog.evolution.noise_overlay import initial_overlay, updated_overlay
from eggnog.kernels.core.backend import Backend
from eggnog.kernels.core.device_counts import counting
from eggnog.models.egg import EggConfig, EggModel

FITNESS = np.array([1, -1, 1, 1, -1, 0, 1, -1], np.int8)


def strategy(adaptive_noise):
    model = EggModel(EggConfig(1, 8))
    cfg = IntEggrollConfig(population=16, sigma_shift=4, alpha=0.2, adaptive_noise=adaptive_noise)
    return IntEggroll(model, cfg, Backend("cuda"), model.init_params(1), 3)


def test_update_uploads_the_fitness_and_reads_back_the_moved_count_only():
    s = strategy(False)
    before = s.host_params()
    with counting() as counts:
        moved = s.update(FITNESS)
    assert moved == np.count_nonzero(s.host_params() != before) / s.model.n_params > 0
    assert counts.uploaded_bytes == FITNESS.nbytes and counts.host_waits == 1


def test_update_with_adaptive_noise_updates_the_overlay_from_host_copies():
    s = strategy(True)
    before = s.host_params()
    with counting() as counts:
        s.update(FITNESS)
    assert np.array_equal(s.overlay, updated_overlay(initial_overlay(s.model), s.model, before, s.host_params()))
    assert counts.host_waits == 2  # the parameters before and after
