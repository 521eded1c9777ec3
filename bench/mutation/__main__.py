"""Mutation testing of the modules where a silent error does the most harm (bench/mutation/targets.py), with
cosmic-ray, on a temporary copy of the checkout: the working tree is never edited.

    python -m bench.mutation                    # HEAD's files; results in bench/results/mutation-cpu-<date>.json
    python -m bench.mutation --working-tree     # the files as they are now, uncommitted changes included
    python -m bench.mutation --only merge --out elsewhere   # modules whose path contains "merge"
    python -m bench.mutation --list             # count the mutants only

About half an hour on two cores; not run in CI. See docs/internals.md (mutation testing)."""

import argparse
import datetime
import json
import os
import shutil
import signal
import sys
import tempfile
import time
from importlib.metadata import version
from pathlib import Path

from bench.mutation import session, verdicts
from bench.mutation.checkout_copy import check_imports_from, make_copy
from bench.mutation.targets import OPERATORS, TARGETS
from bench.report import cpu_name

REPO = Path(__file__).resolve().parent.parent.parent


def parse_args(argv):
    p = argparse.ArgumentParser(prog="python -m bench.mutation", description=__doc__.split("\n\n")[0])
    p.add_argument("--out", type=Path, default=REPO / "bench" / "results", help="folder of the results file")
    p.add_argument("--only", action="append", default=[], help="run the modules whose path contains this")
    p.add_argument("--working-tree", action="store_true", help="the working tree's files, not HEAD's")
    p.add_argument("--list", action="store_true", help="count the mutants of each module and stop")
    p.add_argument("--keep", action="store_true", help="keep the temporary copy (its cosmic-ray databases)")
    return p.parse_args(argv)


def tests_present(copy, tests):
    """The target's pytest arguments whose test files exist in the copy, and those that do not."""
    present, missing = [], []
    for arg in tests:
        is_path = arg.startswith("tests/")
        (missing if is_path and not Path(copy, arg.split("::")[0]).is_file() else present).append(arg)
    return present, missing


def module_rows(target, results):
    rows = []
    for spec, result in results:
        rows.append({"module": target.path, "function": spec.definition_name or session.MODULE_LEVEL,
                     "line": spec.start_pos[0], "operator": spec.operator_name.split("/")[-1],
                     "occurrence": spec.occurrence, "outcome": session.outcome(result), "diff": result.diff,
                     "killed_by": session.killing_test(result.output) if session.outcome(result) == "killed"
                     else None})
    return rows


def summary(rows):
    count = {k: sum(r["verdict"] == k for r in rows) for k in
             ("killed", "timeout", "survived", "equivalent", "unexplained", "incompetent")}
    detected = count["killed"] + count["timeout"]
    judged = detected + count["unexplained"]
    return {"mutants": len(rows), "killed": count["killed"], "timed_out": count["timeout"],
            "survived": count["equivalent"] + count["unexplained"], "equivalent": count["equivalent"],
            "unexplained_survivors": count["unexplained"], "incompetent": count["incompetent"],
            "kill_rate": round(detected / judged, 4) if judged else None}


def main(argv=None):
    args = parse_args(argv)
    targets = [t for t in TARGETS if not args.only or any(s in t.path for s in args.only)]
    if not targets:
        raise SystemExit(f"no module matches {args.only}")
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # remove the copy on a kill too
    work = Path(tempfile.mkdtemp(prefix="eggnog-mutation-"))
    copy = work / "checkout"
    started = time.perf_counter()
    try:
        commit = make_copy(REPO, copy, working_tree=args.working_tree)
        check_imports_from(copy)
        os.chdir(copy)  # cosmic-ray mutates module paths relative to the working directory
        os.environ.update(PYTHONPATH=str(copy), NUMBA_CACHE_DIR=str(work / "numba-cache"),
                          EGGNOG_CACHE_DIR=str(work / "eggnog-cache"), EGGNOG_MUTATION_DIGEST=_digest(copy))
        rows, table = [], []
        for target in targets:
            db = work / (target.path.replace("/", "-") + ".sqlite")
            selected = session.list_mutants(copy, target, db)
            tests, missing = tests_present(copy, target.tests)
            tests += ["-k", target.keyword] if target.keyword else []
            print(f"{target.path}: {selected} mutants; tests {' '.join(tests)}", flush=True)
            line = {"module": target.path, "area": target.area, "functions": list(target.functions) or "all",
                    "tests": tests, "missing_tests": missing, "env": dict(target.env)}
            if args.list:
                table.append({**line, "mutants": selected})
                continue
            saved = dict(os.environ)
            os.environ.update(dict(target.env))
            try:
                code, seconds, output = session.baseline(copy, tests)  # also fills the compile cache, unmutated
                if code:
                    print(f"  the unmutated tests fail; module skipped\n{output}", flush=True)
                    table.append({**line, "baseline": "tests fail unmutated", "baseline_output": output[-1500:]})
                    continue
                timeout = max(30.0, 3 * seconds + 10)
                session.run_mutants(db, tests, timeout, progress=lambda s: print(s, flush=True))
            finally:
                os.environ.clear()
                os.environ.update(saved)
            mine = verdicts.keyed(module_rows(target, session.completed(db)))
            rows += mine
            table.append({**line, "baseline_s": round(seconds, 1), "timeout_s": round(timeout)})
            path = finish(args, commit, table, rows, targets, started)  # after each module: a partial file
        if args.list:
            print(json.dumps(table, indent=1))
            return 0
        path = finish(args, commit, table, rows, targets, started)
        print_table(table)
        print(f"wrote {path}")
        return 0
    finally:
        os.chdir(REPO)
        if args.keep:
            print(f"kept {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)


def finish(args, commit, table, rows, targets, started):
    notes = verdicts.judge(rows, {t.path for t in targets})
    for line in table:
        line.update(summary([r for r in rows if r["module"] == line["module"]]))
    return write(args, commit, table, rows, notes, time.perf_counter() - started)


def _digest(copy):
    import subprocess

    probe = "import eggnog; print(eggnog.source_digest())"
    return subprocess.run([sys.executable, "-c", probe], cwd=copy, capture_output=True, text=True,
                          check=True).stdout.strip()


def survivor_record(row):
    return {k: row[k] for k in ("key", "module", "function", "line", "operator", "verdict")} | {
        "mutation": verdicts.changed_lines(row["diff"]), **{k: row[k] for k in ("why", "note") if k in row}}


def write(args, commit, table, rows, notes, seconds):
    today = datetime.date.today().isoformat()
    record = {
        "benchmark": "mutation", "device": "cpu", "cpu": cpu_name(), "commit": commit, "date": today,
        "tool": f"cosmic-ray {version('cosmic-ray')}", "source": "working tree" if args.working_tree else "HEAD",
        "command": " ".join(["python -m bench.mutation", *(["--working-tree"] if args.working_tree else []),
                             *(f"--only {o}" for o in args.only)]), "wall_s": round(seconds),
        "operators": [o.split("/")[-1] for o in OPERATORS],
        "kill_rate_is": "(killed + timed out) / (mutants - equivalent - incompetent)",
        "overall": summary(rows), "rows": table,
        "survivors": [survivor_record(r) for r in rows if r["outcome"] == "survived"],
        "explanation_findings": notes,
    }
    args.out.mkdir(parents=True, exist_ok=True)
    # an --only of a path ("coordinator/messages.py") names the file with its slashes as dashes
    name = "mutation" + ("-" + "-".join(o.replace("/", "-") for o in args.only) if args.only else "")
    path = args.out / f"{name}-cpu-{today}.json"
    path.write_text(json.dumps(record, indent=1) + "\n")
    return path


def print_table(table):
    print(f"{'module':42s} {'mutants':>7s} {'killed':>6s} {'t/o':>4s} {'surv':>4s} {'equiv':>5s} {'rate':>6s}")
    for r in table:
        rate = "-" if r.get("kill_rate") is None else f"{100 * r['kill_rate']:.1f}%"
        print(f"{r['module']:42s} {r.get('mutants', 0):7d} {r.get('killed', 0):6d} {r.get('timed_out', 0):4d} "
              f"{r.get('survived', 0):4d} {r.get('equivalent', 0):5d} {rate:>6s}")


if __name__ == "__main__":
    sys.exit(main())
