"""The static model's constants (what each is: calibration.py), the grid they are fitted on, and the fit of
kept rows (keep.py) to their measurements: the largest |log(predicted / measured)| is minimised (ties: the
smaller root mean square)."""

import numpy as np

CONSTANTS = {"global_latency_cycles": 700, "hbm_bytes_per_s": 1.2e12, "host_s_per_call": 500e-6,
             "l2_bytes_per_s": 4e12}
LATENCIES = range(300, 1300, 100)
BANDWIDTHS = [b / 10 * 1e12 for b in range(5, 34)]
HOSTS = [h * 50e-6 for h in range(0, 11)]
L2S = (3e12, 4e12, 5.5e12, 7e12)  # B/s, L2 to all SMs: around the 5.5e12 estimate


def grid(probed=None):
    """The values each fitted constant may take: its grid, or the one value a probe measured."""
    values = {"global_latency_cycles": list(LATENCIES), "l2_bytes_per_s": list(L2S),
              "hbm_bytes_per_s": BANDWIDTHS, "host_s_per_call": HOSTS}
    return {k: [probed[k]] if probed and k in probed else v for k, v in values.items()}


FITTED = ("global_latency_cycles", "l2_bytes_per_s", "hbm_bytes_per_s", "host_s_per_call")  # the grid's axes


def row_arrays(rows):
    """A kept row (keep.py) as the fit takes it: its SM-seconds table over (LATENCIES, L2S), HBM bytes,
    units and measured units/s."""
    out = []
    for r in rows:
        table = np.array([[r["sm_seconds"][f"{l2:.3g}"][str(lat)] for l2 in L2S] for lat in LATENCIES])
        out.append((table, r["hbm_bytes"], r["units"], r["measured"]["units_per_s"]))
    return out


def sm_seconds(table, latencies, l2s):
    """A row's SM seconds at any latencies and L2 bandwidths, interpolated linearly in latency and in
    1/L2 (the L2 pipe's cycles) between the kept grid's points, held at its edges."""
    inverse = 1 / np.asarray(L2S)
    order = np.argsort(inverse)
    by_latency = np.array([np.interp(latencies, list(LATENCIES), table[:, j]) for j in range(len(L2S))])
    return np.array([[np.interp(1 / l2, inverse[order], by_latency[order, i]) for l2 in l2s]
                     for i in range(len(latencies))])


def log_errors(rows, values):
    """log(predicted / measured), shape (rows, *axes of FITTED), at every point of `values` (grid())."""
    lat, l2, hbm, host = (np.asarray(values[k], float) for k in FITTED)
    out = []
    for table, hbm_bytes, units, measured in rows:
        sm = sm_seconds(table, lat, l2)[:, :, None, None]
        seconds = np.maximum(sm, hbm_bytes / hbm[None, None, :, None]) + host[None, None, None, :]
        out.append(np.log(units / seconds / measured))
    return np.array(out)


def scores(rows, values):
    """(largest |log ratio|, sum of squares) at every grid point."""
    e = log_errors(rows, values)
    return np.abs(e).max(axis=0), (e * e).sum(axis=0)


def fit(rows, values=None):
    """(largest |log ratio|, constants) of the best grid point of `values` (default: grid())."""
    values = values or grid()
    worst, squares = scores(rows, values)
    best = np.lexsort((squares.ravel(), np.round(worst, 9).ravel()))[0]
    index = np.unravel_index(best, worst.shape)
    constants = {k: values[k][i] for k, i in zip(FITTED, index)}
    constants["host_s_per_call"] = round(constants["host_s_per_call"], 6)
    return float(worst[index]), constants


def errors(rows, constants):
    """log(predicted / measured) of each row at one set of constants."""
    return [float(x) for x in log_errors(rows, {k: [constants[k]] for k in FITTED}).ravel()]
