"""The embedded default corpus: the same bytes on every Python (the file shipped, its hash pinned),
unpacked once, unpacked again when damaged, refused in one sentence when the shipped file is broken
or the cache cannot be written. CI runs this file on Python 3.11 and 3.12."""

import hashlib
import json
import lzma
import os
from pathlib import Path

import pytest

from eggnog.corpus import default
from eggnog.corpus.default_freeze import stdlib_files
from eggnog.runtime.errors import BadInput

PINNED = "426e4b85c91f6c55b26a60b829ac5eaa206215dbe15965ed9a15b1dcb8902c39"


def test_the_corpus_is_the_pinned_bytes_on_this_python(tmp_path):
    assert default.SHA256 == PINNED
    corpus = default.default_corpus(tmp_path)
    assert default.file_sha256(corpus.path) == PINNED and corpus.verify()
    assert corpus.meta["documents"] == {"train": 713, "val": 21}
    val = corpus.meta["splits"]["val"]
    assert (val["bytes"], round(val["unigram_bpb"], 3), round(val["bigram_bpb"], 3)) == (242883, 4.531, 3.434)
    assert corpus.meta["sources"][0] == "__future__.py"  # paths relative to the library: nothing of this machine
    assert (default.DATA / "LICENSE-PSF.txt").read_text().startswith("A. HISTORY OF THE SOFTWARE")


def test_unpacked_once_then_reused_and_again_when_damaged(tmp_path):
    corpus = default.default_corpus(tmp_path)
    mtime = os.stat(corpus.path).st_mtime_ns
    assert default.default_corpus(tmp_path).path == corpus.path and os.stat(corpus.path).st_mtime_ns == mtime
    with open(corpus.path, "r+b") as f:
        f.write(b"#")
    again = default.default_corpus(tmp_path)
    assert default.file_sha256(again.path) == PINNED
    Path(corpus.path).with_suffix(".bin.json").unlink()
    assert default.default_corpus(tmp_path).verify()


def test_a_broken_shipped_file_and_an_unwritable_cache_are_one_sentence(tmp_path, monkeypatch):
    broken = tmp_path / "data"
    broken.mkdir()
    (broken / f"{default.NAME}.bin.xz").write_bytes(b"not xz")
    (broken / f"{default.NAME}.json").write_text("{}")
    monkeypatch.setattr(default, "DATA", broken)
    with pytest.raises(BadInput, match="cannot be read .* reinstall eggnog, or pass --data"):
        default.default_corpus(tmp_path / "cache")
    monkeypatch.undo()
    # no folder can be made under /proc/1, whoever runs the tests (root ignores a chmod)
    with pytest.raises(BadInput, match="cannot unpack the default corpus into .*EGGNOG_CACHE_DIR"):
        default.default_corpus(Path("/proc/1/cache"))


def test_a_shipped_file_with_other_bytes_is_refused_before_anything_is_cached(tmp_path, monkeypatch):
    """Valid xz and metadata, but not the pinned bytes: refused in one sentence, the cache left empty."""
    other = tmp_path / "data"
    other.mkdir()
    (other / f"{default.NAME}.bin.xz").write_bytes(lzma.compress(b"print('not the standard library')\n" * 100))
    (other / f"{default.NAME}.json").write_text(json.dumps({"documents": {"train": 1, "val": 1}}))
    monkeypatch.setattr(default, "DATA", other)
    cache = tmp_path / "cache"
    with pytest.raises(BadInput, match=r"^the default corpus shipped in .* is damaged \(its SHA-256 is not the "
                                       r"pinned one\): reinstall eggnog, or pass --data$"):
        default.default_corpus(cache)
    assert not cache.exists() or not any(cache.iterdir())


def test_the_freezer_keeps_sources_only_in_sorted_order(tmp_path):
    root = tmp_path / "lib"
    for rel in ("abc.py", "json/__init__.py", "json/decoder.py", "site-packages/numpy/core.py", "test/test_abc.py",
                "os.pyc", "z.py"):
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(f"# {rel}\n" * 50)
    assert [p.relative_to(root).as_posix() for p in stdlib_files(root)] == [
        "abc.py", "json/__init__.py", "json/decoder.py", "z.py"]
    from eggnog.corpus.default_freeze import freeze

    digest = freeze(root, tmp_path / "out", "lib")
    meta = json.loads((tmp_path / "out" / "lib.json").read_text())
    assert meta["sources"] == ["abc.py", "json/__init__.py", "json/decoder.py", "z.py"]
    assert hashlib.sha256(lzma.decompress((tmp_path / "out" / "lib.bin.xz").read_bytes())).hexdigest() == digest


def test_cache_dir_from_environment(monkeypatch, tmp_path):
    monkeypatch.setenv("EGGNOG_CACHE_DIR", str(tmp_path / "here"))
    assert default.cache_dir() == tmp_path / "here"
    assert default.default_corpus_path() == tmp_path / "here" / f"{default.NAME}-{PINNED[:12]}.bin"
