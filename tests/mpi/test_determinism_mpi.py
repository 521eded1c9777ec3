"""Results do not depend on the rank count: each rank computes its slice of a global quantity, and
the gathered slices equal the whole computed on one rank."""

import numpy as np
import pytest

from eggnog.corpus.samplers import ContiguousStreams, RandomWindows
from eggnog.kernels.core.backend import select_backend
from eggnog.kernels.core.placement import to_host
from eggnog.kernels.noise import scalar_math
from eggnog.kernels.noise.streams import KINDS, generate

PER_RANK = 256


@pytest.mark.parametrize("kind", KINDS)
def test_noise_slices_gather_to_the_whole_stream(world, parallel_assert, kind):
    backend = select_backend("cpu", world.local_rank)
    key = scalar_math.stream_key(77, 2, 5, 1)
    mine = to_host(generate(kind, key, world.rank * PER_RANK, PER_RANK, backend=backend.name))
    gathered = world.allgather_array(mine)
    whole = generate(kind, key, 0, world.size * PER_RANK, backend="numpy")
    parallel_assert(np.array_equal(gathered, whole) if kind.endswith("int8") else
                    np.allclose(gathered, whole, rtol=0, atol=1e-6))


def test_random_windows_gather_to_the_global_batch(world, parallel_assert):
    data = np.random.default_rng(3).integers(0, 256, size=50_000, dtype=np.uint8)
    sampler = RandomWindows(data, 129, seed=11)
    per_rank = 8
    mine = sampler.batch(4, world.rank * per_rank, per_rank)
    gathered = world.allgather_array(mine)
    parallel_assert(np.array_equal(gathered, sampler.batch(4, 0, world.size * per_rank)))


def test_streams_gather_to_the_global_batch(world, parallel_assert):
    data = np.random.default_rng(4).integers(0, 256, size=50_000, dtype=np.uint8)
    members, group = 16, 2
    sampler = ContiguousStreams(data, members // group, tokens=64)
    per_rank = members // world.size
    mine = sampler.member_batch(9, world.rank * per_rank, per_rank, group)
    parallel_assert(np.array_equal(world.allgather_array(mine), sampler.member_batch(9, 0, members, group)))
