"""Opening corpora: memory maps where the bytes are contiguous, block reads (with a warning)
for chunked or compressed stores made elsewhere, and one clear error for bad files."""

import json
import os
import subprocess
import sys
import tracemalloc
import warnings

import h5py
import numpy as np
import pytest

from eggnog.corpus.prepare import prepare
from eggnog.corpus.reader import BlockReader, SlowCorpusWarning, open_corpus
from eggnog.runtime.errors import BadInput

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@pytest.fixture
def big_source(tmp_path):
    data = np.random.default_rng(0).integers(0, 256, size=16 << 20, dtype=np.uint8)
    (tmp_path / "big.raw").write_bytes(data.tobytes())
    return tmp_path / "big.raw", data


@pytest.mark.parametrize("suffix", [".bin", ".h5", ".zarr"])
def test_opening_maps_instead_of_reading(tmp_path, big_source, suffix):
    src, data = big_source
    out = tmp_path / f"c{suffix}"
    prepare([str(src)], out, val_fraction=0.0)
    tracemalloc.start()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        corpus = open_corpus(out)
    window = np.array(corpus.train[7_000_000:7_004_096])
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert isinstance(corpus.train, np.memmap)
    assert np.array_equal(window, data[7_000_000:7_004_096])
    assert peak < 2 << 20, peak  # a full read would allocate 16 MiB


def test_chunked_compressed_hdf5_reads_by_block_with_warning(tmp_path):
    data = np.random.default_rng(1).integers(0, 256, size=100_000, dtype=np.uint8)
    with h5py.File(tmp_path / "c.h5", "w") as f:
        f.create_dataset("train", data=data, chunks=(4096,), compression="gzip")
        f.create_dataset("val", data=data[:1000])  # contiguous: still mapped
    with pytest.warns(SlowCorpusWarning, match="block by block"):
        corpus = open_corpus(tmp_path / "c.h5")
    assert isinstance(corpus.train, BlockReader) and isinstance(corpus.val, np.memmap)
    assert len(corpus.train) == data.size and not corpus.memory_mapped
    assert np.array_equal(corpus.train[5000:9000], data[5000:9000])
    assert np.array_equal(corpus.val[:], data[:1000])
    assert corpus.meta == {}


def test_chunked_compressed_zarr_reads_by_block_with_warning(tmp_path):
    import zarr

    data = np.random.default_rng(2).integers(0, 256, size=50_000, dtype=np.uint8)
    group = zarr.open_group(str(tmp_path / "c.zarr"), mode="w")
    group.create_array("train", shape=data.shape, chunks=(8192,), dtype="uint8")[:] = data  # zstd default
    with pytest.warns(SlowCorpusWarning):
        corpus = open_corpus(tmp_path / "c.zarr")
    assert np.array_equal(corpus.train[1234:40000], data[1234:40000])
    assert len(corpus.val) == 0


def test_prepared_zarr_is_a_valid_zarr_store(tmp_path):
    import zarr

    (tmp_path / "a").write_bytes(b"hello")
    (tmp_path / "b").write_bytes(b"world!")
    prepare([str(tmp_path / "a"), str(tmp_path / "b")], tmp_path / "c.zarr", val_fraction=0.5)
    group = zarr.open_group(str(tmp_path / "c.zarr"), mode="r")
    corpus = open_corpus(tmp_path / "c.zarr")
    assert bytes(group["train"][:]) + bytes(group["val"][:]) in (b"helloworld!", b"world!hello")
    assert np.array_equal(group["train"][:], corpus.train)
    assert group.attrs["eggnog"]["splits"]["train"]["bytes"] == len(corpus.train)


def test_zarr_is_imported_only_for_zarr_paths(tmp_path):
    (tmp_path / "a").write_bytes(b"some bytes")
    code = (
        "import sys; from eggnog.corpus.prepare import prepare; from eggnog.corpus.reader import open_corpus\n"
        f"prepare([{str(tmp_path / 'a')!r}], {str(tmp_path / 'c.bin')!r}, val_fraction=0.0)\n"
        f"prepare([{str(tmp_path / 'a')!r}], {str(tmp_path / 'c.h5')!r}, val_fraction=0.0)\n"
        f"open_corpus({str(tmp_path / 'c.bin')!r}); open_corpus({str(tmp_path / 'c.h5')!r})\n"
        "print('zarr' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT,
                         env=dict(os.environ, PYTHONPATH=ROOT), timeout=120)
    assert out.stdout.strip() == "False", out.stderr


def test_non_uint8_dataset_is_bad_input(tmp_path):
    with h5py.File(tmp_path / "c.h5", "w") as f:
        f.create_dataset("train", data=np.arange(10, dtype=np.float32))
    with pytest.raises(BadInput, match="dtype float32; a byte corpus is uint8"):
        open_corpus(tmp_path / "c.h5")


def test_two_dimensional_dataset_is_bad_input(tmp_path):
    with h5py.File(tmp_path / "c.h5", "w") as f:
        f.create_dataset("train", data=np.zeros((3, 3), dtype=np.uint8))
    with pytest.raises(BadInput, match="1-D"):
        open_corpus(tmp_path / "c.h5")


def test_missing_train_dataset_names_what_is_there(tmp_path):
    with h5py.File(tmp_path / "c.h5", "w") as f:
        f.create_dataset("tokens", data=np.zeros(3, dtype=np.uint8))
    with pytest.raises(BadInput, match="no dataset 'train' \\(found: tokens\\)"):
        open_corpus(tmp_path / "c.h5")


def test_unreadable_files_are_bad_input(tmp_path):
    (tmp_path / "c.h5").write_bytes(b"not hdf5 at all")
    with pytest.raises(BadInput, match="cannot read .* as HDF5"):
        open_corpus(tmp_path / "c.h5")
    (tmp_path / "c.zarr").mkdir()
    (tmp_path / "c.zarr" / "zarr.json").write_text("{broken")
    with pytest.raises(BadInput, match="as Zarr"):
        open_corpus(tmp_path / "c.zarr")
    with pytest.raises(BadInput, match="does not exist"):
        open_corpus(tmp_path / "nothing.bin")
    with pytest.raises(BadInput, match="unknown corpus suffix"):
        open_corpus(tmp_path / "c.npy")


def test_bin_needs_matching_sidecar(tmp_path):
    (tmp_path / "a").write_bytes(b"abcdef")
    prepare([str(tmp_path / "a")], tmp_path / "c.bin", val_fraction=0.0)
    with open(tmp_path / "c.bin", "ab") as f:
        f.write(b"x")
    with pytest.raises(BadInput, match="holds 7 bytes but its metadata says 6"):
        open_corpus(tmp_path / "c.bin")
    (tmp_path / "c.bin.json").write_text(json.dumps({"splits": {}}))
    with pytest.raises(BadInput, match="not valid corpus metadata"):
        open_corpus(tmp_path / "c.bin")
    os.remove(tmp_path / "c.bin.json")
    with pytest.raises(BadInput, match="no metadata file"):
        open_corpus(tmp_path / "c.bin")


def test_verify_detects_changed_bytes(tmp_path):
    (tmp_path / "a").write_bytes(b"abcdef" * 100)
    prepare([str(tmp_path / "a")], tmp_path / "c.bin", val_fraction=0.0)
    assert open_corpus(tmp_path / "c.bin").verify()
    with open(tmp_path / "c.bin", "r+b") as f:
        f.seek(10)
        f.write(b"Z")
    assert not open_corpus(tmp_path / "c.bin").verify()
