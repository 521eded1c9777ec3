"""Reading a written static report (bench/static_report/written.py), as bench/scale/coordinator.py does:
rows by name, and a missing or foreign report refused with one sentence; it stops on one
with exit status 2 before measuring anything."""

import json

import pytest

from bench.static_report.written import read_report, row_named
from eggnog.runtime.errors import BadInput
from tests.helpers import assert_user_error
from tests.test_peer_benches import bench

REPORT = {"commit": "abc", "roofline": [{"name": "EGG 6x256, population 32768: fused epoch", "units_per_s": 2e7}]}


def test_rows_are_read_by_name(tmp_path):
    path = tmp_path / "report.json"
    path.write_text(json.dumps(REPORT))
    commit, rows = read_report(path)
    assert commit == "abc" and row_named(rows, "EGG 6x256")["units_per_s"] == 2e7


@pytest.mark.parametrize("content, message", [(None, "is not a static report"), ("{}", "is not a static report"),
                                              ('{"roofline": [{}]}', "is not a static report")])
def test_a_missing_or_foreign_report_is_refused(tmp_path, content, message):
    path = tmp_path / "report.json"
    if content is not None:
        path.write_text(content)
    with pytest.raises(BadInput, match=message):
        read_report(path)


def test_a_report_without_the_row_is_refused(tmp_path):
    with pytest.raises(BadInput, match="no single roofline row"):
        row_named(read_report(_written(tmp_path, {"roofline": []}))[1], "EGG")
    assert_user_error(bench("scale.coordinator", tmp_path, "--report", tmp_path / "missing.json"),
                      "is not a static report")
    assert not (tmp_path / "results").exists()


def _written(tmp_path, record):
    path = tmp_path / "report.json"
    path.write_text(json.dumps(record))
    return path
