"""The checkout copy a mutation run edits: never the user's working tree. `git archive` of a commit (the
default, HEAD), or the working tree's tracked and untracked-but-not-ignored files as they are now."""

import os
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path


def _git(repo, *args):
    return subprocess.run(["git", *args], cwd=repo, capture_output=True, check=True).stdout


def make_copy(repo, dest, working_tree=False, rev="HEAD"):
    """Fill `dest` (new, empty) with the checkout; returns the commit it holds ("<sha>-dirty" for a
    working tree with changes)."""
    dest.mkdir(parents=True)
    sha = _git(repo, "rev-parse", "--short=12", rev).decode().strip()
    if not working_tree:
        archive = dest.parent / (dest.name + ".tar")
        archive.write_bytes(_git(repo, "archive", "--format=tar", rev))
        with tarfile.open(archive) as tar:
            if hasattr(tarfile, "data_filter"):  # Python 3.10.12+, 3.11.4+
                tar.extractall(dest, filter="data")
            else:
                tar.extractall(dest)  # our own archive of our own commit
        archive.unlink()
        return sha
    names = _git(repo, "ls-files", "-z", "--cached", "--others", "--exclude-standard").split(b"\0")
    for name in filter(None, names):
        source = Path(repo) / os.fsdecode(name)
        if source.is_file():  # a deleted tracked file is still listed
            target = dest / os.fsdecode(name)
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, target)
    dirty = _git(repo, "status", "--porcelain", "--untracked-files=no").strip()
    return sha + ("-dirty" if dirty else "")


def check_imports_from(copy):
    """Refuse to run unless `python -m pytest` in the copy imports eggnog's parts from the copy (an editable
    install points elsewhere; the copy's folder comes first on sys.path there)."""
    probe = ("import eggnog.kernels, eggnog.evolution, eggnog.runtime; "
             "print(eggnog.kernels.__file__); print(eggnog.evolution.__file__); print(eggnog.runtime.__file__)")
    out = subprocess.run([sys.executable, "-c", probe], cwd=copy, capture_output=True, text=True,
                         env={**os.environ, "PYTHONPATH": str(copy)})
    files = out.stdout.split()
    if out.returncode or not files or not all(Path(f).resolve().is_relative_to(Path(copy).resolve()) for f in files):
        raise SystemExit(f"the copy's eggnog is not the one imported there ({out.stdout.strip() or out.stderr[-400:]})")
