"""How far the static model's predictions can be trusted: held-out errors of the calibration rows, the
constants' plausible values, and the range each prediction is given.

- Leave one out: each row predicted by the constants fitted without it; leave one family out: each
  family's rows (keep.family: rows of one kernel module) predicted by the constants fitted without the
  family. The in-sample fit says how well the constants can explain the rows; these say how well they
  predict a row (a family) they were not fitted on, which is what every prediction of a rebuilt kernel is.
- Plausible constants: the grid points whose worst |log ratio| is within PLAUSIBLE_SLACK of the best
  fit's; a constant a probe measured is held at that value. The corners of their box (every constant at
  its slow end, every one at its fast end) bound a prediction.
- A prediction's range: the corners' predictions (and the point prediction), widened on both sides by
  the worst held-out ratio (leave one family out, or out when there is a single family).
"""

from math import exp, log

import numpy as np

from bench.static_report import fitting

PLAUSIBLE_SLACK = log(1.1)  # a grid point within 10% of the best fit's worst ratio still explains the rows
SLOW_END = {"global_latency_cycles": max, "l2_bytes_per_s": min, "hbm_bytes_per_s": min, "host_s_per_call": max}


def held_out(kept, values):
    """Per kept row: its in-sample, leave-one-out and leave-one-family-out predicted / measured (None where
    nothing is left to fit on)."""
    rows = fitting.row_arrays(kept)
    _, constants = fitting.fit(rows, values)
    inside = fitting.errors(rows, constants)
    out = []
    for i, row in enumerate(kept):
        others = [r for j, r in enumerate(rows) if j != i]
        family = [r for j, r in enumerate(rows) if kept[j]["family"] != row["family"]]
        loo = fitting.errors([rows[i]], fitting.fit(others, values)[1])[0] if others else None
        lofo = fitting.errors([rows[i]], fitting.fit(family, values)[1])[0] if family else None
        out.append({"name": row["name"], "family": row["family"], "file": row["measured"]["file"],
                    "in_sample": _ratio(inside[i]), "leave_one_out": _ratio(loo), "leave_one_family_out": _ratio(lofo)})
    return out


def plausible(kept, values):
    """{constant: (lowest, highest)} over the grid points within PLAUSIBLE_SLACK of the best fit."""
    worst, _ = fitting.scores(fitting.row_arrays(kept), values)
    near = np.nonzero(worst <= worst.min() + PLAUSIBLE_SLACK)
    return {k: (float(np.min(np.asarray(values[k])[i])), float(np.max(np.asarray(values[k])[i])))
            for k, i in zip(fitting.FITTED, near)}


def corners(bounds, constants):
    """(slow, fast): `constants` with each fitted constant at the slow or the fast end of its bounds."""
    slow = {**constants, **{k: SLOW_END[k](bounds[k]) for k in bounds}}
    fast = {**constants, **{k: (min if SLOW_END[k] is max else max)(bounds[k]) for k in bounds}}
    return slow, fast


def held_out_factor(errors):
    """The worst held-out ratio of held_out()'s rows, as a factor >= 1: leave one family out where any
    row has it, else leave one out."""
    for key in ("leave_one_family_out", "leave_one_out"):
        ratios = [e[key] for e in errors if e[key] is not None]
        if ratios:
            return max(max(r, 1 / r) for r in ratios)
    return 1.0


def prediction_range(point, slow, fast, factor):
    """[low, high] of a prediction (a rate or a time alike): the corners' values and the point, widened by
    `factor` each way."""
    values = (point, slow, fast)
    return [_digits(min(values) / factor), _digits(max(values) * factor)]


def summary(kept, probed=None):
    """The fit, its held-out errors, the plausible constants and the factor a range is widened by."""
    values = fitting.grid(probed)
    rows = fitting.row_arrays(kept)
    worst, constants = fitting.fit(rows, values)
    errors = held_out(kept, values)
    return {"constants": constants, "worst_in_sample": _ratio(worst), "rows": errors,
            "plausible": plausible(kept, values), "held_out_factor": round(held_out_factor(errors), 3),
            "probed": dict(probed or {})}


def _ratio(log_error):
    return None if log_error is None else round(exp(log_error), 3)


def _digits(x):
    return float(f"{x:.3g}")
