"""Write split plans to .bin, .h5 or .zarr: to temporary names first, renamed only when complete."""

import json
import os
import shutil
from pathlib import Path

from eggnog.corpus.formats import META_ATTR, format_of, output_paths, sidecar_of
from eggnog.corpus.layout import SPLITS
from eggnog.corpus.reader import zarr_package
from eggnog.corpus.stats import ByteStats
from eggnog.runtime.errors import BadInput
from eggnog.runtime.files import temp_name, write_atomic


def _stream(plan, sink, stats):
    for block in plan.blocks():
        stats.update(block)
        sink(block)
    if stats.size != plan.size:
        raise BadInput("a source file changed size while it was being read; run again")


def _write_bin(tmp, plans, stats):
    with open(tmp, "wb") as f:
        for name in SPLITS:
            _stream(plans[name], f.write, stats[name])
        f.flush()
        os.fsync(f.fileno())


def _write_h5(tmp, plans, stats):
    import h5py

    with h5py.File(tmp, "w") as f:
        for name in SPLITS:
            dset = f.create_dataset(name, shape=(plans[name].size,), dtype="u1")  # contiguous
            position = 0

            def put(block, dset=dset):
                nonlocal position
                dset[position:position + len(block)] = memoryview(block)
                position += len(block)

            _stream(plans[name], put, stats[name])
    return tmp


def _write_zarr(tmp, plans, stats, zarr):
    group = zarr.open_group(str(tmp), mode="w", zarr_format=3)
    for name in SPLITS:
        size = plans[name].size
        group.create_array(name, shape=(size,), chunks=(max(size, 1),), dtype="uint8",
                           compressors=None, filters=None, fill_value=0)
        # The single uncompressed chunk of a Zarr v3 array is its raw bytes: stream them straight
        # into the chunk file instead of holding the split in memory for zarr's encoder.
        chunk = Path(tmp) / name / "c" / "0"
        chunk.parent.mkdir(parents=True, exist_ok=True)
        with open(chunk, "wb") as f:
            _stream(plans[name], f.write, stats[name])
        if size == 0:
            chunk.unlink()
    return group


def write_corpus(path, plans, meta, force=False):
    """Write the splits and metadata (completed with per-split statistics); returns the metadata."""
    kind = format_of(path)
    path = Path(path)
    existing = [p for p in output_paths(path) if p.exists() or p.is_symlink()]
    if existing and not force:
        raise BadInput(f"output {str(existing[0])!r} already exists; pass --force to replace it")
    if not path.parent.is_dir():
        raise BadInput(f"output directory {str(path.parent)!r} does not exist")
    zarr = zarr_package(f"writing {str(path)!r}") if kind == "zarr" else None  # before anything is written
    stats = {name: ByteStats() for name in SPLITS}
    tmp = temp_name(path)
    try:
        if kind == "bin":
            _write_bin(tmp, plans, stats)
        elif kind == "h5":
            _write_h5(tmp, plans, stats)
        else:
            _write_zarr(tmp, plans, stats, zarr)
        meta = dict(meta, splits={name: stats[name].result() for name in SPLITS})
        text = json.dumps(meta, indent=1)
        if kind == "h5":
            import h5py

            with h5py.File(tmp, "a") as f:
                f.attrs[META_ATTR] = text
        elif kind == "zarr":
            zarr.open_group(str(tmp), mode="r+").attrs[META_ATTR] = meta
        _replace(tmp, path)
        if kind == "bin":  # written last: a .bin without its sidecar does not open
            write_atomic(sidecar_of(path), text.encode())
    except OSError as e:
        raise BadInput(f"cannot write the corpus in {str(path.parent)!r} ({e.strerror or e}); nothing was "
                       "written") from None
    finally:
        if tmp.is_dir():
            shutil.rmtree(tmp, ignore_errors=True)
        elif tmp.exists():
            tmp.unlink()
    return meta


def _replace(tmp, path):
    if path.exists() and (path.is_dir() or Path(tmp).is_dir()):
        old = temp_name(path)
        os.replace(path, old)
        os.replace(tmp, path)
        shutil.rmtree(old, ignore_errors=True) if old.is_dir() else old.unlink()
    else:
        os.replace(tmp, path)
