"""Progress bar on rank 0 only (EGGNOG_PROGRESS=0 turns it off, e.g. for batch logs), whose rate and
ETA can start afresh after a step that compiled kernels."""

import os
import sys

from tqdm import tqdm
from tqdm.std import EMA


def progress(total, world=None, description="", initial=0):
    enabled = (world is None or world.is_root) and os.environ.get("EGGNOG_PROGRESS", "1") != "0"
    return tqdm(total=total, initial=initial, desc=description, disable=not enabled,
                file=sys.stderr, dynamic_ncols=True, mininterval=0.5, smoothing=0.1)


def forget_rate(bar, upcoming=1):
    """Measure the bar's rate (and so its ETA) afresh from here on: the steps so far, and the `upcoming`
    ones about to be counted (the step that compiled), stay counted; their time does not. (tqdm's own
    reset() would also redraw the bar at 0.)"""
    if bar.disable:
        return
    bar.initial = bar.last_print_n = bar.n + upcoming
    bar.start_t = bar.last_print_t = bar._time()
    bar._ema_dn, bar._ema_dt, bar._ema_miniters = (EMA(bar.smoothing) for _ in range(3))
