"""Checkpoint files beyond the round trip (test_runtime.py): what a digest covers, which files pruning keeps,
where a path resolves, what is refused and the earlier checkpoint a refusal names."""

import io
import json
import os

import numpy as np
import pytest

from eggnog.runtime.checkpoint import (
    META_KEY,
    array_digest,
    checkpoint_model,
    checkpoint_path,
    checkpoint_step,
    earlier_checkpoint,
    encode_checkpoint,
    load_checkpoint,
    mark_best,
    prune_checkpoints,
    resolve_checkpoint,
    save_checkpoint,
    unreadable,
)
from eggnog.runtime.errors import BadInput

W = {"w": np.arange(6, dtype=np.int16)}


def test_a_digest_covers_dtype_shape_and_bytes():
    a = np.arange(6, dtype=np.int16)
    digests = {array_digest(a), array_digest(a.reshape(2, 3)), array_digest(a.view(np.uint16)),
               array_digest(a + 1), array_digest(a[::-1].copy())}
    assert len(digests) == 5 and array_digest(a.reshape(3, 2).T) == array_digest(a.reshape(3, 2).T.copy())


def test_the_record_names_format_version_step_and_each_arrays_digest():
    with np.load(io.BytesIO(encode_checkpoint(np.int64(12), W, {"seed": 1})), allow_pickle=False) as npz:
        record = json.loads(npz[META_KEY].tobytes())
        assert np.array_equal(npz["w"], W["w"])
    assert record == {"format": "eggnog-checkpoint", "version": 1, "step": 12, "meta": {"seed": 1},
                      "arrays": {"w": array_digest(W["w"])}}
    with pytest.raises(ValueError, match="reserved"):
        encode_checkpoint(0, {META_KEY: np.zeros(1)}, {})


def test_a_checkpoint_is_named_for_its_step_and_links_only_when_asked(tmp_path):
    assert checkpoint_path(tmp_path, 12).name == "step-00000012.npz"
    path = save_checkpoint(tmp_path / "c", 3, W, {}, link_latest=False)
    assert path == tmp_path / "c" / "step-00000003.npz" and not (tmp_path / "c" / "latest").exists()
    named = save_checkpoint(tmp_path / "c", 4, W, {}, name="final.npz")
    assert named.name == "final.npz" and resolve_checkpoint(tmp_path / "c") == tmp_path / "c" / "latest"


def test_pruning_keeps_the_newest_and_what_latest_and_best_point_at(tmp_path):
    paths = [save_checkpoint(tmp_path, step, W, {}) for step in range(1, 6)]
    mark_best(tmp_path, paths[0])
    prune_checkpoints(tmp_path, 2)
    assert sorted(p.name for p in tmp_path.glob("step-*.npz")) == [paths[0].name, paths[3].name, paths[4].name]
    prune_checkpoints(tmp_path, 1)
    assert sorted(p.name for p in tmp_path.glob("step-*.npz")) == [paths[0].name, paths[4].name]


def test_a_path_resolves_to_a_file_a_folders_latest_or_a_runs_latest(tmp_path):
    path = save_checkpoint(tmp_path / "run" / "checkpoints", 2, W, {})
    assert resolve_checkpoint(path) == path
    assert resolve_checkpoint(tmp_path / "run" / "checkpoints").resolve() == path
    assert resolve_checkpoint(tmp_path / "run").resolve() == path
    assert checkpoint_step(tmp_path / "run") == 2
    with pytest.raises(BadInput, match="no checkpoint at"):
        resolve_checkpoint(tmp_path)


def test_a_damaged_checkpoint_names_the_one_before_it(tmp_path):
    first, second, third = (save_checkpoint(tmp_path, s, W, {}) for s in (1, 2, 3))
    assert earlier_checkpoint(third) == second and earlier_checkpoint(second) == first
    assert earlier_checkpoint(first) is None
    third.write_bytes(third.read_bytes()[:100])
    with pytest.raises(BadInput, match=f"is damaged .*--resume {second}"):
        load_checkpoint(third)
    first.write_bytes(first.read_bytes()[:100])
    with pytest.raises(BadInput, match="holds no earlier one"):
        checkpoint_step(first)
    assert str(unreadable(tmp_path / "missing.npz", "x")).endswith("missing.npz' (No such file or directory)")
    (tmp_path / "text.npz").write_text("text")
    assert str(unreadable(tmp_path / "text.npz", "x")).endswith("is not an eggnog checkpoint (not a zip file)")


def test_a_record_that_does_not_match_its_arrays_is_refused(tmp_path):
    path = save_checkpoint(tmp_path, 1, W, {})
    with np.load(path) as npz:
        meta = npz[META_KEY]
    np.savez(tmp_path / "extra.npz", w=W["w"], v=W["w"], **{META_KEY: meta})
    with pytest.raises(BadInput, match="arrays do not match its record"):
        load_checkpoint(tmp_path / "extra.npz")
    record = json.loads(meta.tobytes())
    np.savez(tmp_path / "other.npz", w=W["w"], **{META_KEY: np.frombuffer(
        json.dumps({**record, "format": "other"}).encode(), np.uint8)})
    with pytest.raises(BadInput, match="is not an eggnog checkpoint$"):
        load_checkpoint(tmp_path / "other.npz")
    np.savez(tmp_path / "none.npz", w=W["w"])
    with pytest.raises(BadInput, match="no metadata record"):
        load_checkpoint(tmp_path / "none.npz")


def test_an_older_records_data_position_is_read_as_it_is_written_now(tmp_path):
    path = save_checkpoint(tmp_path, 1, W, {"data_position": {"epoch": 4, "row": 2}, "seed": 1})
    _, record = load_checkpoint(path)
    assert record["meta"] == {"data_position": {"step": 4, "row": 2}, "seed": 1}
    assert os.path.basename(path) == "step-00000001.npz"


UNPICKLED = []


def tripped(what):
    UNPICKLED.append(what)


class Tripwire:
    """Records its own unpickling: a checkpoint reader that unpickles would run it."""

    def __reduce__(self):
        return (tripped, ("unpickled",))


def test_an_object_array_in_a_checkpoint_is_never_unpickled(tmp_path):
    np.savez(tmp_path / "step-00000001.npz", w=np.zeros(2), **{META_KEY: np.array([Tripwire()], dtype=object)})
    for read in (checkpoint_step, load_checkpoint, checkpoint_model):
        with pytest.raises(BadInput):
            read(tmp_path / "step-00000001.npz")
    assert UNPICKLED == []


def test_pruning_passes_over_a_checkpoint_another_process_removed(tmp_path, monkeypatch):
    from pathlib import Path

    paths = [save_checkpoint(tmp_path, step, W, {}) for step in (1, 2, 3)]
    listed = Path.glob
    monkeypatch.setattr(Path, "glob", lambda self, pattern: [*listed(self, pattern), self / "step-00000000.npz"])
    prune_checkpoints(tmp_path, 1)
    monkeypatch.undo()
    assert sorted(tmp_path.glob("step-*.npz")) == [paths[2]]


def record_bytes(record):
    return {META_KEY: np.frombuffer(json.dumps(record).encode(), np.uint8)}


def test_the_model_a_checkpoint_holds_comes_from_its_record(tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    assert checkpoint_model(run) is None  # no checkpoint yet
    path = save_checkpoint(run / "checkpoints", 3, W, {"model": "mingru"})
    assert checkpoint_model(run) == checkpoint_model(path) == "mingru"
    save_checkpoint(run / "checkpoints", 4, W, {})
    assert checkpoint_model(run) is None  # a record without a model
    np.savez(tmp_path / "listed.npz", w=W["w"], **record_bytes({"meta": ["egg"]}))
    assert checkpoint_model(tmp_path / "listed.npz") is None  # meta that is not a mapping names no model


@pytest.mark.parametrize("damage", ["empty", "truncated zip", "not json", "no record", "record not a mapping"])
def test_a_checkpoint_whose_model_cannot_be_read_is_refused_in_one_sentence(tmp_path, damage):
    path = tmp_path / "step-00000001.npz"
    if damage == "empty":  # EOFError
        path.write_bytes(b"")
    elif damage == "truncated zip":  # BadZipFile
        path.write_bytes(encode_checkpoint(1, W, {"model": "egg"})[:100])
    elif damage == "not json":  # ValueError
        np.savez(path, w=W["w"], **{META_KEY: np.frombuffer(b"{not json", np.uint8)})
    elif damage == "no record":  # KeyError
        np.savez(path, w=W["w"])
    else:  # AttributeError
        np.savez(path, w=W["w"], **record_bytes(["egg"]))
    with pytest.raises(BadInput, match="checkpoint"):
        checkpoint_model(path)
