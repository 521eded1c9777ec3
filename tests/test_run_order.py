"""The serial layer's file order (tests/conftest.py): the listed files exist, the longest go first, and
every file whose tests hold a wall-clock deadline is among those that go last (tests/run.sh runs the
layer at idle priority beside the fault suites, which can take every core for seconds)."""

import os
import re

from tests.conftest import DEADLINES_LAST, LONGEST_FIRST, run_order

TESTS = os.path.dirname(os.path.abspath(__file__))
DEADLINE = re.compile(r"time\.monotonic\(\)|perf_counter\(\)|timeout=0\.|_timeout=")


def serial_test_files():
    return sorted(name for name in os.listdir(TESTS) if name.startswith("test_") and name.endswith(".py")
                  and name != os.path.basename(__file__))  # this file names the patterns


def test_the_listed_files_exist_and_none_is_listed_twice():
    files = set(serial_test_files())
    listed = LONGEST_FIRST + DEADLINES_LAST
    assert listed and set(listed) <= files, sorted(set(listed) - files)
    assert len(set(listed)) == len(listed)


def test_the_files_with_deadlines_are_exactly_those_that_go_last():
    with_deadlines = {name for name in serial_test_files()
                      if DEADLINE.search(open(os.path.join(TESTS, name)).read())}
    assert with_deadlines and with_deadlines == set(DEADLINES_LAST), {
        "not listed": sorted(with_deadlines - set(DEADLINES_LAST)),
        "listed, no deadline": sorted(set(DEADLINES_LAST) - with_deadlines)}


def test_the_longest_go_first_and_those_with_deadlines_last():
    ranks = {name: run_order(name) for name in serial_test_files()}
    others = [rank for name, rank in ranks.items() if name not in LONGEST_FIRST + DEADLINES_LAST]
    assert others and [ranks[name] for name in LONGEST_FIRST] == sorted(ranks[name] for name in LONGEST_FIRST)
    assert max(ranks[name] for name in LONGEST_FIRST) < min(others) <= max(others) < min(
        ranks[name] for name in DEADLINES_LAST)
