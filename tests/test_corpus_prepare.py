"""prepare: exact round trips in all three formats, the validation split, and the metadata."""

import hashlib
import lzma
import os
from collections import Counter

import numpy as np
import pytest

from eggnog.corpus.prepare import prepare
from eggnog.corpus.reader import open_corpus
from eggnog.runtime.errors import BadInput
from tests.corpus_helpers import make_docs

FORMATS = [".bin", ".h5", ".zarr"]


def entropy_spec(data):
    """Unigram and conditional bigram entropy from plain counting."""
    n = len(data)
    uni = -sum(c / n * np.log2(c / n) for c in Counter(data).values())
    pairs = Counter(zip(data[:-1], data[1:]))
    firsts = Counter(data[:-1])
    m = n - 1
    joint = -sum(c / m * np.log2(c / m) for c in pairs.values())
    first = -sum(c / m * np.log2(c / m) for c in firsts.values())
    return uni, joint - first


@pytest.mark.parametrize("suffix", FORMATS)
def test_round_trip_is_exact(tmp_path, suffix):
    docs = make_docs(tmp_path / "src")
    out = tmp_path / f"corpus{suffix}"
    meta = prepare([str(tmp_path / "src")], out, val_fraction=0.0)
    corpus = open_corpus(out)
    assert bytes(corpus.train[:]) == b"\0".join(docs.values())
    assert len(corpus.val) == 0
    assert corpus.memory_mapped and isinstance(corpus.train, np.memmap)
    assert meta["documents"] == {"train": len(docs), "val": 0}
    assert [os.path.relpath(s, tmp_path / "src") for s in meta["sources"]] == list(docs)
    assert corpus.meta == meta


@pytest.mark.parametrize("suffix", FORMATS)
def test_no_separator_concatenates(tmp_path, suffix):
    docs = make_docs(tmp_path / "src", count=3)
    out = tmp_path / f"c{suffix}"
    meta = prepare([str(tmp_path / "src")], out, val_fraction=0.0, separator=False)
    assert bytes(open_corpus(out).train[:]) == b"".join(docs.values())
    assert meta["separator"] is None


def test_metadata_records_sizes_hashes_and_entropies(tmp_path):
    make_docs(tmp_path / "src", count=8, binary=False)
    meta = prepare([str(tmp_path / "src")], tmp_path / "c.bin", val_fraction=0.3)
    corpus = open_corpus(tmp_path / "c.bin")
    for name in ("train", "val"):
        data = bytes(getattr(corpus, name)[:])
        split = meta["splits"][name]
        assert split["bytes"] == len(data) > 0
        assert split["sha256"] == hashlib.sha256(data).hexdigest()
        uni, bi = entropy_spec(data)
        assert split["unigram_bpb"] == pytest.approx(uni, abs=2e-6)
        assert split["bigram_bpb"] == pytest.approx(bi, abs=2e-6)
        # one-shot compression of the whole split: the streamed sizes are the same
        assert split["gzip_bpb"] == pytest.approx(8 * len(gzip_compress(data)) / len(data), abs=2e-6)
        assert split["xz_bpb"] == pytest.approx(8 * len(lzma.compress(data, preset=9)) / len(data), abs=2e-6)
    assert corpus.verify()


def gzip_compress(data):
    import zlib

    packer = zlib.compressobj(9, zlib.DEFLATED, 31)
    return packer.compress(data) + packer.flush()


def test_validation_split_is_by_document_and_deterministic(tmp_path):
    docs = make_docs(tmp_path / "src", count=12)
    metas = [prepare([str(tmp_path / "src")], tmp_path / f"c{i}.bin", val_fraction=0.25, seed=7) for i in range(2)]
    assert metas[0]["splits"] == metas[1]["splits"]
    corpus = open_corpus(tmp_path / "c0.bin")
    train_docs = bytes(corpus.train[:]).split(b"\0")
    val_docs = bytes(corpus.val[:]).split(b"\0")
    assert sorted(train_docs + val_docs) == sorted(docs.values())  # whole documents only
    assert len(val_docs) == metas[0]["documents"]["val"] >= 1
    total = sum(map(len, docs.values()))
    assert 0.25 * total <= sum(map(len, val_docs)) < 0.25 * total + max(map(len, docs.values()))
    # original order is kept inside each split
    order = list(docs.values())
    assert train_docs == [d for d in order if d in set(train_docs)]
    other = prepare([str(tmp_path / "src")], tmp_path / "other.bin", val_fraction=0.25, seed=8)
    assert other["splits"]["val"]["sha256"] != metas[0]["splits"]["val"]["sha256"]


def test_single_document_splits_its_tail(tmp_path):
    data = os.urandom(10_000)
    (tmp_path / "one.bin_src").write_bytes(data)
    prepare([str(tmp_path / "one.bin_src")], tmp_path / "c.h5", val_fraction=0.1)
    corpus = open_corpus(tmp_path / "c.h5")
    assert bytes(corpus.train[:]) == data[:9000] and bytes(corpus.val[:]) == data[9000:]


def test_globs_and_files_in_argument_order(tmp_path):
    docs = make_docs(tmp_path / "src", count=6)
    sources = [str(tmp_path / "src" / "sub" / "*.dat"), str(tmp_path / "src" / "doc0.txt")]
    prepare(sources, tmp_path / "c.zarr", val_fraction=0.0)
    expected = [docs[k] for k in sorted(k for k in docs if k.endswith(".dat"))] + [docs["doc0.txt"]]
    assert bytes(open_corpus(tmp_path / "c.zarr").train[:]) == b"\0".join(expected)


def test_output_inside_source_directory_is_not_read(tmp_path):
    docs = make_docs(tmp_path, count=2)
    prepare([str(tmp_path)], tmp_path / "c.bin", val_fraction=0.0)
    prepare([str(tmp_path)], tmp_path / "c.bin", val_fraction=0.0, force=True)
    assert bytes(open_corpus(tmp_path / "c.bin").train[:]).startswith(b"\0".join(docs.values()))


@pytest.mark.parametrize("suffix", FORMATS)
def test_force_replaces_and_leaves_no_temporaries(tmp_path, suffix):
    make_docs(tmp_path / "src", count=3)
    out = tmp_path / f"c{suffix}"
    prepare([str(tmp_path / "src")], out, val_fraction=0.0)
    with pytest.raises(BadInput, match="already exists"):
        prepare([str(tmp_path / "src")], out, val_fraction=0.0)
    (tmp_path / "src" / "zz.txt").write_bytes(b"more")  # sorts last
    prepare([str(tmp_path / "src")], out, val_fraction=0.0, force=True)
    assert bytes(open_corpus(out).train[:]).endswith(b"\0more")
    assert not [p for p in os.listdir(tmp_path) if ".tmp-" in p]


@pytest.mark.parametrize("make_source,message", [
    (lambda d: [str(d / "missing")], "does not exist"),
    (lambda d: [str((d / "empty").mkdir() or d / "empty")], "contains no files"),
    (lambda d: [str((d / "z").write_bytes(b"") and d / "z" or d / "z")], "contain no bytes"),
    (lambda d: [str(d / "*.nothing")], "no file matches"),
    (lambda d: [], "no sources"),
])
def test_bad_sources_write_nothing(tmp_path, make_source, message):
    sources = make_source(tmp_path)
    before = set(os.listdir(tmp_path))
    with pytest.raises(BadInput, match=message):
        prepare(sources, tmp_path / "out.bin")
    assert set(os.listdir(tmp_path)) == before


def test_bad_output_and_fraction(tmp_path):
    make_docs(tmp_path / "src", count=2)
    with pytest.raises(BadInput, match="unknown corpus suffix '.txt'"):
        prepare([str(tmp_path / "src")], tmp_path / "out.txt")
    with pytest.raises(BadInput, match="does not exist"):
        prepare([str(tmp_path / "src")], tmp_path / "nodir" / "out.bin")
    for fraction in (-0.1, 1.0, 2.0):
        with pytest.raises(BadInput, match="val-fraction"):
            prepare([str(tmp_path / "src")], tmp_path / "out.bin", val_fraction=fraction)
    assert sorted(os.listdir(tmp_path)) == ["src"]
