"""Mutants by key, and the reviewed explanations of bench/mutation/explained.json merged into a run.

A mutant's key is its module, its function, its operator and a hash of the lines it removes and adds
(their text, not their numbers): moving code keeps a key, while changing the mutated line or anything
the mutant replaces makes a new one, so an explanation written for one mutant never silently covers
another. Identical changes in one function are told apart by their order.

explained.json holds maps from key to note:
  "equivalent": survivors whose mutated code behaves identically for every input, with why;
  "killed":     mutants that survived an earlier run and that a test added since kills, with that test;
  "open":       survivors that are not equivalent and have no test yet, with what stands in the way (they
                count as survivors).
A run reports an "equivalent" mutant that is killed (the claim was wrong), a "killed" one that survives
(the test no longer kills it), and every survivor with no note."""

import hashlib
import json
from collections import Counter
from pathlib import Path

EXPLAINED = Path(__file__).resolve().parent / "explained.json"


def changed_lines(diff):
    """The removed and added lines of a unified diff, as '-text' and '+text' (file headers dropped)."""
    return [line.rstrip() for line in (diff or "").splitlines()
            if line[:1] in "+-" and not line.startswith(("+++", "---"))]


def keyed(rows):
    """Give each mutant row (module, function, operator, diff) its key, in place."""
    seen = Counter()
    for row in sorted(rows, key=lambda r: (r["module"], r["line"], r["operator"], r["occurrence"])):
        text = "\n".join(changed_lines(row["diff"]))
        base = hashlib.sha256(f"{row['module']}|{row['function']}|{row['operator']}|{text}".encode()).hexdigest()[:16]
        seen[base] += 1
        row["key"] = f"{row['module']}:{row['function']}:{base}" + (f"#{seen[base]}" if seen[base] > 1 else "")
    return rows


def load_explained(path=EXPLAINED):
    data = json.loads(Path(path).read_text()) if Path(path).is_file() else {}
    return data.get("equivalent", {}), data.get("killed", {}), data.get("open", {})


def judge(rows, modules, path=EXPLAINED):
    """Mark each row's verdict from the explanations; returns the findings about the notes themselves."""
    equivalent, killed, open_notes = load_explained(path)
    by_key = {row["key"]: row for row in rows}
    for row in rows:
        note = equivalent.get(row["key"])
        if row["outcome"] == "survived":
            row["verdict"] = "equivalent" if note else "unexplained"
            if note:
                row["why"] = note["why"]
            elif row["key"] in open_notes:
                row["note"] = open_notes[row["key"]]["note"]
        else:
            row["verdict"] = row["outcome"]
    in_run = [k for k in (*equivalent, *killed, *open_notes) if k.split(":", 1)[0] in modules]
    return {
        "equivalent_claims_killed": [{"key": k, "killed_by": by_key[k]["killed_by"]} for k in equivalent
                                     if k in by_key and by_key[k]["outcome"] in ("killed", "timeout")],
        "killed_notes_surviving": [k for k in killed if k in by_key and by_key[k]["outcome"] == "survived"],
        "open_notes_killed": [k for k in open_notes if k in by_key and by_key[k]["outcome"] != "survived"],
        "notes_matching_no_mutant": sorted(k for k in in_run if k not in by_key),
        "killed_notes": [{"key": k, "test_added": note["test"], "killed_by_now": by_key[k].get("killed_by")}
                         for k, note in killed.items() if k in by_key],
    }
