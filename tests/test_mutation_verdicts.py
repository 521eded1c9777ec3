"""How the mutation run (bench/mutation) matches its reviewed notes to mutants: a key survives moving the code
but not changing it, and a note that no longer holds is reported, not silently applied."""

import json

from bench.mutation.verdicts import changed_lines, judge, keyed

DIFF = "--- a/m.py\n+++ b/m.py\n@@ -3,3 +3,3 @@\n def f(x):\n-    return x + 1\n+    return x - 1\n"


def row(diff=DIFF, line=4, outcome="survived", function="f"):
    return {"module": "m.py", "function": function, "line": line, "operator": "ReplaceBinaryOperator_Add_Sub",
            "occurrence": 0, "diff": diff, "outcome": outcome, "killed_by": None}


def test_changed_lines_drop_headers_and_context():
    assert changed_lines(DIFF) == ["-    return x + 1", "+    return x - 1"]


def test_a_key_follows_the_code_not_its_line_and_changes_with_its_text():
    moved = keyed([row(line=40, diff=DIFF.replace("@@ -3,3 +3,3 @@", "@@ -39,3 +39,3 @@"))])[0]["key"]
    assert keyed([row()])[0]["key"] == moved
    assert keyed([row(diff=DIFF.replace("x + 1", "x + 2").replace("x - 1", "x - 2"))])[0]["key"] != moved
    assert keyed([row(function="g")])[0]["key"] != moved
    twins = keyed([row(line=4), row(line=9)])
    assert twins[0]["key"] != twins[1]["key"] and twins[1]["key"].endswith("#2")


def test_notes_are_applied_to_their_own_mutant_and_wrong_ones_are_reported(tmp_path):
    survivor, killed = keyed([row()])[0], keyed([row(function="g", outcome="killed")])[0]
    killed["killed_by"] = "tests/test_m.py::test_g"
    notes = {"equivalent": {survivor["key"]: {"why": "same"}, killed["key"]: {"why": "claimed"},
                            "m.py:h:0000000000000000": {"why": "gone"}}, "killed": {}, "open": {}}
    (tmp_path / "explained.json").write_text(json.dumps(notes))
    findings = judge([survivor, killed], {"m.py"}, tmp_path / "explained.json")
    assert survivor["verdict"] == "equivalent" and survivor["why"] == "same" and killed["verdict"] == "killed"
    assert findings["equivalent_claims_killed"] == [{"key": killed["key"], "killed_by": "tests/test_m.py::test_g"}]
    assert findings["notes_matching_no_mutant"] == ["m.py:h:0000000000000000"]
    (tmp_path / "explained.json").write_text(json.dumps({"equivalent": {}}))
    judge([survivor], {"m.py"}, tmp_path / "explained.json")
    assert survivor["verdict"] == "unexplained"
