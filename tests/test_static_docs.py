"""The docs quote the static model's predictions as ranges, not points, wherever no measurement stands
beside them: docs/benchmarks.md's two tables of predictions, and the predictions of today's kernels in
docs/gpu.md and kernels/STATIC_REPORT.md, checked against the newest static report in bench/results."""

import json
import re
from pathlib import Path

import pytest

from tests.helpers import ROOT

FIGURE = r"\d+(?:\.\d+)?(?:e[+-]?\d+)?"
RANGE = re.compile(rf"{FIGURE}–{FIGURE}")
RESULTS = Path(ROOT) / "bench" / "results"
BENCHMARKS = (Path(ROOT) / "docs" / "benchmarks.md").read_text()


def table_after(text, header):
    """The cells of the markdown table whose header row starts with `header`, by column name."""
    lines = text[text.index(header):].split("\n")
    names = [c.strip() for c in lines[0].strip().strip("|").split("|")]
    rows = []
    for line in lines[2:]:
        if not line.strip().startswith("|"):
            break
        rows.append(dict(zip(names, (c.strip() for c in line.strip().strip("|").split("|")))))
    assert rows, f"no rows under {header!r}"
    return rows


def only_ranges(cell):
    """Whether a cell is one or more ranges (a / b) and nothing else but words in parentheses."""
    bare = re.sub(r"\([^)]*\)", "", cell)
    parts = [p.strip() for p in bare.split(" / ")]
    return all(RANGE.fullmatch(p.split(" ")[0]) for p in parts if p)


@pytest.mark.parametrize("cell, ok", [
    ("1.2e7–5.6e7", True), ("0.75–6 (ms)", True), ("1.2e7–5.6e7 / 3e7–4e7", True), ("350–2.8e3 GB/s", True),
    ("2.80e7", False), ("2.80e7 (1.2e7–5.6e7)", False), ("", False)])
def test_a_cell_of_ranges_is_told_from_a_point(cell, ok):
    assert (only_ranges(cell) and bool(cell)) == ok


def test_every_unmeasured_prediction_of_the_model_table_is_a_range():
    rows = table_after(BENCHMARKS, "| workload (H100) |")
    unmeasured = [r for r in rows if not r["measured"]]
    assert len(unmeasured) >= 8
    bad = [r["workload (H100)"] for r in unmeasured if not only_ranges(r["predicted"])]
    assert not bad, bad


def test_every_goal_row_is_predicted_as_a_range():
    rows = table_after(BENCHMARKS, "| goal row |")
    assert len(rows) >= 10
    bad = [r["goal row"] for r in rows if not only_ranges(r["predicted"])]
    assert not bad, bad


def figure(x):
    """A figure as the docs write it: three digits, 2.04e7 rather than 2.04e+07."""
    return re.sub(r"e([+-])0*(\d)", lambda m: "e" + ("-" if m.group(1) == "-" else "") + m.group(2), f"{x:.3g}")


def newest_report():
    files = sorted(RESULTS.glob("sass_report-sm90-*.json"))
    record = json.loads(files[-1].read_text())
    return {r["name"]: r["prediction"] for r in record["roofline"] if "prediction" in r}


HEADLINE = ("EGG 6x256, population 32768: fused epoch", "EGG 6x256, population 32768, unperturbed: fused epoch",
            "population 40960: tensor-core epoch", "population 40960, unperturbed: tensor-core epoch")


@pytest.mark.parametrize("page", ["docs/gpu.md", "docs/benchmarks.md", "kernels/STATIC_REPORT.md"])
def test_the_headline_predictions_are_quoted_as_the_reports_ranges(page):
    """The EGG's and the transformer's predicted member-tokens/s appear as the newest report's ranges, and
    their points nowhere on the page."""
    text = (Path(ROOT) / page).read_text()
    predictions = newest_report()
    assert "range" in next(iter(predictions.values())), "the newest static report gives no ranges"
    for headline in HEADLINE:
        (p,) = [p for name, p in predictions.items() if headline in name]
        low, high = p["range"]
        assert f"{figure(low)}–{figure(high)}" in text, (page, headline, p["range"])
        assert figure(p["units_per_s"]) not in text, (page, headline, p["units_per_s"])
