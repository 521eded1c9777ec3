"""The population view of a gossip run over TCP, kept on the shared run folder, with no rank 0
(gruboros's filesystem coordinator): every --population-every steps each island replaces its
rank-NN/status.json (its record, training/gossip/population.py's FIELDS) and reads everyone's.
Records older than `stale_s` count as islands not heard from (no fitness: ranked last); a status file
that is not its island's, dated more than CLOCK_SKEW_S ahead, or whose record is not len(FIELDS)
finite numbers or nulls is ignored (status_record). Whichever
island first passes a summary point (the furthest island's step, in --population-every steps) while
holding the folder's lock writes that summary's metrics.jsonl line and tidies the checkpoints, so each
summary is written once, by any island that is alive."""

import fcntl
import json
import math
import time
from pathlib import Path

import numpy as np

from eggnog.runtime.files import write_atomic
from eggnog.training.gossip.checkpoints import island_ranks, rank_dir
from eggnog.training.gossip.messages import CLOCK_SKEW_S, MAX_ISLANDS
from eggnog.training.gossip.peers import read_small
from eggnog.training.gossip.population import FIELDS, percentiles

STATUS, LOCK, LAST = "status.json", "population.lock", "population.json"


class FilePopulation:
    def __init__(self, run_dir, number, every, stale_s, warn=None):
        """warn(**record): called once per version of a status file that is ignored as bad."""
        self.run_dir, self.number, self.every, self.stale_s = Path(run_dir), number, every, stale_s
        self.table = self.live = None
        self.warn, self.warned = warn, set()

    def post(self, record):
        """Write this island's record and read every island's: (table, live) with one row per island
        number up to the highest rank-NN folder (NaN for islands with no fresh record)."""
        values = [None if not math.isfinite(v) else float(v) for v in record]
        status = {"island": self.number, "time": time.time(), "record": values}
        write_atomic(rank_dir(self.run_dir, self.number) / STATUS, json.dumps(status).encode())
        return self.read()

    def read(self):
        now, rows = time.time(), {}
        numbers = [n for n in island_ranks(self.run_dir) if n < MAX_ISLANDS]
        for number in numbers:
            path = rank_dir(self.run_dir, number) / STATUS
            try:
                text = read_small(path)
            except OSError:
                continue  # not written yet
            status, reason = status_record(number, text, now)
            if reason is not None:
                if text and (number, text) not in self.warned and self.warn is not None:
                    self.warned.add((number, text))
                    self.warn(file=str(path), reason=reason)
                continue  # being replaced, or bad: ignored
            if now - status["time"] <= self.stale_s:
                rows[number] = [math.nan if v is None else v for v in status["record"]]
        size = max([*numbers, self.number]) + 1
        table = np.full((size, len(FIELDS)), np.nan)
        for number, values in rows.items():
            table[number] = values
        self.table, self.live = table, sorted(rows)
        return table, self.live

    def percentile(self, number):
        if self.table is None or number >= len(self.table):
            return 0.5
        return float(percentiles(self.table[:, FIELDS.index("fitness")])[number])

    def furthest(self):
        """(island, step) of the furthest island heard from, other than this one (None: none)."""
        if self.table is None:
            return None
        steps = [(self.table[n, FIELDS.index("step")], n) for n in self.live if n != self.number]
        return None if not steps else (max(steps)[1], int(max(steps)[0]))

    def summarize_if_due(self, write, final=False):
        """Call write(point) for the summary point now due (the furthest step heard, in whole
        --population-every) if this island is the first to reach it, under the folder's lock (so
        summaries and checkpoint tidying never overlap); returns the point, or None. final: this island
        is done, and its last checkpoint is counted even when the point was summarised (a late island)."""
        steps = self.table[self.live, FIELDS.index("step")]
        point = int(np.nanmax(steps)) // self.every * self.every if len(steps) else 0
        with open(self.run_dir / LOCK, "a") as lock:
            try:
                fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                if not final:
                    return None  # another island is writing one
                fcntl.flock(lock, fcntl.LOCK_EX)
            last = self.run_dir / LAST
            try:
                done = json.loads(read_small(last))["point"]
            except (OSError, ValueError, RecursionError, KeyError, TypeError):
                done = -1
            if isinstance(done, bool) or not isinstance(done, int):
                done = -1  # damaged: summarise again
            if point <= done and not final:
                return None
            write(point)
            write_atomic(last, json.dumps({"point": point, "island": self.number}).encode())
            return point


def status_record(number, text, now):
    """(status, None) of the text of island `number`'s status.json, or (None, why it is refused)."""
    try:
        status = json.loads(text)
    except (ValueError, RecursionError):
        return None, "not JSON (being written, or damaged)"
    if not isinstance(status, dict) or set(status) != {"island", "time", "record"}:
        return None, "not an object of island, time and record"
    if isinstance(status["island"], bool) or status["island"] != number:
        return None, f"island {str(status['island'])[:20]} in the status file of island {number}"
    stamp = status["time"]
    if not is_number(stamp) or stamp > now + CLOCK_SKEW_S:
        return None, f"the time {str(stamp)[:30]} is not a number up to {CLOCK_SKEW_S:g} s ahead of this clock"
    record = status["record"]
    if not isinstance(record, list) or len(record) != len(FIELDS):
        return None, f"the record is not a list of {len(FIELDS)} values"
    if not all(v is None or is_number(v) for v in record):
        return None, "the record holds values that are neither finite numbers nor null"
    return status, None


def is_number(value):
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
