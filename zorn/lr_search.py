"""The learning-rate search of `--lr-search LO,HI` (the authors' later binary-search mode): bisection of
the bracket in log space by short trials.

Each round tries the log-midpoints of the bracket's two halves and keeps the half whose trial reached
the lower loss; a trial that diverged counts as the worst. After the rounds the best trial's rate is
chosen, so the choice always lies strictly inside (LO, HI). A trial is a pure function of its rate
(same initial weights, seed and batches), so the search is deterministic for a seed.
"""

import math

from eggnog.runtime.errors import BadInput


def parse_bracket(text):
    """(LO, HI) of "LO,HI": two positive finite numbers with LO < HI."""
    parts = str(text).split(",")
    try:
        if len(parts) != 2:
            raise ValueError
        lo, hi = (float(p) for p in parts)
    except ValueError:
        raise BadInput(f"--lr-search takes two rates as LO,HI (e.g. 1e-4,0.1), got {text!r}") from None
    if not (math.isfinite(lo) and math.isfinite(hi) and 0 < lo < hi):
        raise BadInput(f"--lr-search needs 0 < LO < HI, both finite, got {text!r}")
    return lo, hi


def search_lr(lo, hi, rounds, trial, on_trial=lambda record: None):
    """(chosen rate, trials as [{"lr", "loss", "round"}] in the order run) of bisecting [lo, hi] for
    `rounds` rounds; `trial(lr)` -> the loss it reached (inf if it diverged); `on_trial(record)` hears
    of each trial as it ends."""
    done, order = {}, []

    def run(lr, round_):
        if lr not in done:
            loss = trial(lr)
            done[lr] = loss if math.isfinite(loss) else math.inf
            order.append({"lr": lr, "loss": loss if math.isfinite(loss) else None, "round": round_})
            on_trial(order[-1])
        return done[lr]

    a, b = math.log(lo), math.log(hi)
    for round_ in range(rounds):
        mid = (a + b) / 2
        low_half, high_half = math.exp((a + mid) / 2), math.exp((mid + b) / 2)
        if run(low_half, round_) <= run(high_half, round_):
            b = mid
        else:
            a = mid
    chosen = min(done, key=lambda lr: (done[lr], lr))
    return chosen, order
