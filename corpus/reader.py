"""Open a prepared corpus: memory-mapped when the bytes are contiguous on disk, else block reads.
A .zarr corpus as prepare_data.py writes it (one uncompressed chunk per split) opens without the
zarr package; any other Zarr store needs it."""

import json
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np

from eggnog.corpus.formats import META_ATTR, format_of, sidecar_of
from eggnog.corpus.layout import SPLITS
from eggnog.corpus.stats import stats_of
from eggnog.runtime.errors import BadInput
from eggnog.runtime.optional import importable


class SlowCorpusWarning(UserWarning):
    """The corpus is chunked or compressed, so it is read block by block instead of memory-mapped."""


class BlockReader:
    """Slices of an h5py dataset or a zarr array, read on demand (no memory map possible)."""

    def __init__(self, array: Any, owner: Any = None) -> None:
        self.array = array
        self.owner = owner  # keeps the HDF5 file open
        self.shape = (int(array.shape[0]),)
        self.dtype = np.dtype(np.uint8)

    def __len__(self) -> int:
        return self.shape[0]

    def __getitem__(self, item: int | slice | np.ndarray) -> np.ndarray:
        return np.asarray(self.array[item], dtype=np.uint8)


@dataclass
class ByteCorpus:
    path: str
    train: np.ndarray | BlockReader  # np.memmap or BlockReader
    val: np.ndarray | BlockReader
    meta: dict = field(default_factory=dict)

    @property
    def memory_mapped(self) -> bool:
        return all(isinstance(s, np.memmap) or len(s) == 0 for s in (self.train, self.val))

    def verify(self) -> bool:
        """True when both splits match the SHA-256 recorded in the metadata."""
        recorded = self.meta.get("splits", {})
        return all(name in recorded and stats_of(getattr(self, name))["sha256"] == recorded[name]["sha256"]
                   for name in SPLITS)


def _memmap(path: str | Path, offset: int, length: int) -> np.ndarray:
    if length == 0:
        return np.zeros(0, dtype=np.uint8)
    return np.memmap(path, dtype=np.uint8, mode="r", offset=offset, shape=(length,))


def _warn_slow(path: Path, name: str, how: str) -> None:
    warnings.warn(f"{path}: split {name!r} is {how}, so it is read block by block (much slower than a "
                  "memory map); prepare_data.py writes a contiguous copy", SlowCorpusWarning, stacklevel=3)


def _check_array(path: str, name: str, shape: tuple[int, ...], dtype: Any) -> None:
    if len(shape) != 1:
        raise BadInput(f"dataset {name!r} in {path!r} has shape {tuple(shape)}; a byte corpus is 1-D")
    if np.dtype(dtype) != np.uint8:
        raise BadInput(f"dataset {name!r} in {path!r} has dtype {np.dtype(dtype)}; a byte corpus is uint8")


def _open_bin(path: Path) -> ByteCorpus:
    sidecar = sidecar_of(path)
    if not sidecar.exists():
        raise BadInput(f"{str(path)!r} has no metadata file {sidecar.name!r}; prepare it with bin/prepare_data.py")
    try:
        meta = json.loads(sidecar.read_text())
        sizes = [int(meta["splits"][name]["bytes"]) for name in SPLITS]
    except (ValueError, KeyError, TypeError) as e:
        raise BadInput(f"metadata file {str(sidecar)!r} is not valid corpus metadata ({e})") from None
    actual = path.stat().st_size
    if actual != sum(sizes):
        raise BadInput(f"{str(path)!r} holds {actual} bytes but its metadata says {sum(sizes)}")
    return ByteCorpus(str(path), _memmap(path, 0, sizes[0]), _memmap(path, sizes[0], sizes[1]), meta)


def _open_h5(path: Path) -> ByteCorpus:
    import h5py

    try:
        f = h5py.File(path, "r")
    except OSError as e:
        raise BadInput(f"cannot read {str(path)!r} as HDF5 ({e})") from None
    if "train" not in f:
        raise BadInput(f"{str(path)!r} has no dataset 'train' (found: {', '.join(f.keys()) or 'none'})")
    meta = json.loads(f.attrs[META_ATTR]) if META_ATTR in f.attrs else {}
    splits: dict[str, np.ndarray | BlockReader] = {}
    for name in SPLITS:
        if name not in f:
            splits[name] = np.zeros(0, dtype=np.uint8)
            continue
        dset = f[name]
        if not isinstance(dset, h5py.Dataset):
            raise BadInput(f"{name!r} in {str(path)!r} is not a dataset")
        _check_array(str(path), name, dset.shape, dset.dtype)
        offset = dset.id.get_offset()
        if dset.shape[0] == 0:
            splits[name] = np.zeros(0, dtype=np.uint8)
        elif offset is not None and dset.chunks is None and not dset.compression:
            splits[name] = _memmap(path, offset, dset.shape[0])
        else:
            _warn_slow(path, name, "chunked or compressed")
            splits[name] = BlockReader(dset, owner=f)
    if not any(isinstance(s, BlockReader) for s in splits.values()):
        f.close()
    return ByteCorpus(str(path), splits["train"], splits["val"], meta)


def zarr_package(doing: str) -> ModuleType:
    """The zarr module, or BadInput saying that `doing` needs it (zarr is an optional package)."""
    zarr = importable("zarr")
    if zarr is None:
        raise BadInput(f"{doing} needs the zarr package, which is not installed: install it "
                       "(pip install 'zarr>=3.1', or eggnog[full]) or use a .bin or .h5 corpus instead")
    return zarr


def _zarr_chunk_file(array_dir: Path, node: dict[str, Any]) -> Path | None:
    """The file of the only chunk when the array is one uncompressed chunk; None otherwise."""
    if node.get("zarr_format") != 3 or node.get("node_type") != "array":
        return None
    shape = node.get("shape", [])
    chunk_shape = node.get("chunk_grid", {}).get("configuration", {}).get("chunk_shape", [])
    codecs = [c.get("name") for c in node.get("codecs", [])]
    encoding = node.get("chunk_key_encoding", {})
    if len(shape) != 1 or len(chunk_shape) != 1 or chunk_shape[0] < shape[0] or codecs != ["bytes"]:
        return None
    separator = encoding.get("configuration", {}).get("separator", "/")
    if encoding.get("name", "default") != "default":
        return None
    chunk = array_dir / ("c" + separator + "0")
    return chunk if chunk.is_file() and chunk.stat().st_size == shape[0] else None


def _open_zarr(path: Path) -> ByteCorpus:
    group_meta = path / "zarr.json"
    fast = {}
    meta = {}
    if group_meta.is_file():
        try:
            meta = json.loads(group_meta.read_text()).get("attributes", {}).get(META_ATTR, {})
            for name in SPLITS:
                node_file = path / name / "zarr.json"
                if node_file.is_file():
                    node = json.loads(node_file.read_text())
                    if node.get("data_type") == "uint8" and node.get("shape") == [0]:
                        fast[name] = np.zeros(0, dtype=np.uint8)
                    elif node.get("data_type") == "uint8" and (chunk := _zarr_chunk_file(path / name, node)):
                        fast[name] = _memmap(chunk, 0, node["shape"][0])
        except (ValueError, OSError) as e:
            raise BadInput(f"cannot read {str(path)!r} as Zarr ({e})") from None
    if len(fast) == len(SPLITS):
        return ByteCorpus(str(path), fast["train"], fast["val"], meta)
    zarr = zarr_package(f"reading {str(path)!r}")
    try:
        group = zarr.open_group(str(path), mode="r")
    except Exception as e:  # zarr raises several types for a path that is not a group
        raise BadInput(f"cannot read {str(path)!r} as a Zarr group ({e})") from None
    if "train" not in group:
        raise BadInput(f"{str(path)!r} has no array 'train' (found: {', '.join(group.keys()) or 'none'})")
    meta = dict(group.attrs).get(META_ATTR, meta)
    splits: dict[str, np.ndarray | BlockReader] = {}
    for name in SPLITS:
        if name in fast:
            splits[name] = fast[name]
        elif name not in group:
            splits[name] = np.zeros(0, dtype=np.uint8)
        else:
            array = group[name]
            _check_array(str(path), name, array.shape, array.dtype)
            _warn_slow(path, name, "chunked or compressed")
            splits[name] = BlockReader(array)
    return ByteCorpus(str(path), splits["train"], splits["val"], meta)


def open_corpus(path: str | Path) -> ByteCorpus:
    path = Path(path)
    kind = format_of(path)
    if not path.exists():
        raise BadInput(f"corpus {str(path)!r} does not exist")
    try:
        if kind == "bin":
            return _open_bin(path)
        if kind == "h5":
            return _open_h5(path)
        return _open_zarr(path)
    except PermissionError as e:
        raise BadInput(f"cannot read corpus {str(path)!r}: {e.strerror}") from None
