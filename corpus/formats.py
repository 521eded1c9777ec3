"""File formats of a prepared corpus, by suffix.

- `.bin`: the train bytes then the val bytes, raw; metadata in the sidecar `<name>.bin.json`.
- `.h5` / `.hdf5`: contiguous uint8 datasets `train` and `val`; metadata in the root attribute
  `eggnog` (JSON text).
- `.zarr`: a Zarr v3 group with uint8 arrays `train` and `val`, each one uncompressed chunk (whose
  file is the raw bytes); metadata in the group attribute `eggnog`.
"""

from pathlib import Path

from eggnog.runtime.errors import BadInput

FORMATS = {".bin": "bin", ".h5": "h5", ".hdf5": "h5", ".zarr": "zarr"}
META_ATTR = "eggnog"


def format_of(path):
    suffix = Path(path).suffix.lower()
    if suffix not in FORMATS and Path(path).is_dir():
        raise BadInput(f"{str(path)!r} is a folder without input.bin: give a corpus file (.bin, .h5 or .zarr, "
                       "written by bin/prepare_data.py) or a d-eggs data folder (input.bin and decoding.bin)")
    if suffix not in FORMATS:
        raise BadInput(f"unknown corpus suffix {suffix or '(none)'!r} in {str(path)!r}: use .bin, .h5 or .zarr")
    return FORMATS[suffix]


def sidecar_of(path):
    return Path(f"{path}.json")


def output_paths(path):
    """Every path a corpus at `path` occupies."""
    return [Path(path), sidecar_of(path)] if format_of(path) == "bin" else [Path(path)]
