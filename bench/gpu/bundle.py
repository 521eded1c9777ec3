"""One archive of a folder's files: how a GPU run hands back many result files where only a few come
back from the machine (bench/gpu/run.py's first-contact plan)."""

import tarfile
from pathlib import Path


def bundle(folder, target):
    """Write every file of `folder` (recursively, paths relative to it, in sorted order) into the gzip'd tar
    `target`, replaced whole so a reader never sees half an archive; returns the names archived."""
    folder, target = Path(folder), Path(target)
    names = sorted(str(p.relative_to(folder)) for p in folder.rglob("*") if p.is_file())
    partial = target.with_name(target.name + ".partial")
    with tarfile.open(partial, "w:gz") as archive:
        for name in names:
            archive.add(folder / name, arcname=name, recursive=False)
    partial.replace(target)
    return names
