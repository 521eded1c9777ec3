"""Scale model of the gossip tournaments: rounds until one clearly fitter genome reaches half and all of
N islands, simulated with the protocol's own matching and decision on fake fitness, up to thousands of
islands (numpy only, no MPI, no model). Writes JSON and a PNG to bench/results/.

    python -m bench.scale.gossip
    python -m bench.scale.gossip --islands 64,512 --rates 1,0.1 --win-probabilities 1 --seeds 5

A round is what every rank of a gossip run does at a step boundary under --gossip-merge clonal: the
matching of `round_pairs` (training/gossip/mpi.py: a permutation of the ranks drawn from (--seed, round),
cut into pairs, each pair meeting with probability --gossip-mixing-rate), the winner by
`initiator_wins` (the higher fitness, the initiator on ties), the loser copying the winner's genome
(and fitness). Round 0: island 0 holds the good genome, the others an ordinary one. A fitness is the
genome's quality plus unit normal noise drawn per island and round; the good genome's quality is set
so that it beats an ordinary island with probability --win-probabilities (1: always). Below 1 the good
genome can lose its last copy: such seeds are counted as extinct, not timed (expected share (1 - p)/p,
the gambler's ruin of a copy count that moves +1 with probability p, -1 otherwise).

References in the table: log2 N, the push-pull gossip expectation at rate 1, and the mean-field
recursion g <- g + rate (2p - 1) g (N - g) / (N - 1) (expected good-ordinary meetings in a random
matching, each a net gain of 2p - 1 copies).
"""

import math
from statistics import NormalDist

import numpy as np
import typer

from bench.report import print_table, write_result
from eggnog.runtime.cli import cli_help, user_errors
from eggnog.runtime.errors import BadInput
from eggnog.training.gossip.mpi import GOSSIP_STREAM, initiator_wins

app = typer.Typer(add_completion=False, pretty_exceptions_enable=False, rich_markup_mode=None)

NOISE_STREAM = 0x5CA1E  # fitness noise, apart from the matching's stream


def matching(seed, round_number, size, rate):
    """(initiators, responders) of `round_pairs(seed, round_number, size, rate, ...)` as arrays: the same
    stream drawn the same way, without a Python object per pair (50x faster at 16,384 ranks)."""
    rng = np.random.default_rng([GOSSIP_STREAM, seed, round_number])
    order = rng.permutation(size)
    draws = rng.random((size // 2, 2))  # column 1 picks a mixed merge's kind: drawn, unused here
    meet = draws[:, 0] < rate
    pairs = order[:size // 2 * 2].reshape(-1, 2)
    return pairs[meet, 0], pairs[meet, 1]


def quality_gap(win_probability):
    """Good-minus-ordinary quality at which the good genome wins with this probability (unit noise on
    both fitnesses, so their difference has deviation sqrt 2)."""
    return math.inf if win_probability >= 1 else math.sqrt(2) * NormalDist().inv_cdf(win_probability)


def simulate(islands, rate, win_probability, seed, max_rounds):
    """Copies of the good genome before round 0 and after each round, until all or none hold it."""
    gap = quality_gap(win_probability)
    noise = np.random.default_rng([NOISE_STREAM, seed, islands])
    good = np.zeros(islands, dtype=bool)
    good[0] = True
    counts = [1]
    for r in range(max_rounds):
        if counts[-1] in (0, islands):
            break
        first, second = matching(seed, r, islands, rate)
        fitness_first = np.where(good[first], gap, 0.0) + noise.standard_normal(first.size)
        fitness_second = np.where(good[second], gap, 0.0) + noise.standard_normal(second.size)
        won = initiator_wins(fitness_first, fitness_second)
        good[np.where(won, second, first)] = good[np.where(won, first, second)]
        counts.append(int(good.sum()))
    return np.array(counts)


def rounds_to(counts, target):
    """The first round after which at least `target` islands hold the good genome (None: never)."""
    hit = np.flatnonzero(counts >= target)
    return int(hit[0]) if hit.size else None


def mean_field(islands, rate, win_probability, limit=10**6):
    """(rounds to half, rounds to all but half an island) of the mean-field recursion."""
    g, half, gain = 1.0, None, rate * (2 * win_probability - 1)
    for r in range(1, limit + 1):
        g += gain * g * (islands - g) / (islands - 1)
        if half is None and g >= islands / 2:
            half = r
        if islands - g < 0.5:
            return half, r
        if gain <= 0:
            break
    return half, None


def summary(values):
    done = [v for v in values if v is not None]
    if not done:
        return {"median": None, "min": None, "max": None}
    return {"median": float(np.median(done)), "min": min(done), "max": max(done)}


def measure(islands, rate, win_probability, seeds, first_seed, max_rounds):
    halves, alls, extinct, censored = [], [], 0, 0
    for seed in range(first_seed, first_seed + seeds):
        counts = simulate(islands, rate, win_probability, seed, max_rounds)
        extinct += int(counts[-1] == 0)
        censored += int(0 < counts[-1] < islands)
        halves.append(rounds_to(counts, islands / 2))
        alls.append(rounds_to(counts, islands))
    half, everyone = summary(halves), summary(alls)
    theory_half, theory_all = mean_field(islands, rate, win_probability)
    return {"islands": islands, "gossip_mixing_rate": rate, "win_probability": win_probability, "seeds": seeds,
            "extinct": extinct, "censored": censored,
            **{f"half_{k}": v for k, v in half.items()}, **{f"all_{k}": v for k, v in everyone.items()},
            "extinct_expected": round((1 - win_probability) / win_probability, 3),
            "log2_islands": round(math.log2(islands), 2), "mean_field_half": theory_half,
            "mean_field_all": theory_all}


def span(row, what):
    if row[f"{what}_median"] is None:
        return "-"
    return f"{row[f'{what}_median']:g} ({row[f'{what}_min']}-{row[f'{what}_max']})"


def table_row(r):
    return {"N": r["islands"], "rate": r["gossip_mixing_rate"], "p win": r["win_probability"],
            "half (min-max)": span(r, "half"), "all (min-max)": span(r, "all"),
            "extinct": f"{r['extinct']}/{r['seeds']}", "(1-p)/p": r["extinct_expected"], "log2 N": r["log2_islands"],
            "mean-field half": r["mean_field_half"] or "-", "mean-field all": r["mean_field_all"] or "-"}


def draw(rows, path):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, panels = plt.subplots(1, 2, figsize=(12, 4.8))
    top_rate = max(r["gossip_mixing_rate"] for r in rows)
    for ax, key, label, fixed, title, yscale in (
            (panels[0], "gossip_mixing_rate", "--gossip-mixing-rate", ("win_probability", 1.0),
             "the good genome always wins", "log"),
            (panels[1], "win_probability", "p win", ("gossip_mixing_rate", top_rate),
             f"--gossip-mixing-rate {top_rate:g}, noisy fitness (extinct seeds left out)", "linear")):
        chosen = [r for r in rows if r[fixed[0]] == fixed[1] and r["half_median"] is not None]
        for i, value in enumerate(sorted({r[key] for r in chosen}, reverse=True)):
            line = sorted((r for r in chosen if r[key] == value), key=lambda r: r["islands"])
            n = [r["islands"] for r in line]
            med = np.array([r["half_median"] for r in line])
            err = [med - [r["half_min"] for r in line], [r["half_max"] for r in line] - med]
            ax.errorbar(n, med, yerr=err, fmt="o-", ms=4, capsize=3, color=f"C{i}", label=f"{label} {value:g}")
            ax.plot(n, [r["mean_field_half"] for r in line], "--", color=f"C{i}", lw=1)
        n = sorted({r["islands"] for r in chosen})
        ax.plot(n, [math.log2(x) for x in n], ":", color="k", lw=2, label="log2 N (push-pull gossip, rate 1)")
        ax.set(xscale="log", yscale=yscale, xlabel="islands N", ylabel="rounds until half hold the good genome",
               title=f"{title}\nmedian and min-max over seeds; dashed: mean field")
        ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def numbers(text, flag, kind):
    try:
        values = [kind(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise BadInput(f"{flag} must be a comma-separated list of numbers, got {text!r}") from None
    if not values:
        raise BadInput(f"{flag} must name at least one value")
    return values


@app.command(help=cli_help(__doc__))
@user_errors
def main(islands: str = typer.Option("64,512,4096,16384", help="Comma-separated island counts N."),
         rates: str = typer.Option("1,0.3,0.1,0.01", help="Comma-separated values of --gossip-mixing-rate."),
         win_probabilities: str = typer.Option("1,0.9,0.75", help="Comma-separated probabilities that the good "
                                                                 "genome wins a tournament (0.5 < p <= 1)."),
         seeds: int = typer.Option(8, help="Seeds per cell (each one the run's --seed)."),
         seed: int = typer.Option(0, help="The first seed."),
         max_rounds: int = typer.Option(20000, help="Rounds after which a seed is given up (censored).")):
    sizes = numbers(islands, "--islands", int)
    mixing, wins = numbers(rates, "--rates", float), numbers(win_probabilities, "--win-probabilities", float)
    if min(sizes) < 2 or seeds < 1 or max_rounds < 1:
        raise BadInput("--islands must be at least 2, --seeds and --max-rounds positive")
    if not all(0 < r <= 1 for r in mixing) or not all(0.5 < p <= 1 for p in wins):
        raise BadInput("--rates must lie in (0, 1] and --win-probabilities in (0.5, 1]")
    rows = [measure(n, r, p, seeds, seed, max_rounds) for p in wins for r in mixing for n in sizes]
    print_table([table_row(r) for r in rows], list(table_row(rows[0])))
    settings = {"merge": "clonal", "seeds": seeds, "first_seed": seed, "max_rounds": max_rounds}
    path = write_result("gossip_scale", "cpu", rows, {"settings": settings})
    png = path.with_suffix(".png")
    draw(rows, png)
    print(path)
    print(png)


if __name__ == "__main__":
    app()
