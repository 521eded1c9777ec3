"""Figures the README and the pages of docs/ quote from runs and benchmarks, checked against the files
of bench/results/ they come from: a benchmark run again and its figures not carried over fails here.
Also every results file they name must exist."""

import json
import re
from pathlib import Path

from tests.helpers import ROOT

# the README and every page of docs/, one after the other: a paragraph never spans two files
PAGES = [Path(ROOT) / "README.md", *sorted((Path(ROOT) / "docs").glob("*.md"))]
DOCS = "\n\n".join(path.read_text() for path in PAGES)
RESULTS = Path(ROOT) / "bench" / "results"


def paragraph_citing(name):
    """The paragraph (blank-line separated) that names the results file `name`."""
    found = [p for p in DOCS.split("\n\n") if name in p]
    assert found, f"the docs no longer cite {name}"
    return found[0]


def result(name):
    return json.loads((RESULTS / name).read_text())


def test_every_results_file_the_readme_names_exists():
    named = set(re.findall(r"bench/results/([\w.\-]+\.(?:json|png|md|log|csv))", DOCS))
    assert named
    missing = sorted(n for n in named if not (RESULTS / n).exists())
    assert not missing, missing


MAIN_JOB = re.compile(r"main_job-(\w+)-cpu-py([\d-]+)-(\d{4}-\d\d-\d\d)\.json")


def job_row(job, python="3-11-7"):
    return result(f"main_job-{job}-cpu-py{python}-2026-11-28.json")["rows"][0]


def test_the_main_job_gives_the_same_figure_on_python_3_11_and_3_12():
    py311, py312 = job_row("train_es"), job_row("train_es", "3-12-1")
    text = " ".join(paragraph_citing("main_job-train_es-cpu-py3-12-1-2026-11-28.json").split())
    assert f"1000 epochs in {py311['wall_s']} s on Python 3.11 and {py312['wall_s']} s on 3.12" in text
    assert f"{py311['tokens_per_s']:,} and {py312['tokens_per_s']:,} tokens/s" in text
    assert py311["val_bpb"] == py312["val_bpb"] and f"**{py311['val_bpb']:.3f} bits/byte** on both" in text
    curve = py311["val_curve"]
    assert (f"{curve['25']:.2f} after 25 epochs, {curve['125']:.2f} after 125, {curve['325']:.2f} after 325, "
            f"{curve['625']:.2f} after 625") in text


def test_each_cited_bare_run_is_its_benchmark_file():
    checked = 0
    for block in blocks():
        text = " ".join(block.split())
        for job, python, date in set(MAIN_JOB.findall(block)):
            row = result(f"main_job-{job}-cpu-py{python}-{date}.json")["rows"][0]
            assert f"{row['wall_s']} s" in text, (job, row["wall_s"])
            if row["val_bpb"] is not None:
                assert f"{row['val_bpb']:.3f}" in text, (job, row["val_bpb"])
            checked += 1
    assert checked >= 5
    for job, start in (("train_bptt", "| `train_bptt.py`"), ("train_es_mingru", "| `train_es.py --model mingru`"),
                       ("train_es", "| `train_es.py` (integer EGG")):
        row, line = job_row(job), next(line for line in DOCS.splitlines() if line.startswith(start))
        assert f"| {row['wall_s']} s | {row['val_bpb']:.3f}" in line, (line, row)


def table_after(heading, count):
    """The first `count` rows of the docs table whose header line starts with `heading`, as cell lists."""
    start = DOCS.index(heading)
    lines = [line for line in DOCS[start:].splitlines()[2:] if line.startswith("|")][:count]
    assert len(lines) == count, (heading, lines)
    return [[c.strip() for c in line.strip("|").split("|")] for line in lines]


def test_the_gossip_fault_table_is_its_benchmark_files():
    # kills, partition and slowness from the earlier file; bad messages from the run over CurveZMQ. Row 0 of each
    # file is the undisturbed run, the yardstick.
    rows = result("faults-cpu-2026-11-28.json")["gossip"][1:5] + result("faults-cpu-2026-12-02.json")["gossip"][1:2]
    assert [row["case"] for row in rows][-1] == "bad messages"
    for cells, row in zip(table_after("| case (gossip over TCP) |", len(rows)), rows):
        assert cells[2] == str(row["steps_lost"]) and float(cells[4]) == row["time_vs_undisturbed"], (cells, row)
        gap = row["final_fitness_vs_undisturbed"]
        if gap != "-":
            assert cells[5] == gap.replace("within ", "noise "), (cells, row)


def test_the_hostile_peer_tables_are_their_benchmark_file():
    faults = result("faults-cpu-2026-12-02.json")
    coordinator = faults["hostile"]
    for cells, row in zip(table_after("| attack (coordinator over TCP) |", len(coordinator)), coordinator):
        assert row["params_equal"] and cells[2] == str(row["steps_lost"]) and cells[3] == "yes", (cells, row)
    gossip = faults["gossip"][2:]  # past the undisturbed run and the bad messages of the table above
    assert gossip
    for cells, row in zip(table_after("| attack (gossip over TCP) |", len(gossip)), gossip):
        assert cells[2] == str(row["steps_lost"]) and float(cells[3]) == row["time_vs_undisturbed"], (cells, row)
        assert cells[4] == row["final_fitness_vs_undisturbed"].replace("within ", "noise "), (cells, row)


MEASURED = re.compile(r"(?<![-\w.])\d[\d.,]*\s*(?:bits/byte|bits per token|bits/token|member-tokens/s|tokens/s|"
                      r"rows/s|s/step|s a step|ms\b|min \d+ s\b|s\b)")
SOURCE = re.compile(r"bench/results/[\w.\-*]+|python -m bench\.\w+|bench/[\w/]+\.py|`bench\.[\w.]+`")


def blocks():
    """The paragraphs of the docs, a table or an indented continuation joined to the paragraph before
    it, fenced code left out (commands and time limits, not measurements)."""
    text = re.sub(r"```.*?```", "", DOCS, flags=re.S)
    joined = []
    for part in (p for p in text.split("\n\n") if p.strip()):
        if joined and part.startswith(("|", "  ")):
            joined[-1] += "\n\n" + part
        else:
            joined.append(part)
    return joined


def test_every_measured_figure_names_where_it_comes_from():
    """A paragraph quoting a time, a rate or a loss names its benchmark or results file."""
    unsourced = [b[:160] for b in blocks() if MEASURED.search(b) and not SOURCE.search(b)]
    assert not unsourced, "\n\n".join(unsourced)


def test_the_compile_cache_figures_are_its_benchmark_file():
    text = " ".join(paragraph_citing("compile_cache-cpu-2026-11-28.json").split())
    rows = result("compile_cache-cpu-2026-11-28.json")["rows"]
    assert rows, "the benchmark file has no rows to check"
    for row in rows:
        name = "--model transformer" if "transformer" in row["run"] else row["run"]
        assert f"`{name}` {row['first_start_s']} → {row['second_start_s']} s" in text, (name, row)


def _figure(x):
    """A figure as the docs write it: three digits, 2.04e7 rather than 2.04e+07."""
    return re.sub(r"e([+-])0*(\d)", lambda m: "e" + ("-" if m.group(1) == "-" else "") + m.group(2), f"{x:.3g}")


def test_the_goals_table_is_its_benchmark_file():
    """Each goal row's predicted range and its range of speed over the goal, as the goals file gives them."""
    text = paragraph_citing("goals-sm90-2026-12-02.json")
    table = [line for line in DOCS.split("\n") if line.strip().startswith("| ") and "÷ goal" not in line]
    rows = result("goals-sm90-2026-12-02.json")["rows"]
    assert rows, "the benchmark file has no rows to check"
    for row in rows:
        line = next((t for t in table if t.strip().startswith(f"| {row['row']} |")), None)
        assert line is not None, row["row"]
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        low, high = row["ours_range"]
        assert cells[2] == f"{_figure(low)}–{_figure(high)} {row['unit']}", cells
        low, high = row["speed_over_goal_range"]
        assert cells[4] == f"{_figure(low)}–{_figure(high)}", cells
    assert f"{result('goals-sm90-2026-12-02.json')['seconds']:.0f} s on 2 cores" in text
