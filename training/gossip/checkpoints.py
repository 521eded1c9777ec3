"""Checkpoints of a gossip run (gruboros's CheckpointManager, on rank 0 at population summaries).

Each island saves under rank-NN/checkpoints/ as step-SSSSSSSS-loss-L.LLLL.npz (L: its fitness-EMA
training loss, bits/byte), with its own `latest` link there, which it resumes from. The run's
checkpoints/ holds the population's links, relative and replaced atomically:
`latest` (the newest file), `best` (the lowest loss), `elite_01`... (the --elites lowest losses,
ties to the later step) and `archive_001`... (kept for good). `tidy` keeps elites, the --keep-last
newest of every island (so each island's `latest` survives) and archived files; a file due for
removal is archived instead with probability --archive-rate; the rest is removed, and so are
temporaries older than ten minutes (left by a process killed while writing).
"""

import math
import os
import re
import time
from dataclasses import dataclass
from pathlib import Path

from eggnog.runtime.files import link_atomic

NAME_RE = re.compile(r"^step-(\d{8,})-loss-(\d+\.\d+|inf)\.npz$")
RANK_DIR_RE = re.compile(r"^rank-(\d{2,})$")
TEMP_RE = re.compile(r"^\..+\.tmp-")
ELITE_RE = re.compile(r"^elite_(\d{2,})$")
ARCHIVE_RE = re.compile(r"^archive_(\d{3,})$")
STALE_TEMP_SECONDS = 600


def rank_dir(run_dir, rank):
    return Path(run_dir) / f"rank-{rank:02d}"


def checkpoint_name(step, loss):
    return f"step-{int(step):08d}-loss-{'inf' if math.isinf(loss) else f'{loss:.4f}'}.npz"


@dataclass(frozen=True)
class Entry:
    path: Path
    rank: int
    step: int
    loss: float
    mtime: float


def island_ranks(run_dir):
    """Ranks with a rank-NN directory in the run, sorted."""
    run_dir = Path(run_dir)
    found = [RANK_DIR_RE.match(p.name) for p in run_dir.iterdir()] if run_dir.is_dir() else []
    return sorted(int(m.group(1)) for m in found if m)


def scan(run_dir):
    """Every island checkpoint of the run (files vanishing meanwhile are skipped)."""
    entries, run_dir = [], Path(run_dir).resolve()
    for rank in island_ranks(run_dir):
        directory = rank_dir(run_dir, rank) / "checkpoints"
        for name in sorted(os.listdir(directory)) if directory.is_dir() else []:
            match = NAME_RE.match(name)
            if not match:
                continue
            try:
                mtime = (directory / name).stat().st_mtime
            except FileNotFoundError:
                continue
            entries.append(Entry(directory / name, rank, int(match.group(1)), float(match.group(2)), mtime))
    return entries


def by_quality(entries):
    """Lowest loss first; a tie goes to the later step."""
    return sorted(entries, key=lambda e: (e.loss, -e.step, e.rank))


def links(directory, pattern):
    """{number: link path} of the links in `directory` whose names match `pattern`."""
    found = {}
    for p in Path(directory).iterdir() if Path(directory).is_dir() else []:
        match = pattern.match(p.name)
        if match and p.is_symlink():
            found[int(match.group(1))] = p
    return found


def elite_entries(run_dir):
    """The entries the elite links point at now, best first (targets removed meanwhile are skipped)."""
    entries = []
    for _, link in sorted(links(Path(run_dir) / "checkpoints", ELITE_RE).items()):
        target = Path(os.path.realpath(link))
        match = NAME_RE.match(target.name)
        rank = RANK_DIR_RE.match(target.parent.parent.name)
        if match and rank and target.is_file():
            entries.append(Entry(target, int(rank.group(1)), int(match.group(1)), float(match.group(2)), 0.0))
    return by_quality(entries)


def tidy(run_dir, elites, keep_last, archive_rate, rng, now=None):
    """Update the links and remove what is not kept; returns counts and the elite files."""
    run_dir, now = Path(run_dir).resolve(), time.time() if now is None else now
    top = run_dir / "checkpoints"
    top.mkdir(parents=True, exist_ok=True)
    entries = scan(run_dir)
    elite = by_quality(entries)[:elites]
    keep = {e.path for e in elite}
    for rank in {e.rank for e in entries}:
        newest = sorted((e for e in entries if e.rank == rank), key=lambda e: (-e.step, -e.mtime))
        keep |= {e.path for e in newest[:keep_last]}
    archive_links = links(top, ARCHIVE_RE)
    keep |= {Path(os.path.realpath(p)) for p in archive_links.values()}
    next_archive = max(archive_links, default=0) + 1
    removed = archived = 0
    for entry in entries:
        if entry.path in keep:
            continue
        if rng.random() < archive_rate:
            link_atomic(top / f"archive_{next_archive:03d}", entry.path)
            next_archive, archived = next_archive + 1, archived + 1
            continue
        entry.path.unlink(missing_ok=True)
        removed += 1
    for i, entry in enumerate(elite, start=1):
        link_atomic(top / f"elite_{i:02d}", entry.path)
    for number, link in links(top, ELITE_RE).items():
        if number > len(elite):
            link.unlink(missing_ok=True)
    if entries:
        link_atomic(top / "best", elite[0].path)
        link_atomic(top / "latest", max(entries, key=lambda e: (e.mtime, e.step)).path)
    stale = remove_stale_temporaries([top] + [rank_dir(run_dir, r) / "checkpoints" for r in island_ranks(run_dir)],
                                     now)
    return {"kept": len(entries) - removed, "removed": removed, "archived": archived, "stale_removed": stale,
            "elites": len(elite), "best": str(elite[0].path.relative_to(run_dir)) if elite else None}


def remove_stale_temporaries(directories, now):
    removed = 0
    for directory in directories:
        for p in directory.iterdir() if directory.is_dir() else []:
            try:
                if TEMP_RE.match(p.name) and now - p.lstat().st_mtime > STALE_TEMP_SECONDS:
                    p.unlink()
                    removed += 1
            except FileNotFoundError:
                pass
    return removed
