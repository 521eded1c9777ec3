"""The default corpus's checks on a small stand-in for the shipped file (fast; test_default_corpus.py runs
the real one): where the cache is, when the unpacked copy is trusted, reused or unpacked again, and each
way the shipped file or the cache can fail, in one sentence."""

import hashlib
import json
import lzma
import os
from pathlib import Path

import pytest

from eggnog.corpus import default
from eggnog.runtime.errors import BadInput

BODY = bytes(range(256)) * 5000  # 1.28 MB: more than one read block of file_sha256
META = {"documents": {"train": 1, "val": 1}}


@pytest.fixture
def shipped(tmp_path, monkeypatch):
    """A stand-in corpus shipped in tmp_path/data, its hash pinned; opening gives the path opened."""
    data = tmp_path / "data"
    data.mkdir()
    (data / f"{default.NAME}.bin.xz").write_bytes(lzma.compress(BODY))
    (data / f"{default.NAME}.json").write_text(json.dumps(META, indent=1) + "\n")  # as default_freeze writes it
    monkeypatch.setattr(default, "DATA", data)
    monkeypatch.setattr(default, "SHA256", hashlib.sha256(BODY).hexdigest())
    monkeypatch.setattr(default, "open_corpus", lambda path: path)
    return data


def test_the_unpacked_name_carries_twelve_hex_digits_of_the_pinned_hash(tmp_path):
    assert default.default_corpus_path(tmp_path) == tmp_path / "stdlib-py3.11.7-426e4b85c91f.bin"


def test_file_sha256_hashes_every_block(tmp_path):
    path = tmp_path / "f"
    path.write_bytes(BODY)
    assert default.file_sha256(path) == hashlib.sha256(BODY).hexdigest()


def test_unpacked_on_first_use_reused_then_unpacked_again_when_damaged_or_incomplete(shipped, tmp_path):
    cache = tmp_path / "user" / "cache"  # its parent made too
    path = default.default_corpus(cache)
    assert path.read_bytes() == BODY
    assert path.with_suffix(".bin.json").read_bytes() == (shipped / f"{default.NAME}.json").read_bytes()
    os.utime(path, ns=(1, 1))
    assert default.default_corpus(cache) == path and path.stat().st_mtime_ns == 1  # reused
    path.write_bytes(BODY[:-1] + b"x")  # same size, other bytes
    default.default_corpus(cache)
    assert path.read_bytes() == BODY
    os.utime(path, ns=(1, 1))
    path.with_suffix(".bin.json").unlink()
    default.default_corpus(cache)
    assert path.stat().st_mtime_ns != 1 and path.with_suffix(".bin.json").is_file()
    path.unlink()
    assert default.default_corpus(cache).read_bytes() == BODY


def test_a_shipped_file_that_is_not_the_pinned_bytes_is_refused(shipped, tmp_path):
    (shipped / f"{default.NAME}.bin.xz").write_bytes(lzma.compress(BODY[:-1]))
    with pytest.raises(BadInput, match="is damaged \\(its SHA-256 is not the pinned one\\): reinstall eggnog"):
        default.default_corpus(tmp_path / "cache")
    assert not (tmp_path / "cache").exists()


@pytest.mark.parametrize("name, content", [(".bin.xz", b"not xz"), (".json", b"{not json")])
def test_an_unreadable_shipped_file_is_refused(shipped, tmp_path, name, content):
    (shipped / f"{default.NAME}{name}").write_bytes(content)
    with pytest.raises(BadInput, match="cannot be read .*reinstall eggnog, or pass --data"):
        default.default_corpus(tmp_path / "cache")


def test_a_missing_shipped_file_is_refused(shipped, tmp_path):
    (shipped / f"{default.NAME}.json").unlink()
    with pytest.raises(BadInput, match="cannot be read"):
        default.default_corpus(tmp_path / "cache")


def test_an_unwritable_cache_is_one_sentence(shipped, tmp_path):
    (tmp_path / "file").write_text("")
    with pytest.raises(BadInput, match="cannot unpack the default corpus into .*EGGNOG_CACHE_DIR"):
        default.default_corpus(tmp_path / "file" / "cache")


def test_the_cache_folder_from_the_environment_platformdirs_or_xdg(monkeypatch, tmp_path):
    monkeypatch.setenv("EGGNOG_CACHE_DIR", str(tmp_path / "here"))
    assert default.cache_dir() == tmp_path / "here"
    monkeypatch.delenv("EGGNOG_CACHE_DIR")
    import platformdirs

    assert default.cache_dir() == Path(platformdirs.user_cache_dir("eggnog"))
    monkeypatch.setattr(default, "importable", lambda name: None)
    monkeypatch.setattr(default, "say_once", lambda key, text: None)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert default.cache_dir() == tmp_path / "xdg" / "eggnog"
    monkeypatch.setenv("XDG_CACHE_HOME", "  ")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert default.cache_dir() == tmp_path / "home" / ".cache" / "eggnog"
