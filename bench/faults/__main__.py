"""The fault suite as tables: what each failure costs. First a coordinator run over TCP on this machine
(processes on localhost, a tiny model, jobs padded to a fixed time); per case: steps missing from the
log, work done again, wall time against the undisturbed run (process start-up included), and whether
the final parameters equal the synchronous trainer's bit for bit; its hostile peers
(bench/faults/tcp_hostile.py) in a table of their own, with each attack's figures. Then gossip islands over TCP
(bench/faults/gossip.py; hostile peers: bench/faults/gossip_hostile.py): steps lost, work
redone, training time and final fitness against an undisturbed run. Then runs under MPI (MPICH ends
the whole job when a rank dies): how fast the job ends, what --resume redoes, and gossip's stop signals.

    python -m bench.faults
    python -m bench.faults --case slow --case gossip-sigint --case gossip-partition --partition-seconds 10
"""

import signal
import sysconfig
import tempfile
from pathlib import Path

import typer

from bench.faults import gossip, mpi, tcp
from bench.faults import gossip_hostile as hostile
from bench.faults import tcp_hostile as coordinator_hostile
from bench.report import print_table, write_result
from eggnog.corpus.prepare import prepare
from eggnog.runtime.cli import cli_help, user_errors
from eggnog.runtime.errors import BadInput

app = typer.Typer(add_completion=False, pretty_exceptions_enable=False, rich_markup_mode=None)
CASES = {"undisturbed": tcp.undisturbed, "one-killed": tcp.one_of_three_killed,
         "two-killed-two-joined": tcp.two_killed_two_joined, "slow": tcp.slow_worker,
         "coordinator-killed": tcp.coordinator_killed, "bad-messages": tcp.bad_messages,
         "replayed-captures": coordinator_hostile.captured_replays,
         "sealed-elsewhere-malformed": coordinator_hostile.sealed_elsewhere_and_malformed,
         "huge-frames": coordinator_hostile.huge_frames, "leftover-worker": coordinator_hostile.leftover_worker}
# The coordinator's hostile-peer cases and the figures each reports beside the common columns.
HOSTILE_FIGURES = {"replayed-captures": ("admitted_by_replay", "most_bytes_back", "victim_lost_after_s"),
                   "sealed-elsewhere-malformed": ("attacks", "attacks_refused", "refusals_logged"),
                   "huge-frames": ("peak_rss_mb_before", "peak_rss_mb_after", "slowest_step_during_s", "median_step_s",
                                   "workers_lost"),
                   "leftover-worker": ("leftover_was_at", "leftover_restarted", "leftover_status")}
LOST = {"undisturbed": "nothing", "one-killed": "its chunk in progress",
        "two-killed-two-joined": "their chunks in progress", "slow": "its chunks, redone by others",
        "coordinator-killed": "steps since the checkpoint", "bad-messages": "nothing",
        **dict.fromkeys(HOSTILE_FIGURES, "nothing")}
GOSSIP_CASES = {"gossip-undisturbed": gossip.undisturbed, "gossip-killed-mid-transfer": gossip.killed_mid_transfer,
                "gossip-two-of-six-killed": gossip.two_of_six_killed_one_restarted,
                "gossip-partition": gossip.partitioned, "gossip-slow": gossip.slow_island,
                "gossip-bad-messages": gossip.bad_messages, "gossip-bad-fields": hostile.bad_fields,
                "gossip-relay-and-replay": hostile.relay_and_replay, "gossip-huge-frames": hostile.huge_frames,
                "gossip-bad-files": hostile.bad_files}
HOSTILE = ("gossip-bad-fields", "gossip-relay-and-replay", "gossip-huge-frames", "gossip-bad-files")  # 150 steps
GOSSIP_LOST = {"gossip-undisturbed": "nothing", "gossip-killed-mid-transfer": "the killed island and the model it sent",
               "gossip-two-of-six-killed": "the island not restarted; the other's steps since its checkpoint",
               "gossip-partition": "its tournaments while cut off", "gossip-slow": "nothing (the others do not wait)",
               "gossip-bad-messages": "nothing", **dict.fromkeys(HOSTILE, "nothing")}
MPI_CASES = {"mpi-sync-rank-killed": lambda d, data: mpi.es_rank_killed(d, data, mode="sync"),
             "mpi-coordinator-rank-killed": lambda d, data: mpi.es_rank_killed(d, data, mode="coordinator"),
             "gossip-sigint": lambda d, data: mpi.gossip_stopped(d, data, signal.SIGINT),
             "gossip-sigterm-one-rank": lambda d, data: mpi.gossip_stopped(d, data, signal.SIGTERM, to_rank=1),
             "gossip-island-killed": mpi.gossip_island_killed}


def corpus(directory, name, package):
    path = Path(directory) / f"{name}.bin"
    prepare([str(Path(sysconfig.get_paths()["stdlib"]) / package)], path, val_fraction=0.3)
    return path


def row(name, result, base_s):
    redone = f"{result['chunks_redone']} chunks"
    if result.get("steps_redone"):
        redone += f", {result['steps_redone']} steps"
    ratio = result.get("time_ratio")
    return {"case": name, "lost": LOST[name], "steps_lost": result["steps_lost"], "work_redone": redone,
            "time_vs_undisturbed": ratio if ratio is not None else round(result["wall_s"] / base_s, 2),
            "params_equal": result["params_equal"], "exit": result["status"]}


def hostile_row(name, result):
    """A line of the coordinator's hostile-peer table: what the attack got, and its figures."""
    survived = result["status"] == 0 and result["steps_lost"] == 0 and result["params_equal"]
    return {"case": result["case"], "outcome": "refused, run undamaged" if survived else "DAMAGED",
            "steps_lost": result["steps_lost"], "params_equal": result["params_equal"],
            "figures": ", ".join(f"{k} {result[k]}" for k in HOSTILE_FIGURES[name])}


def mpi_row(name, result):
    return {"case": result["case"], "exit": result["exit_status"], "seconds_to_exit": result["seconds_to_exit"],
            "work_redone": result["work_redone"], "resume_printed": result["resume_printed"],
            "resumed_once_each_step": result.get("steps_logged_once")}


def gossip_row(name, result):
    """A line of the gossip table (the survivors' figures; steps lost counts their missing log lines)."""
    fitness = ("-" if "fitness_gap" not in result else
               f"{result['fitness_gap']:+.4f} ({'within' if result['fitness_within_noise'] else 'outside'} "
               f"{result['fitness_noise']:.4f})")
    return {"case": result["case"], "lost": GOSSIP_LOST[name], "steps_lost": result["steps_lost"],
            "work_redone": f"{result['work_redone']} steps" if result["work_redone"] else "none",
            "time_vs_undisturbed": result.get("time_vs_undisturbed", 1.0), "final_fitness_vs_undisturbed": fitness,
            "refused": result["refused"], "exits": " ".join(str(v) for v in result["status"].values())}


@app.command(help=cli_help(__doc__))
@user_errors
def main(case: list[str] = typer.Option(None, help=f"Cases to run (default: all): "
                                                   f"{', '.join([*CASES, *GOSSIP_CASES, *MPI_CASES])}."),
         partition_seconds: float = typer.Option(30.0, help="How long gossip-partition cuts its island off.")):
    every = [*CASES, *GOSSIP_CASES, *MPI_CASES]
    chosen = case or every
    unknown = [c for c in chosen if c not in every]
    if unknown:
        raise BadInput(f"unknown case {unknown[0]!r}: choose from {', '.join(every)}")
    results, gossip_results, mpi_results = {}, {}, {}
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        data, other = corpus(tmp, "json", "json"), corpus(tmp, "html", "html")
        if any(c in CASES for c in chosen):
            reference = tcp.reference_for(tmp, data)
            for name in ["undisturbed"] + [c for c in chosen if c in CASES and c != "undisturbed"]:
                extra = (other,) if name == "bad-messages" else ()
                results[name] = CASES[name](tmp / name, data, reference, *extra)
                print(f"{name}: {results[name]}", flush=True)
        if any(c in GOSSIP_CASES for c in chosen):
            gossip.undisturbed(tmp / "gossip-warm-up", data)  # fills the compile cache: not timed
            base = gossip.undisturbed(tmp / "gossip-undisturbed", data)
            gossip_results["gossip-undisturbed"] = base
            if any(c in HOSTILE for c in chosen):  # the hostile cases' runs are longer: a base as long
                long_base = gossip.undisturbed(tmp / "gossip-undisturbed-long", data, steps=hostile.STEPS)
            for name in [c for c in chosen if c in GOSSIP_CASES and c != "gossip-undisturbed"]:
                options = {"seconds": partition_seconds} if name == "gossip-partition" else {}
                gossip_results[name] = gossip.compared(GOSSIP_CASES[name](tmp / name, data, **options),
                                                       long_base if name in HOSTILE else base)
                print(f"{name}: {gossip_results[name]}", flush=True)
        for name in [c for c in chosen if c in MPI_CASES]:
            (tmp / name).mkdir()
            mpi_results[name] = {k: v for k, v in MPI_CASES[name](tmp / name, data).items() if "output" not in k}
            print(f"{name}: {mpi_results[name]}", flush=True)
    rows = [row(name, results[name], results["undisturbed"]["wall_s"]) for name in results]
    hostile_rows = [hostile_row(name, results[name]) for name in results if name in HOSTILE_FIGURES]
    gossip_rows = [gossip_row(name, gossip_results[name]) for name in gossip_results]
    mpi_rows = [mpi_row(name, mpi_results[name]) for name in mpi_results]
    for table in (rows, hostile_rows, gossip_rows, mpi_rows):
        if table:
            print_table(table, list(table[0]))
            print()
    extra = {"steps": tcp.STEPS, "details": results, "hostile": hostile_rows, "gossip": gossip_rows,
             "gossip_details": gossip_results,
             "mpi": mpi_rows, "mpi_details": mpi_results,
             "note": "TCP coordinator: the slow case's time is the median step time against the same 4 workers at "
                     "equal speed; the others compare wall time with the undisturbed run's. TCP gossip: islands' "
                     "time per step from their first step to their last (start-up left out) against the undisturbed "
                     "run's, steps padded to 50 ms; fitness noise as bench/faults/gossip.py:fitness_noise "
                     "says. MPI: MPICH ends the whole job when a rank dies; --resume redoes the steps since "
                     "the last checkpoint"}
    print(f"wrote {write_result('faults', 'cpu', rows, extra)}")

if __name__ == "__main__":
    app()
