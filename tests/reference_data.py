"""The reference outputs of the original implementations in tests/data (see its README.md)."""

from pathlib import Path

import numpy as np

DATA = Path(__file__).resolve().parent / "data"


def load(name):
    """Every array of tests/data/<name>.npz, read in full."""
    with np.load(DATA / f"{name}.npz", allow_pickle=False) as archive:
        return {key: archive[key] for key in archive.files}
