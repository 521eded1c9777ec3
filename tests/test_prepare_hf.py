"""prepare_data.py hf:...: a Hugging Face dataset (saved by save_to_disk, or parquet/arrow files) becomes
the same byte corpus as the same texts given as files, and trains and evaluates; bad input is one
sentence and exit status 2 with nothing written; without the datasets package, one line says how to
get it. No network: the Hub is switched off for every process."""

import json
import os
import shutil
import sysconfig
from pathlib import Path

import numpy as np
import pytest

from eggnog.corpus.prepare import prepare
from eggnog.corpus.reader import open_corpus
from tests.helpers import assert_user_error, run_script

datasets = pytest.importorskip("datasets")

OFFLINE = {"HF_DATASETS_OFFLINE": "1", "HF_HUB_OFFLINE": "1"}
TINY_ES = ["--dim", "8", "--depth", "1", "--population", "8", "--group-size", "2", "--tokens-per-update", "8",
           "--val-rows", "4", "--val-tokens", "16", "--backend", "cpu"]


@pytest.fixture(autouse=True)
def offline(monkeypatch, tmp_path):
    """No process of a test reaches the Hub or a cache outside tmp_path."""
    (tmp_path / "hf_home").mkdir()
    for name, value in {**OFFLINE, "HF_HOME": str(tmp_path / "hf_home")}.items():
        monkeypatch.setenv(name, value)


def prepare_hf(source, *args):
    return run_script("prepare_data.py", f"hf:{source}", *args, env=OFFLINE)


def stdlib_texts():
    """Real text: the stdlib json package cut at its double blank lines, and a line beyond ASCII."""
    texts = []
    for path in sorted((Path(sysconfig.get_paths()["stdlib"]) / "json").glob("*.py")):
        texts += [t for t in path.read_text(encoding="utf-8").split("\n\n\n") if t.strip()]
    return texts + ["UTF-8 as it is: naïve café, Ελληνικά, 日本語 ✓"]


def as_files(texts, directory, val_fraction, seed):
    """The corpus that prepare writes from the texts as files, one a document, in the same order."""
    directory.mkdir()
    for i, text in enumerate(texts):
        (directory / f"{i:04d}.txt").write_bytes(text.encode("utf-8"))
    out = directory.with_suffix(".bin")
    prepare([str(directory)], out, val_fraction=val_fraction, seed=seed)
    return open_corpus(out)


def splits(corpus):
    return bytes(corpus.train[:]), bytes(corpus.val[:])


def write_form(form, texts, tmp):
    """The texts as a dataset in `form`; returns (the hf: path, the extra flags naming its split and field)."""
    if form == "saved dataset":
        datasets.Dataset.from_dict({"text": texts}).save_to_disk(tmp / "saved")
        return tmp / "saved", []
    if form == "saved dict, other split and field":
        table = datasets.Dataset.from_dict({"content": texts, "n": list(range(len(texts)))})
        datasets.DatasetDict({"train": table.select([0]), "extra": table}).save_to_disk(tmp / "saved")
        return tmp / "saved", ["--split", "extra", "--text-field", "content"]
    if form == "parquet file":
        datasets.Dataset.from_dict({"text": texts}).to_parquet(tmp / "d.parquet")
        return tmp / "d.parquet", []
    if form == "parquet folder":
        (tmp / "pq" / "b").mkdir(parents=True)
        half = len(texts) // 2
        datasets.Dataset.from_dict({"text": texts[:half]}).to_parquet(tmp / "pq" / "a.parquet")
        datasets.Dataset.from_dict({"text": texts[half:]}).to_parquet(tmp / "pq" / "b" / "c.parquet")
        return tmp / "pq", []
    assert form == "arrow file"  # the Arrow stream file that save_to_disk writes
    datasets.Dataset.from_dict({"text": texts}).save_to_disk(tmp / "saved")
    shutil.copy(next((tmp / "saved").glob("*.arrow")), tmp / "d.arrow")
    return tmp / "d.arrow", []


FORMS = ["saved dataset", "saved dict, other split and field", "parquet file", "parquet folder", "arrow file"]


@pytest.mark.parametrize("form", FORMS)
def test_each_form_gives_the_corpus_of_the_same_texts_as_files(tmp_path, form):
    texts = stdlib_texts()
    source, flags = write_form(form, texts, tmp_path)
    result = prepare_hf(source, *flags, "--out", tmp_path / "c.h5", "--val-fraction", "0.3", "--seed", "5")
    assert result.returncode == 0, result.stderr
    assert f"{len(texts)} texts from hf:" in result.stdout and "unigram bpb" in result.stdout
    corpus, files = open_corpus(tmp_path / "c.h5"), as_files(texts, tmp_path / "files", 0.3, 5)
    assert splits(corpus) == splits(files)  # same documents, separators and validation choice
    assert 0 < len(corpus.val) < len(corpus.train)
    for key in ("documents", "splits", "separator", "val_fraction", "split_seed"):
        assert corpus.meta[key] == files.meta[key], key
    assert corpus.meta["sources"] == [f"hf:{source}"]
    assert not [p for p in os.listdir(tmp_path) if p.startswith(".")]  # no spool or temporary left


def test_saved_dict_with_a_validation_split_trains_and_evaluates(tmp_path):
    texts = stdlib_texts()
    train, val = texts[:-8], texts[-8:]
    datasets.DatasetDict({
        "train": datasets.Dataset.from_dict({"text": train[:3] + ["", None] + train[3:]}),
        "validation": datasets.Dataset.from_dict({"text": val}),
        "test": datasets.Dataset.from_dict({"text": ["never read"]}),
    }).save_to_disk(tmp_path / "saved")
    corpus_path = tmp_path / "c.bin"
    result = prepare_hf(tmp_path / "saved", "--split", "train", "--val-split", "validation", "--out", corpus_path)
    assert result.returncode == 0, result.stderr
    assert "2 empty rows skipped" in result.stdout
    corpus = open_corpus(corpus_path)
    assert splits(corpus) == (b"\0".join(t.encode() for t in train), b"\0".join(t.encode() for t in val))
    assert corpus.meta["documents"] == {"train": len(train), "val": len(val)} and corpus.verify()
    assert corpus.meta["hf"]["empty_rows_skipped"] == {"train": 2}
    assert corpus.meta["val_fraction"] is None and corpus.meta["hf"]["val_split"] == "validation"

    run = tmp_path / "run"
    trained = run_script("train_es.py", "--run-dir", run, "--steps", "5", "--data", corpus_path, *TINY_ES)
    assert trained.returncode == 0, trained.stderr
    evaluated = run_script("evaluate.py", run, "--data", corpus_path, "--rows", "4", "--tokens", "16", "--json")
    assert evaluated.returncode == 0, evaluated.stderr
    report = json.loads(evaluated.stdout)
    assert report["step"] == 5 and np.isfinite(report["loss"]) and report["loss"] > 0
    assert set(report["baselines"]) == {"unigram", "bigram", "gzip", "xz"}


def bad_cases(tmp):
    texts = stdlib_texts()[:6]
    datasets.DatasetDict({"train": datasets.Dataset.from_dict({"text": texts, "n": list(range(6))})}) \
        .save_to_disk(tmp / "dict")
    datasets.Dataset.from_dict({"text": texts}).save_to_disk(tmp / "single")
    datasets.Dataset.from_dict({"text": ["", None, ""]}).save_to_disk(tmp / "blank")
    datasets.Dataset.from_dict({"text": []}).save_to_disk(tmp / "empty_saved")
    datasets.Dataset.from_dict({"text": []}).to_parquet(tmp / "empty.parquet")
    datasets.Dataset.from_dict({"body": texts}).to_parquet(tmp / "body.parquet")
    (tmp / "plain").mkdir()
    (tmp / "plain" / "notes.txt").write_text("text, not a dataset")
    (tmp / "exists.bin").write_bytes(b"old")
    out = ["--out", tmp / "o.bin"]
    return {
        "no such split": ([f"hf:{tmp / 'dict'}", "--split", "test", *out],
                          "has no split 'test' (--split); its splits: train"),
        "no such validation split": ([f"hf:{tmp / 'dict'}", "--val-split", "validation", *out],
                                     "has no split 'validation' (--val-split)"),
        "validation split of a single saved split": ([f"hf:{tmp / 'single'}", "--val-split", "validation", *out],
                                                     "is a single split saved by Dataset.save_to_disk"),
        "no such text field": ([f"hf:{tmp / 'dict'}", "--text-field", "body", *out],
                               "has no field 'body' (--text-field); its fields: text, n"),
        "no such text field in parquet": ([f"hf:{tmp / 'body.parquet'}", *out], "has no field 'text'"),
        "field that is not text": ([f"hf:{tmp / 'dict'}", "--text-field", "n", *out], "holds int values, not text"),
        "empty dataset": ([f"hf:{tmp / 'empty.parquet'}", *out], "split 'train' holds no text in its field 'text'"),
        "empty saved dataset": ([f"hf:{tmp / 'empty_saved'}", *out], "saved with no rows"),
        "only empty rows": ([f"hf:{tmp / 'blank'}", *out], "holds no text"),
        "missing path": ([f"hf:{tmp / 'missing'}", *out], "no such file or folder"),
        "missing relative parquet": (["hf:missing.parquet", *out], "no such file or folder 'missing.parquet'"),
        "folder that is no dataset": ([f"hf:{tmp / 'plain'}", *out], "holds neither a dataset written by save_to_disk"),
        "dataset not on this machine": (["hf:eggnog-tests/no-such-dataset", *out], "cannot open 'hf:eggnog-tests"),
        "two validation choices": ([f"hf:{tmp / 'dict'}", "--val-split", "x", "--val-fraction", "0.1", *out],
                                   "give one of them"),
        "hf with files": ([f"hf:{tmp / 'dict'}", tmp / "plain", *out], "must be the only source"),
        "hf flags with files": ([tmp / "plain", "--split", "train", *out], "apply to hf: sources only"),
        "existing output": ([f"hf:{tmp / 'dict'}", "--out", tmp / "exists.bin"], "already exists; pass --force"),
    }


BAD = ["no such split", "no such validation split", "validation split of a single saved split", "no such text field",
       "no such text field in parquet", "field that is not text", "empty dataset", "empty saved dataset",
       "only empty rows", "missing path", "missing relative parquet", "folder that is no dataset",
       "dataset not on this machine", "two validation choices", "hf with files", "hf flags with files",
       "existing output"]


@pytest.mark.parametrize("case", BAD)
def test_bad_input_is_one_sentence_and_writes_nothing(tmp_path, case):
    args, message = bad_cases(tmp_path)[case]
    before = sorted(os.listdir(tmp_path))
    assert_user_error(run_script("prepare_data.py", *args, env=OFFLINE, cwd=tmp_path), message)
    assert sorted(os.listdir(tmp_path)) == before
    assert (tmp_path / "exists.bin").read_bytes() == b"old"


def test_without_datasets_one_line_says_how_to_get_it(tmp_path):
    blocked = tmp_path / "blocked" / "datasets"
    blocked.mkdir(parents=True)
    (blocked / "__init__.py").write_text("raise ImportError('datasets is not installed here')\n")
    datasets.Dataset.from_dict({"text": stdlib_texts()}).save_to_disk(tmp_path / "saved")
    pythonpath = os.pathsep.join([str(tmp_path / "blocked"), str(Path(__file__).parents[1])])
    env = {**OFFLINE, "PYTHONPATH": pythonpath}
    result = run_script("prepare_data.py", f"hf:{tmp_path / 'saved'}", "--out", tmp_path / "o.bin", env=env)
    assert_user_error(result, "need the datasets package", "pip install -e '.[hf]'", "pip install datasets")
    assert not (tmp_path / "o.bin").exists()
    (tmp_path / "doc.txt").write_text("files need no datasets package " * 200)
    files = run_script("prepare_data.py", tmp_path / "doc.txt", "--out", tmp_path / "f.bin", env=env)
    assert files.returncode == 0 and "datasets" not in files.stderr, files.stderr
