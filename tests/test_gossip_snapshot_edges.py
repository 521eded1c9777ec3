"""A gossip snapshot that has not been scored yet: its fitness is minus infinity, so it loses every tournament
until training scores it, and it travels as such."""

import numpy as np

from eggnog.training.gossip.merge import Snapshot


def test_an_unscored_snapshot_has_the_lowest_fitness():
    snapshot = Snapshot(np.ones(3, np.float32))
    assert snapshot.fitness == -np.inf and snapshot.fitness < -1e308
    buffer, scalars = snapshot.pack()
    assert scalars.tolist() == [-np.inf] and buffer.tolist() == [1.0, 1.0, 1.0]
