"""Every cell of a Markdown table in the pages users read (the README, docs/, kernels/STATIC_REPORT.md) says
what its thing is in a line or two: at most 300 characters. Design prose goes under a heading of the page or
into docs/internals.md."""

import re
from pathlib import Path

import pytest

from tests.helpers import ROOT

LIMIT = 300
PAGES = [Path(ROOT) / "README.md", *sorted((Path(ROOT) / "docs").glob("*.md")),
         Path(ROOT) / "kernels" / "STATIC_REPORT.md"]
DELIMITER = re.compile(r"^\s*\|?\s*:?-+:?\s*(\|\s*:?-+:?\s*)*\|?\s*$")
FENCE = re.compile(r"^\s*(```|~~~)")


def split_row(line):
    """The cells of one table row, split at each `|` that is neither escaped (`\\|`) nor inside a code span."""
    cells, current, i = [], [], 0
    while i < len(line):
        char = line[i]
        if char == "\\" and i + 1 < len(line):
            current.append(line[i:i + 2])
            i += 2
            continue
        if char == "`":
            ticks = len(line[i:]) - len(line[i:].lstrip("`"))
            close = line.find("`" * ticks, i + ticks)
            while close != -1 and line[close + ticks:close + ticks + 1] == "`":  # a longer run does not close it
                close = line.find("`" * ticks, close + ticks + 1)
            if close != -1:
                current.append(line[i:close + ticks])
                i = close + ticks
                continue
            current.append("`" * ticks)  # no closing run: the backticks are plain text
            i += ticks
            continue
        if char == "|":
            cells.append("".join(current))
            current = []
        else:
            current.append(char)
        i += 1
    cells.append("".join(current))
    stripped = line.strip()
    if stripped.startswith("|"):
        cells = cells[1:]
    if stripped.endswith("|") and not stripped.endswith("\\|"):
        cells = cells[:-1]
    return [cell.strip() for cell in cells]


def table_cells(text):
    """(line number, cell) of every cell of every table of `text` (header and body rows; tables inside fenced
    code blocks are code, not tables)."""
    lines = text.splitlines()
    found, fenced, i = [], False, 0
    while i < len(lines):
        if FENCE.match(lines[i]):
            fenced = not fenced
        elif not fenced and "|" in lines[i] and i + 1 < len(lines) and DELIMITER.match(lines[i + 1]) \
                and "-" in lines[i + 1]:
            found += [(i + 1, cell) for cell in split_row(lines[i])]
            i += 2
            while i < len(lines) and lines[i].strip() and "|" in lines[i]:
                found += [(i + 1, cell) for cell in split_row(lines[i])]
                i += 1
            continue
        i += 1
    return found


def long_cells(name, text, limit=LIMIT):
    """'page:line (length): first words' of each cell of `text` longer than `limit` characters."""
    return [f"{name}:{number} ({len(cell)} chars): {' '.join(cell.split()[:8])} ..."
            for number, cell in table_cells(text) if len(cell) > limit]


@pytest.mark.parametrize("line, cells", [
    ("| a | b |", ["a", "b"]),
    ("a | b", ["a", "b"]),
    (r"| x \| y | z |", [r"x \| y", "z"]),
    ("| `a | b` | c |", ["`a | b`", "c"]),
    ("| ``a ` | b`` | c |", ["``a ` | b``", "c"]),
    ("| a ` b | c |", ["a ` b", "c"]),
    ("| | empty |", ["", "empty"]),
])
def test_a_row_splits_into_its_cells(line, cells):
    assert split_row(line) == cells


def test_tables_are_found_and_code_blocks_are_not_tables():
    text = ("intro | not a table\n\n| h1 | h2 |\n|---|:-:|\n| a | b |\n| c | d |\n\nafter\n\n"
            "```\n| x | y |\n|---|---|\n```\n")
    assert table_cells(text) == [(3, "h1"), (3, "h2"), (5, "a"), (5, "b"), (6, "c"), (6, "d")]


def test_a_long_cell_is_reported_with_its_page_line_and_first_words():
    text = "| name | what |\n|---|---|\n| `core/` | " + "word " * 70 + "|\n| `rnn/` | short |\n"
    assert long_cells("docs/x.md", text) == ["docs/x.md:3 (349 chars): word word word word word word word word ..."]
    assert long_cells("docs/x.md", text, limit=349) == []


def test_every_table_cell_of_the_docs_reads_in_a_line_or_two():
    cells = {page: table_cells(page.read_text()) for page in PAGES}
    assert sum(map(len, cells.values())) > 100 and cells[Path(ROOT) / "docs" / "kernels.md"], \
        "found (almost) no table cells in the docs: the scan is broken"
    long = [entry for page in PAGES for entry in long_cells(page.relative_to(ROOT), page.read_text())]
    assert not long, (f"table cells over {LIMIT} characters (keep what the thing is in the cell; move the rest "
                      "under a heading of the page or into docs/internals.md):\n" + "\n".join(long))
