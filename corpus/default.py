"""The embedded default corpus: this interpreter's standard-library sources, built on first use.

Real text every machine with Python has, so the training scripts run with no --data and no
download. Files are the stdlib's *.py (not site-packages, not test suites) in sorted order, joined
by byte 0, cached as a .bin in the user cache directory (EGGNOG_CACHE_DIR overrides; without
platformdirs, $XDG_CACHE_HOME/eggnog or ~/.cache/eggnog) and checked
against its recorded SHA-256 whenever it is opened.
"""

import hashlib
import os
import sys
import sysconfig
from pathlib import Path

from eggnog.corpus.prepare import prepare
from eggnog.corpus.reader import open_corpus
from eggnog.runtime.errors import BadInput
from eggnog.runtime.optional import importable, say_once

VAL_FRACTION = 0.02
SKIPPED_DIRS = {"site-packages", "dist-packages", "test", "tests", "idle_test", "__pycache__"}


def stdlib_root():
    return Path(sysconfig.get_paths()["stdlib"])


def stdlib_files(root=None):
    root = Path(root or stdlib_root())
    found = []
    for directory, dirs, files in os.walk(root):
        dirs[:] = sorted(d for d in dirs if d not in SKIPPED_DIRS)
        found.extend(Path(directory) / f for f in sorted(files) if f.endswith(".py"))
    return sorted(found, key=lambda p: p.relative_to(root).as_posix())


def cache_dir():
    if os.environ.get("EGGNOG_CACHE_DIR"):
        return Path(os.environ["EGGNOG_CACHE_DIR"])
    platformdirs = importable("platformdirs")
    if platformdirs is not None:
        return Path(platformdirs.user_cache_dir("eggnog"))
    # what platformdirs answers on Linux
    path = Path(os.environ.get("XDG_CACHE_HOME", "").strip() or Path.home() / ".cache") / "eggnog"
    say_once("platformdirs", f"note: platformdirs is not installed: the default corpus is cached in {path} "
             "(EGGNOG_CACHE_DIR sets another folder)")
    return path


STATS_VERSION = "gzip-xz"  # the statistics its metadata holds: a new kind rebuilds the cached corpus


def default_corpus_path(root=None, directory=None):
    """Cache path; its name fingerprints the Python version, the file list with sizes and the
    statistics kept."""
    root = Path(root or stdlib_root())
    files = stdlib_files(root)
    if not files:
        raise BadInput(f"no Python source files under {str(root)!r} to build the default corpus from")
    digest = hashlib.sha256(STATS_VERSION.encode())
    for f in files:
        digest.update(f"{f.relative_to(root).as_posix()}\0{f.stat().st_size}\n".encode())
    version = ".".join(map(str, sys.version_info[:3]))
    return Path(directory or cache_dir()) / f"stdlib-py{version}-{digest.hexdigest()[:12]}.bin", files


def default_corpus(root=None, directory=None):
    """Open the default corpus, building (or rebuilding a corrupt copy of) it first if needed."""
    path, files = default_corpus_path(root, directory)
    if path.exists():
        try:
            corpus = open_corpus(path)
            if corpus.verify():
                return corpus
        except BadInput:
            pass  # damaged cache: rebuild below
    path.parent.mkdir(parents=True, exist_ok=True)
    prepare([str(f) for f in files], path, val_fraction=VAL_FRACTION, force=True)
    return open_corpus(path)
