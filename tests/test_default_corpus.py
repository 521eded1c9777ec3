"""The embedded default corpus: stdlib sources only, built once, rebuilt when damaged."""

import os

import pytest

from eggnog.corpus import default
from eggnog.corpus.reader import open_corpus
from eggnog.runtime.errors import BadInput


@pytest.fixture
def fake_stdlib(tmp_path):
    root = tmp_path / "lib"
    for rel, text in {
        "abc.py": "import os\n",
        "json/__init__.py": "def dumps(x):\n    return str(x)\n",
        "json/decoder.py": "class Decoder:\n    pass\n",
        "site-packages/numpy/core.py": "not stdlib\n",
        "test/test_abc.py": "a test\n",
        "os.pyc": "binary",
        "z.py": "last = True\n",
    }.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    return root


def test_stdlib_files_are_sorted_sources_only(fake_stdlib):
    rels = [p.relative_to(fake_stdlib).as_posix() for p in default.stdlib_files(fake_stdlib)]
    assert rels == ["abc.py", "json/__init__.py", "json/decoder.py", "z.py"]


def test_built_once_then_reused(fake_stdlib, tmp_path):
    cache = tmp_path / "cache"
    corpus = default.default_corpus(fake_stdlib, cache)
    text = bytes(corpus.train[:]) + bytes(corpus.val[:])
    for piece in (b"import os\n", b"class Decoder:", b"last = True\n"):
        assert piece in text
    assert b"not stdlib" not in text and b"a test" not in text
    assert corpus.meta["splits"]["train"]["sha256"]
    path = corpus.path
    mtime = os.stat(path).st_mtime_ns
    again = default.default_corpus(fake_stdlib, cache)
    assert again.path == path and os.stat(path).st_mtime_ns == mtime


def test_damaged_cache_is_rebuilt(fake_stdlib, tmp_path):
    cache = tmp_path / "cache"
    corpus = default.default_corpus(fake_stdlib, cache)
    original = bytes(corpus.train[:])
    with open(corpus.path, "r+b") as f:
        f.write(b"#")
    assert not open_corpus(corpus.path).verify()
    rebuilt = default.default_corpus(fake_stdlib, cache)
    assert bytes(rebuilt.train[:]) == original and rebuilt.verify()


def test_name_follows_the_file_list(fake_stdlib, tmp_path):
    first, _ = default.default_corpus_path(fake_stdlib, tmp_path)
    (fake_stdlib / "new.py").write_text("x = 1\n")
    second, _ = default.default_corpus_path(fake_stdlib, tmp_path)
    assert first != second


def test_cache_dir_from_environment(monkeypatch, tmp_path):
    monkeypatch.setenv("EGGNOG_CACHE_DIR", str(tmp_path / "here"))
    assert default.cache_dir() == tmp_path / "here"


def test_empty_stdlib_is_bad_input(tmp_path):
    with pytest.raises(BadInput, match="no Python source files"):
        default.default_corpus_path(tmp_path, tmp_path)
