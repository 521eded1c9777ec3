"""Checkpoints as NPZ (never pickled): arrays plus a JSON metadata record holding the SHA-256 of
every array; written atomically, verified on load, with `latest` and `best` links beside them."""

import hashlib
import io
import json
import zipfile
from pathlib import Path

import numpy as np

from eggnog.runtime.errors import BadInput
from eggnog.runtime.files import link_atomic, write_atomic
from eggnog.runtime.step_names import checkpoint_meta

FORMAT_NAME = "eggnog-checkpoint"
META_KEY = "__meta__"


def array_digest(array):
    array = np.ascontiguousarray(array)
    h = hashlib.sha256(f"{array.dtype.str}{array.shape}".encode())
    h.update(array.tobytes())
    return h.hexdigest()


def checkpoint_path(directory, step):
    return Path(directory) / f"step-{int(step):08d}.npz"


def encode_checkpoint(step, arrays, meta):
    """The bytes of a checkpoint file."""
    if META_KEY in arrays:
        raise ValueError(f"{META_KEY!r} is reserved")
    if any(np.asarray(a).dtype.hasobject for a in arrays.values()):
        raise ValueError("checkpoints hold numeric arrays only (object arrays would need pickle)")
    record = {
        "format": FORMAT_NAME,
        "version": 1,
        "step": int(step),
        "meta": meta,
        "arrays": {name: array_digest(a) for name, a in arrays.items()},
    }
    buffer = io.BytesIO()
    np.savez(buffer, **{name: np.ascontiguousarray(a) for name, a in arrays.items()},
             **{META_KEY: np.frombuffer(json.dumps(record).encode(), dtype=np.uint8)})
    return buffer.getvalue()


def save_checkpoint(directory, step, arrays, meta, link_latest=True, name=None):
    """Write checkpoints/step-XXXXXXXX.npz (or `name`) and point `latest` at it; returns its path."""
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    data = encode_checkpoint(step, arrays, meta)
    path = directory / name if name else checkpoint_path(directory, step)
    write_atomic(path, data)
    if link_latest:
        link_atomic(directory / "latest", path)
    return path


def prune_checkpoints(directory, keep):
    """Delete the step checkpoints of `directory` but the newest `keep` and those `latest` and `best`
    point at."""
    directory = Path(directory)
    kept = {(directory / link).resolve() for link in ("latest", "best") if (directory / link).exists()}
    for path in sorted(directory.glob("step-*.npz"))[:-keep]:
        if path.resolve() not in kept:
            path.unlink(missing_ok=True)


def mark_best(directory, path):
    link_atomic(Path(directory) / "best", path)


def resolve_checkpoint(path):
    """A checkpoint file from a file, a checkpoints directory or a run directory (its latest)."""
    path = Path(path)
    for candidate in (path, path / "latest", path / "checkpoints" / "latest"):
        if candidate.is_file():
            return candidate
    raise BadInput(f"no checkpoint at {str(path)!r} (expected a .npz file, or a run directory with checkpoints/latest)")


def unreadable(path, error):
    """The BadInput for a checkpoint file that cannot be read: damaged where it starts as a zip file
    does (a kill or a full disk during a copy), otherwise not a checkpoint at all."""
    try:
        with open(path, "rb") as f:
            zipped = f.read(4) == b"PK\x03\x04"
    except OSError as e:
        return BadInput(f"cannot read checkpoint {str(path)!r} ({e.strerror or e})")
    if zipped:
        earlier = earlier_checkpoint(path)
        if earlier is None:
            return BadInput(f"checkpoint {str(path)!r} is damaged ({error}), and its folder holds no earlier one")
        return BadInput(f"checkpoint {str(path)!r} is damaged ({error}); use the one before it: --resume {earlier} "
                        f"continues the run from it, and generate.py or evaluate.py take {earlier} in place of the run")
    return BadInput(f"{str(path)!r} is not an eggnog checkpoint (not a zip file)")


def earlier_checkpoint(path):
    """The newest step-*.npz of the folder of `path` before it (None: there is none)."""
    path = Path(path).resolve()
    steps = sorted(p for p in path.parent.glob("step-*.npz") if p.name < path.name)
    return steps[-1] if steps else None


def checkpoint_step(path):
    """The step of the checkpoint at `path` (as resolve_checkpoint finds it), from its record only."""
    path = resolve_checkpoint(path)
    try:
        with np.load(path, allow_pickle=False) as npz:
            return int(json.loads(npz[META_KEY].tobytes().decode())["step"])
    except (zipfile.BadZipFile, ValueError, OSError, EOFError, KeyError) as e:
        raise unreadable(path, e) from None


def checkpoint_model(path):
    """The model kind a run folder's latest checkpoint (or a checkpoint file) holds, from its record
    only; None where the run has no checkpoint yet."""
    path = Path(path)
    if path.is_dir() and not (path / "checkpoints" / "latest").exists():
        return None
    path = resolve_checkpoint(path)
    try:
        with np.load(path, allow_pickle=False) as npz:
            meta = json.loads(npz[META_KEY].tobytes().decode()).get("meta", {})
    except (zipfile.BadZipFile, ValueError, OSError, EOFError, KeyError, AttributeError) as e:
        raise unreadable(path, e) from None
    return meta.get("model") if isinstance(meta, dict) else None


def load_checkpoint(path):
    """Return (arrays, record) after checking every array against its recorded SHA-256."""
    path = resolve_checkpoint(path)
    try:
        with np.load(path, allow_pickle=False) as npz:
            if META_KEY not in npz.files:
                raise BadInput(f"{str(path)!r} is not an eggnog checkpoint (no metadata record)")
            record = json.loads(npz[META_KEY].tobytes().decode())
            arrays = {name: npz[name] for name in npz.files if name != META_KEY}
    except (zipfile.BadZipFile, ValueError, OSError, EOFError) as e:
        raise unreadable(path, e) from None
    if record.get("format") != FORMAT_NAME:
        raise BadInput(f"{str(path)!r} is not an eggnog checkpoint")
    expected = record.get("arrays", {})
    if set(expected) != set(arrays):
        raise BadInput(f"checkpoint {str(path)!r} is damaged: its arrays do not match its record")
    for name, digest in expected.items():
        if array_digest(arrays[name]) != digest:
            raise BadInput(f"checkpoint {str(path)!r} is damaged: array {name!r} fails its checksum")
    return arrays, {**record, "meta": checkpoint_meta(record.get("meta", {}))}
