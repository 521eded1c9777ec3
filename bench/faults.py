"""The fault suite as tables: what each failure costs. First a coordinator run over TCP on this machine
(processes on localhost, a tiny model, jobs padded to a fixed time); per case: steps missing from the
log, work done again, wall time against the undisturbed run (process start-up included), and whether
the final parameters equal the synchronous trainer's bit for bit. Then runs under MPI (MPICH ends the
whole job when a rank dies): how fast the job ends, what --resume redoes, and gossip's stop signals.

    python -m bench.faults
    python -m bench.faults --case slow --case gossip-sigint
"""

import signal
import sysconfig
import tempfile
from pathlib import Path

import typer

from bench import fault_cases_mpi as mpi
from bench import fault_cases_tcp as tcp
from bench.report import print_table, write_result
from eggnog.corpus.prepare import prepare
from eggnog.runtime.cli import cli_help, user_errors
from eggnog.runtime.errors import BadInput

app = typer.Typer(add_completion=False, pretty_exceptions_enable=False, rich_markup_mode=None)
CASES = {"undisturbed": tcp.undisturbed, "one-killed": tcp.one_of_three_killed,
         "two-killed-two-joined": tcp.two_killed_two_joined, "slow": tcp.slow_worker,
         "coordinator-killed": tcp.coordinator_killed, "bad-messages": tcp.bad_messages}
LOST = {"undisturbed": "nothing", "one-killed": "its chunk in progress",
        "two-killed-two-joined": "their chunks in progress", "slow": "its chunks, redone by others",
        "coordinator-killed": "steps since the checkpoint", "bad-messages": "nothing"}
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


def mpi_row(name, result):
    return {"case": result["case"], "exit": result["exit_status"], "seconds_to_exit": result["seconds_to_exit"],
            "work_redone": result["work_redone"], "resume_printed": result["resume_printed"],
            "resumed_once_each_step": result.get("steps_logged_once")}


@app.command(help=cli_help(__doc__))
@user_errors
def main(case: list[str] = typer.Option(None, help=f"Cases to run (default: all): {', '.join([*CASES, *MPI_CASES])}.")):
    chosen = case or [*CASES, *MPI_CASES]
    unknown = [c for c in chosen if c not in CASES and c not in MPI_CASES]
    if unknown:
        raise BadInput(f"unknown case {unknown[0]!r}: choose from {', '.join([*CASES, *MPI_CASES])}")
    results, mpi_results = {}, {}
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        data, other = corpus(tmp, "json", "json"), corpus(tmp, "html", "html")
        if any(c in CASES for c in chosen):
            reference = tcp.reference_for(tmp, data)
            for name in ["undisturbed"] + [c for c in chosen if c in CASES and c != "undisturbed"]:
                extra = (other,) if name == "bad-messages" else ()
                results[name] = CASES[name](tmp / name, data, reference, *extra)
                print(f"{name}: {results[name]}", flush=True)
        for name in [c for c in chosen if c in MPI_CASES]:
            (tmp / name).mkdir()
            mpi_results[name] = {k: v for k, v in MPI_CASES[name](tmp / name, data).items() if "output" not in k}
            print(f"{name}: {mpi_results[name]}", flush=True)
    rows = [row(name, results[name], results["undisturbed"]["wall_s"]) for name in results]
    mpi_rows = [mpi_row(name, mpi_results[name]) for name in mpi_results]
    for table in (rows, mpi_rows):
        if table:
            print_table(table, list(table[0]))
            print()
    extra = {"steps": tcp.STEPS, "details": results, "mpi": mpi_rows, "mpi_details": mpi_results,
             "note": "TCP: the slow case's time is the median step time against the same 4 workers at equal speed; "
                     "the others compare wall time with the undisturbed run's. MPI: MPICH ends the whole job when "
                     "a rank dies; --resume redoes the steps since the last checkpoint"}
    print(f"wrote {write_result('faults', 'cpu', rows, extra)}")


if __name__ == "__main__":
    app()
