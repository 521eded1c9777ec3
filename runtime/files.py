"""Atomic file writes: a temporary name in the same directory, fsync, then rename."""

import os
import uuid
from pathlib import Path


def temp_name(path):
    path = Path(path)
    return path.with_name(f".{path.name}.tmp-{os.getpid()}-{uuid.uuid4().hex[:8]}")


def write_atomic(path, data: bytes):
    tmp = temp_name(path)
    try:
        with open(tmp, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    finally:
        if tmp.exists():
            tmp.unlink()


def link_atomic(link, target):
    """Point the symlink `link` at `target` (relative to the link's directory), replacing it."""
    link = Path(link)
    tmp = temp_name(link)
    os.symlink(os.path.relpath(target, link.parent), tmp)
    os.replace(tmp, link)
