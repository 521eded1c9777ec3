"""The world, its collectives and node-local ranks across real MPI processes."""

import numpy as np


def test_ranks_and_local_ranks(world, parallel_assert):
    ranks = world.allgather_array(np.array([world.rank, world.local_rank, world.local_size]))
    ranks = ranks.reshape(world.size, 3)
    parallel_assert(ranks[:, 0].tolist() == list(range(world.size)))
    # one node here: local ranks are 0..size-1 and every rank sees the same node size
    parallel_assert(sorted(ranks[:, 1].tolist()) == list(range(world.size)))
    parallel_assert(set(ranks[:, 2].tolist()) == {world.size})


def test_all_true_is_collective(world, parallel_assert):
    parallel_assert(world.all_true(True))
    parallel_assert(world.all_true(world.rank != world.size - 1) == (world.size == 0))
    parallel_assert(not world.all_true(world.rank != 0))


def test_bcast_json_from_any_root(world, parallel_assert):
    root = world.size - 1
    got = world.bcast_json({"from": world.rank, "x": [1.5, "a"]} if world.rank == root else None, root=root)
    parallel_assert(got == {"from": root, "x": [1.5, "a"]})


def test_root_first_runs_everywhere_after_root(world, shared_dir, parallel_assert):
    import os

    marker = os.path.join(shared_dir, "built")

    def build():
        if world.is_root:
            with open(marker, "w") as f:
                f.write("done")
        return os.path.exists(marker)

    parallel_assert(world.root_first(build))
