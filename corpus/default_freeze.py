"""How corpus/data/ was made: the standard-library sources of one Python (3.11.7 for the file shipped)
prepared as a corpus (*.py in sorted order, site-packages and test suites left out, joined by byte 0,
2% of the documents held out), its .bin compressed with xz and its metadata kept with the sources'
paths relative to the library. Run it on that Python to make the file again:

    python -m eggnog.corpus.default_freeze corpus/data
"""

import json
import lzma
import os
import sys
import sysconfig
import tempfile
from pathlib import Path

from eggnog.corpus.prepare import prepare
from eggnog.runtime.files import write_atomic

VAL_FRACTION = 0.02
SKIPPED_DIRS = {"site-packages", "dist-packages", "test", "tests", "idle_test", "__pycache__"}


def stdlib_files(root):
    root = Path(root)
    found = []
    for directory, dirs, files in os.walk(root):
        dirs[:] = sorted(d for d in dirs if d not in SKIPPED_DIRS)
        found.extend(Path(directory) / f for f in sorted(files) if f.endswith(".py"))
    return sorted(found, key=lambda p: p.relative_to(root).as_posix())


def freeze(root, out_dir, name):
    """Write out_dir/name.bin.xz and out_dir/name.json; returns the .bin's SHA-256."""
    import hashlib

    root, out_dir = Path(root), Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / f"{name}.bin"
        meta = prepare([str(f) for f in stdlib_files(root)], path, val_fraction=VAL_FRACTION)
        data = path.read_bytes()
    meta["sources"] = [Path(s).relative_to(root).as_posix() for s in meta["sources"]]
    write_atomic(out_dir / f"{name}.bin.xz", lzma.compress(data, preset=9 | lzma.PRESET_EXTREME))
    write_atomic(out_dir / f"{name}.json", (json.dumps(meta, indent=1) + "\n").encode())
    return hashlib.sha256(data).hexdigest()


if __name__ == "__main__":
    version = ".".join(map(str, sys.version_info[:3]))
    print(freeze(sysconfig.get_paths()["stdlib"], sys.argv[1], f"stdlib-py{version}"))
