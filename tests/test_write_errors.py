"""A write the file system refuses (full disk, read-only) ends a script with one sentence and exit
status 2, and what was written before stays valid. As root chmod stops no write, so the errors are
injected into the write path."""

import errno
import os

import numpy as np
import pytest

from eggnog.runtime import files
from eggnog.runtime.checkpoint import load_checkpoint, save_checkpoint
from eggnog.runtime.cli import user_errors


def refuse(code):
    def fail(*args, **kwargs):
        raise OSError(code, os.strerror(code), args[0] if args and isinstance(args[0], (str, os.PathLike)) else None)
    return fail


@pytest.mark.parametrize("code,where,cause", [(errno.ENOSPC, "fsync", "the disk is full"),
                                              (errno.EROFS, "replace", "the file system is read-only")])
def test_a_refused_checkpoint_write_is_one_sentence_and_latest_stays_valid(tmp_path, monkeypatch, capsys, code,
                                                                            where, cause):
    directory = tmp_path / "checkpoints"
    save_checkpoint(directory, 1, {"w": np.arange(4)}, {})
    monkeypatch.setattr(files.os, where, refuse(code))

    @user_errors
    def train():
        save_checkpoint(directory, 2, {"w": np.arange(4) * 2}, {})

    with pytest.raises(SystemExit) as stopped:
        train()
    monkeypatch.undo()
    assert stopped.value.code == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: cannot write in") and cause in lines[0]
    arrays, record = load_checkpoint(directory)
    assert record["step"] == 1 and np.array_equal(arrays["w"], np.arange(4))
    assert sorted(p.name for p in directory.iterdir()) == ["latest", "step-00000001.npz"]


def test_other_os_errors_are_not_hidden():
    @user_errors
    def broken():
        raise OSError(errno.EIO, "I/O error")

    with pytest.raises(OSError):
        broken()
