"""Progress bar on rank 0 only (EGGNOG_PROGRESS=0 turns it off, e.g. for batch logs)."""

import os
import sys

from tqdm import tqdm


def progress(total, world=None, description="", initial=0):
    enabled = (world is None or world.is_root) and os.environ.get("EGGNOG_PROGRESS", "1") != "0"
    return tqdm(total=total, initial=initial, desc=description, disable=not enabled,
                file=sys.stderr, dynamic_ncols=True, mininterval=0.5, smoothing=0.1)
