"""Optional packages missing (as on an offline GPU node): each absence is one line on stderr, said once
per process, and eggnog falls back (threadpoolctl, platformdirs, pynvml) or, for zarr, stops with one
sentence and exit status 2 before writing anything. A None entry in sys.modules makes an import fail."""

import ast
import os
import sys
from pathlib import Path

import numpy as np
import pytest

from eggnog.corpus import default
from eggnog.corpus.prepare import prepare
from eggnog.corpus.reader import open_corpus
from eggnog.kernels.core import backend
from eggnog.runtime import optional
from eggnog.runtime.errors import BadInput
from eggnog.training import memory
from tests.helpers import ROOT, assert_user_error, run_script


@pytest.fixture(autouse=True)
def fresh_process_memory(monkeypatch):
    """Each test starts as a process that has said nothing yet."""
    monkeypatch.setattr(optional, "_said", set())


def stderr_lines(capsys):
    return [line for line in capsys.readouterr().err.splitlines() if line.strip()]


def test_optional_is_a_leaf():
    tree = ast.parse(Path(ROOT, "runtime", "optional.py").read_text())
    imported = [alias.name for node in ast.walk(tree) if isinstance(node, ast.Import) for alias in node.names]
    imported += [node.module or "" for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)]
    assert not [name for name in imported if name.split(".")[0] == "eggnog"], imported


def test_a_missing_module_is_said_once(monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "threadpoolctl", None)
    assert optional.optional_import("threadpoolctl", "something is lost") is None
    assert optional.optional_import("threadpoolctl", "something is lost") is None
    assert stderr_lines(capsys) == ["note: threadpoolctl is not installed: something is lost"]
    assert optional.optional_import("json", "never said") is sys.modules["json"]
    assert stderr_lines(capsys) == []


def test_blas_threads_uncapped_without_threadpoolctl(monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "threadpoolctl", None)
    for limit_var in ({}, {"EGGNOG_BLAS_THREADS": "3"}):
        monkeypatch.setattr(backend, "_blas_limited", False)
        backend.limit_blas_threads(limit_var)  # no ImportError
        assert backend._blas_limited
    lines = stderr_lines(capsys)
    assert len(lines) == 1, lines  # the second set-up says nothing more
    assert "threadpoolctl is not installed" in lines[0] and "OPENBLAS_NUM_THREADS=1" in lines[0]


def test_blas_threads_given_by_hand_need_no_note(monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "threadpoolctl", None)
    monkeypatch.setattr(backend, "_blas_limited", False)
    backend.limit_blas_threads({"OPENBLAS_NUM_THREADS": "2"})
    assert stderr_lines(capsys) == []


def test_cache_dir_without_platformdirs_is_what_platformdirs_gives(monkeypatch, tmp_path, capsys):
    import platformdirs  # the dev extra has it: compare the fallback with the real answer

    monkeypatch.delenv("EGGNOG_CACHE_DIR", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    answers = []
    for xdg in (str(tmp_path / "xdg"), None):
        if xdg:
            monkeypatch.setenv("XDG_CACHE_HOME", xdg)
        else:
            monkeypatch.delenv("XDG_CACHE_HOME", raising=False)
        expected = Path(platformdirs.user_cache_dir("eggnog"))
        with monkeypatch.context() as m:
            m.setitem(sys.modules, "platformdirs", None)
            answers.append(default.cache_dir())
        assert answers[-1] == expected
    assert answers == [tmp_path / "xdg" / "eggnog", tmp_path / "home" / ".cache" / "eggnog"]
    lines = stderr_lines(capsys)
    assert len(lines) == 1 and "platformdirs is not installed" in lines[0] and "EGGNOG_CACHE_DIR" in lines[0], lines


def test_nvml_missing_is_said_once(monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "pynvml", None)
    assert memory._nvml() is None and memory._nvml() is None
    lines = stderr_lines(capsys)
    assert len(lines) == 1 and "pynvml is not installed" in lines[0] and "numba's context" in lines[0], lines


def test_writing_zarr_without_zarr_writes_nothing(monkeypatch, tmp_path):
    (tmp_path / "a").write_bytes(b"some bytes")
    monkeypatch.setitem(sys.modules, "zarr", None)
    with pytest.raises(BadInput, match="needs the zarr package"):
        prepare([str(tmp_path / "a")], tmp_path / "c.zarr", val_fraction=0.0)
    assert os.listdir(tmp_path) == ["a"]


def test_prepared_zarr_reads_without_zarr(monkeypatch, tmp_path):
    (tmp_path / "a").write_bytes(b"some bytes")
    prepare([str(tmp_path / "a")], tmp_path / "c.zarr", val_fraction=0.0)
    monkeypatch.setitem(sys.modules, "zarr", None)
    assert bytes(open_corpus(tmp_path / "c.zarr").train[:]) == b"some bytes"


def test_chunked_zarr_without_zarr_is_bad_input(monkeypatch, tmp_path):
    import zarr

    group = zarr.open_group(str(tmp_path / "c.zarr"), mode="w")
    group.create_array("train", shape=(50_000,), chunks=(8192,), dtype="uint8")[:] = np.arange(50_000) % 256
    monkeypatch.setitem(sys.modules, "zarr", None)
    with pytest.raises(BadInput, match="reading .* needs the zarr package"):
        open_corpus(tmp_path / "c.zarr")


def test_prepare_script_without_zarr_is_one_sentence(tmp_path):
    (tmp_path / "a").write_bytes(b"some bytes\n" * 600)  # splits longer than one window
    blocker = tmp_path / "blocker"
    blocker.mkdir()
    (blocker / "zarr.py").write_text("raise ImportError('not installed, for a test')\n")
    result = run_script("prepare_data.py", tmp_path / "a", "--out", tmp_path / "c.zarr",
                        env={"PYTHONPATH": f"{blocker}{os.pathsep}{ROOT}"})
    assert_user_error(result, "needs the zarr package")
    assert sorted(os.listdir(tmp_path)) == ["a", "blocker"]
