"""Hugging Face datasets as a source of documents: `hf:NAME[:CONFIG]` on the Hub (streamed), or
`hf:PATH` where PATH is a folder written by `save_to_disk` or a parquet/arrow file or folder of them
(streamed). An existing local path is always a path. The datasets package is imported only here, and
only when such a source is named."""

import os
import socket
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlparse

from eggnog.runtime.errors import BadInput
from eggnog.runtime.optional import importable

PREFIX = "hf:"
FILE_BUILDERS = {".parquet": "parquet", ".arrow": "arrow"}
SAVED_MARKERS = ("dataset_dict.json", "state.json")  # what save_to_disk writes (DatasetDict, Dataset)
BATCH_ROWS = 1000
HUB = "https://huggingface.co"
PROBE_S = 3.0  # how long a connection to the Hub may take before it counts as unreachable
PROXY_VARS = ("HTTPS_PROXY", "https_proxy", "ALL_PROXY", "all_proxy")
OFFLINE_HINT = ("the Hugging Face Hub ({host}) cannot be reached from this machine and the dataset is not in its "
                "cache: prepare it where the Hub is reachable (python bin/prepare_data.py {source} --out corpus.h5) "
                "and copy the corpus here")


def is_hf_source(source):
    return str(source).startswith(PREFIX)


def hub_host():
    return urlparse(os.environ.get("HF_ENDPOINT") or HUB).hostname or "huggingface.co"


def hub_reachable(timeout=PROBE_S):
    """Whether a TCP connection to the Hub opens within `timeout` seconds (through a proxy: assumed)."""
    if any(os.environ.get(v) for v in PROXY_VARS):
        return True
    endpoint = urlparse(os.environ.get("HF_ENDPOINT") or HUB)
    try:
        socket.create_connection((hub_host(), endpoint.port or 443), timeout=timeout).close()
        return True
    except OSError:
        return False


def offline_unless_reachable():
    """Where the Hub cannot be reached, datasets is told to read its cache only (HF_HUB_OFFLINE):
    without the network it would retry for a minute before failing."""
    if os.environ.get("HF_HUB_OFFLINE", "0") not in ("", "0") or hub_reachable():
        return
    os.environ["HF_HUB_OFFLINE"] = "1"


def datasets_package():
    """The datasets module, or BadInput saying in one sentence how to install it."""
    datasets = importable("datasets")
    if datasets is None:
        raise BadInput("hf: sources need the datasets package, which is not installed: "
                       "pip install -e '.[hf]' (or pip install datasets)")
    datasets.disable_progress_bars()  # a bad input is then one line on stderr, as everywhere
    datasets.logging.set_verbosity_error()
    return datasets


@dataclass(frozen=True)
class HfSource:
    text: str           # as given: hf:...
    kind: str           # "hub", "saved" (save_to_disk) or "files" (parquet/arrow)
    name: str           # the Hub name, or the local path
    config: str | None = None
    builder: str | None = None  # parquet or arrow, for kind "files"
    files: tuple = ()


def _looks_like_path(rest):
    return rest.startswith(("/", ".", "~")) or rest.count("/") > 1 or Path(rest).suffix.lower() in FILE_BUILDERS


def _data_files(source, path):
    files = sorted(p for p in path.rglob("*") if p.is_file() and p.suffix.lower() in FILE_BUILDERS)
    if not files:
        raise BadInput(f"{source!r}: the folder {str(path)!r} holds neither a dataset written by save_to_disk "
                       "nor .parquet or .arrow files")
    kinds = {FILE_BUILDERS[p.suffix.lower()] for p in files}
    if len(kinds) > 1:
        raise BadInput(f"{source!r}: the folder {str(path)!r} mixes .parquet and .arrow files; name one kind")
    return kinds.pop(), tuple(str(p) for p in files)


def parse_source(source):
    """What `hf:...` names; a missing local path is refused here, before anything is loaded."""
    rest = str(source)[len(PREFIX):]
    if not rest:
        raise BadInput("hf: needs a dataset name or a local path after it, e.g. hf:JeanKaddour/minipile")
    path = Path(rest).expanduser()
    if path.is_dir():
        if any((path / marker).is_file() for marker in SAVED_MARKERS):
            return HfSource(source, "saved", str(path))
        builder, files = _data_files(source, path)
        return HfSource(source, "files", str(path), builder=builder, files=files)
    if path.exists():
        builder = FILE_BUILDERS.get(path.suffix.lower())
        if builder is None:
            raise BadInput(f"{source!r}: {str(path)!r} is neither a folder written by save_to_disk nor a "
                           ".parquet or .arrow file")
        return HfSource(source, "files", str(path), builder=builder, files=(str(path),))
    if _looks_like_path(rest):
        raise BadInput(f"{source!r}: no such file or folder {str(path)!r}")
    name, _, config = rest.partition(":")
    return HfSource(source, "hub", name, config=config or None)


def _pick(source, splits, split, role):
    if split not in splits:
        raise BadInput(f"{source.text!r} has no split {split!r} ({role}); its splits: {', '.join(sorted(splits))}")
    return splits[split]


def _load(source, datasets):
    """The dataset's splits by name (a DatasetDict or IterableDatasetDict), or one saved Dataset."""
    errors = (OSError, ValueError, datasets.exceptions.DatasetsError)
    try:
        if source.kind == "saved":
            return datasets.load_from_disk(source.name)
        if source.kind == "files":
            return datasets.load_dataset(source.builder, data_files=list(source.files), streaming=True)
        return datasets.load_dataset(source.name, source.config, streaming=True)
    except IndexError:  # what load_from_disk raises for a split saved with no rows (no data files)
        if source.kind != "saved":
            raise
        raise BadInput(f"cannot open {source.text!r}: a split of it was saved with no rows, which datasets "
                       "cannot load back; it holds no text") from None
    except errors as e:
        reason = (str(e).strip().splitlines() or [type(e).__name__])[0]
        if source.kind == "hub" and not hub_reachable():
            reason = OFFLINE_HINT.format(host=hub_host(), source=source.text)
        raise BadInput(f"cannot open {source.text!r}: {reason}") from None


def _no_field(source, split, text_field, fields):
    return BadInput(f"{source.text!r} split {split!r} has no field {text_field!r} (--text-field); "
                    f"its fields: {', '.join(fields)}")


def _with_text_field(source, dataset, split, text_field):
    """The dataset as plain Python values (whatever format a saved one kept), cut to its text field when
    its fields are known before reading (parquet then reads that column only)."""
    dataset = dataset.with_format(None)
    columns = getattr(dataset, "column_names", None)
    if columns is None:  # known only once rows come: `documents` checks
        return dataset
    if text_field not in columns:
        raise _no_field(source, split, text_field, columns)
    return dataset.select_columns([text_field])


def open_splits(source, split, val_split, text_field, datasets):
    """(dataset of `split`, dataset of `val_split` or None), their text field checked where it can be
    before any row is read: the arguments of `documents`."""
    loaded = _load(source, datasets)
    if isinstance(loaded, datasets.Dataset):  # one split saved on its own: it is the whole dataset
        if val_split is not None:
            raise BadInput(f"{source.text!r} is a single split saved by Dataset.save_to_disk: it has no split "
                           f"{val_split!r} to validate on; drop --val-split to hold out --val-fraction of it")
        return _with_text_field(source, loaded, split, text_field), None
    train = _with_text_field(source, _pick(source, loaded, split, "--split"), split, text_field)
    if val_split is None:
        return train, None
    return train, _with_text_field(source, _pick(source, loaded, val_split, "--val-split"), val_split, text_field)


def documents(source, dataset, split, text_field, skipped):
    """The UTF-8 bytes of each row's `text_field`, in dataset order, streamed in batches. Rows whose
    field is empty or null are skipped and counted in skipped[split]."""
    for batch in dataset.iter(batch_size=BATCH_ROWS):
        if text_field not in batch:
            raise _no_field(source, split, text_field, batch)
        for text in batch[text_field]:
            if isinstance(text, str) and text:
                yield text.encode("utf-8")
            elif text is None or isinstance(text, str):
                skipped[split] = skipped.get(split, 0) + 1
            else:
                raise BadInput(f"{source.text!r} field {text_field!r} holds {type(text).__name__} values, "
                               "not text; name a text field with --text-field")
