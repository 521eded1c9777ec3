"""The population view of a gossip run over TCP, kept on the shared run folder, with no rank 0
(gruboros's filesystem coordinator): every --population-every steps each island replaces its
rank-NN/status.json (its record, training/gossip/population.py's FIELDS) and reads everyone's.
Records older than `stale_s` count as islands not heard from (no fitness: ranked last). Whichever
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
from eggnog.training.gossip.population import FIELDS, percentiles

STATUS, LOCK, LAST = "status.json", "population.lock", "population.json"


class FilePopulation:
    def __init__(self, run_dir, number, every, stale_s):
        self.run_dir, self.number, self.every, self.stale_s = Path(run_dir), number, every, stale_s
        self.table = self.live = None

    def post(self, record):
        """Write this island's record and read every island's: (table, live) with one row per island
        number up to the highest rank-NN folder (NaN for islands with no fresh record)."""
        values = [None if not math.isfinite(v) else float(v) for v in record]
        status = {"island": self.number, "time": time.time(), "record": values}
        write_atomic(rank_dir(self.run_dir, self.number) / STATUS, json.dumps(status).encode())
        return self.read()

    def read(self):
        now, rows, numbers = time.time(), {}, island_ranks(self.run_dir)
        for number in numbers:
            try:
                status = json.loads((rank_dir(self.run_dir, number) / STATUS).read_text())
            except (OSError, ValueError):
                continue  # not written yet, or being replaced
            if now - float(status.get("time", 0)) <= self.stale_s:
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

    def summarize_if_due(self, write):
        """Call write(point) for the summary point now due (the furthest step heard, in whole
        --population-every) if this island is the first to reach it, under the folder's lock (so
        summaries and checkpoint tidying never overlap); returns the point, or None."""
        steps = self.table[self.live, FIELDS.index("step")]
        point = int(np.nanmax(steps)) // self.every * self.every if len(steps) else 0
        with open(self.run_dir / LOCK, "a") as lock:
            try:
                fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                return None  # another island is writing one
            last = self.run_dir / LAST
            try:
                done = json.loads(last.read_text())["point"]
            except (OSError, ValueError, KeyError):
                done = -1
            if point <= done:
                return None
            write(point)
            write_atomic(last, json.dumps({"point": point, "island": self.number}).encode())
            return point
