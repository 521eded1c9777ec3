"""Turn SRC arguments (files, directories, globs) into an ordered list of readable files."""

import glob
import os
from pathlib import Path

from eggnog.runtime.errors import BadInput

GLOB_CHARS = set("*?[")


def _files_under(directory):
    """Regular files below `directory`, sorted by their path relative to it."""
    found = [Path(root) / name for root, _, files in os.walk(directory) for name in files]
    return sorted((p for p in found if p.is_file()), key=lambda p: p.relative_to(directory).as_posix())


def collect_files(sources, exclude=()):
    """Files in argument order; a directory contributes its files sorted by path, recursively."""
    if not sources:
        raise BadInput("no sources given: name files, directories or glob patterns")
    excluded = {Path(p).resolve() for p in exclude}
    files, seen = [], set()
    for source in sources:
        source = str(source)
        if GLOB_CHARS & set(source):
            matches = sorted(Path(m) for m in glob.glob(source, recursive=True))
            if not matches:
                raise BadInput(f"no file matches the pattern {source!r}")
            candidates = []
            for match in matches:
                candidates.extend(_files_under(match) if match.is_dir() else [match])
        else:
            path = Path(source)
            if not path.exists():
                raise BadInput(f"source {source!r} does not exist")
            candidates = _files_under(path) if path.is_dir() else [path]
            if path.is_dir() and not candidates:
                raise BadInput(f"directory {source!r} contains no files")
        for path in candidates:
            resolved = path.resolve()
            if resolved in seen or resolved in excluded or not path.is_file():
                continue
            if not os.access(path, os.R_OK):
                raise BadInput(f"cannot read source file {str(path)!r}: permission denied")
            seen.add(resolved)
            files.append(path)
    if not files:
        raise BadInput("the sources name no regular files")
    return files
