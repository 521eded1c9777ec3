"""The fault suite as a table: what each failure costs a coordinator run over TCP on this machine
(processes on localhost, a tiny model, jobs padded to a fixed time). Per case: steps missing from the
log, work done again, wall time against the undisturbed run (process start-up included), and whether
the final parameters equal the synchronous trainer's bit for bit.

    python -m bench.faults
    python -m bench.faults --case slow
"""

import sysconfig
import tempfile
from pathlib import Path

import typer

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


@app.command(help=cli_help(__doc__))
@user_errors
def main(case: list[str] = typer.Option(None, help=f"Cases to run (default: all): {', '.join(CASES)}.")):
    chosen = case or list(CASES)
    unknown = [c for c in chosen if c not in CASES]
    if unknown:
        raise BadInput(f"unknown case {unknown[0]!r}: choose from {', '.join(CASES)}")
    results = {}
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        data, other = corpus(tmp, "json", "json"), corpus(tmp, "html", "html")
        reference = tcp.reference_for(tmp, data)
        for name in ["undisturbed"] + [c for c in chosen if c != "undisturbed"]:
            extra = (other,) if name == "bad-messages" else ()
            results[name] = CASES[name](tmp / name, data, reference, *extra)
            print(f"{name}: {results[name]}", flush=True)
    base_s = results["undisturbed"]["wall_s"]
    rows = [row(name, results[name], base_s) for name in results]
    print_table(rows, list(rows[0]))
    extra = {"steps": tcp.STEPS, "details": results, "note": "the slow case's time is the median step time against "
             "the same 4 workers at equal speed; the others compare wall time with the undisturbed run's"}
    print(f"wrote {write_result('faults', 'cpu', rows, extra)}")


if __name__ == "__main__":
    app()
