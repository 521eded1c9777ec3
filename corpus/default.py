"""The embedded default corpus: Python 3.11.7's standard-library sources (*.py in sorted order,
site-packages and test suites left out, joined by byte 0, 2% of the documents held out for
validation; 12.1 MB), shipped in corpus/data/ as xz (2.0 MB) under the Python Software Foundation
License (corpus/data/LICENSE-PSF.txt), so every Python and OS trains on the same bytes, with no
network. Unpacked on first use into the user cache directory (EGGNOG_CACHE_DIR overrides; without
platformdirs, $XDG_CACHE_HOME/eggnog or ~/.cache/eggnog) and checked against its pinned SHA-256
whenever it is opened; corpus/default_freeze.py made it.
"""

import hashlib
import json
import lzma
import os
from pathlib import Path

from eggnog.corpus.reader import ByteCorpus, open_corpus
from eggnog.runtime.errors import BadInput
from eggnog.runtime.files import write_atomic
from eggnog.runtime.optional import importable, say_once

DATA = Path(__file__).resolve().parent / "data"
NAME = "stdlib-py3.11.7"
SHA256 = "426e4b85c91f6c55b26a60b829ac5eaa206215dbe15965ed9a15b1dcb8902c39"  # of the unpacked .bin


def cache_dir() -> Path:
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


def default_corpus_path(directory: str | Path | None = None) -> Path:
    """Where the unpacked corpus lives (its name carries the pinned hash)."""
    return Path(directory or cache_dir()) / f"{NAME}-{SHA256[:12]}.bin"


def file_sha256(path: str | Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def default_corpus(directory: str | Path | None = None) -> ByteCorpus:
    """Open the default corpus, unpacking it (again, where a copy is damaged) first if needed."""
    path = default_corpus_path(directory)
    if not (path.is_file() and path.with_suffix(".bin.json").is_file() and file_sha256(path) == SHA256):
        unpack(path)
    return open_corpus(path)


def unpack(path: Path) -> None:
    try:
        data = lzma.decompress((DATA / f"{NAME}.bin.xz").read_bytes())
        meta = json.loads((DATA / f"{NAME}.json").read_text())
    except (OSError, lzma.LZMAError, ValueError) as e:
        raise BadInput(f"the default corpus shipped in {str(DATA)!r} cannot be read ({e}): reinstall eggnog, "
                       "or pass --data") from None
    if hashlib.sha256(data).hexdigest() != SHA256:
        raise BadInput(f"the default corpus shipped in {str(DATA)!r} is damaged (its SHA-256 is not the pinned "
                       "one): reinstall eggnog, or pass --data")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        write_atomic(path.with_suffix(".bin.json"), (json.dumps(meta, indent=1) + "\n").encode())
        write_atomic(path, data)
    except OSError as e:
        raise BadInput(f"cannot unpack the default corpus into {str(path.parent)!r} ({e.strerror}); set "
                       "EGGNOG_CACHE_DIR to a writable folder") from None
