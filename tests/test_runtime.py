"""Runtime: world of size 1 without a launcher, PMI-mismatch guard, run directories, JSONL logs,
atomic verified checkpoints with latest/best links, and the exit-2 convention."""

import json
import os

import numpy as np
import pytest

from eggnog.runtime.checkpoint import checkpoint_step, load_checkpoint, mark_best, resolve_checkpoint, save_checkpoint
from eggnog.runtime.cli import user_errors
from eggnog.runtime.errors import BadInput
from eggnog.runtime.rundir import create_run_dir, metrics_log, read_config, read_jsonl
from eggnog.runtime.world import check_launch, init_world


def test_world_without_launcher_is_size_one():
    world = init_world()
    assert (world.rank, world.size, world.local_rank, world.local_size) == (0, 1, 0, 1)
    assert world.all_true(True) and not world.all_true(False)
    assert world.bcast_json({"a": [1, 2]}) == {"a": [1, 2]}
    assert world.allgather_array(np.arange(3)).tolist() == [0, 1, 2]
    assert world.root_first(lambda: 7) == 7


def test_pmi_mismatch_is_explained():
    with pytest.raises(BadInput, match="SLURM started 4 tasks but MPI sees a world of size 1.*--mpi=pmi2"):
        check_launch(1, {"SLURM_NTASKS": "4"})
    check_launch(4, {"SLURM_NTASKS": "4"})
    check_launch(1, {"SLURM_NTASKS": "1"})
    check_launch(1, {})


def test_run_directory_config_and_metrics(tmp_path):
    world = init_world()
    run = create_run_dir(world, tmp_path / "run", {"lr": 0.1, "seed": 3})
    assert read_config(run) == {"lr": 0.1, "seed": 3}
    assert (run / "checkpoints").is_dir()
    log = metrics_log(world, run)
    log.write(epoch=0, train_bpb=4.5)
    log.write(epoch=1, train_bpb=4.25)
    log.close()
    assert read_jsonl(run / "metrics.jsonl") == [{"epoch": 0, "train_bpb": 4.5}, {"epoch": 1, "train_bpb": 4.25}]
    with pytest.raises(BadInput, match="already exists and is not empty; pass --resume"):
        create_run_dir(world, run, {})
    assert create_run_dir(world, run, {"ignored": 1}, resume=True) == run
    assert read_config(run) == {"lr": 0.1, "seed": 3}
    with pytest.raises(BadInput, match="not a run directory"):
        create_run_dir(world, tmp_path / "other", {}, resume=True)


def test_default_run_directory_name(tmp_path):
    run = create_run_dir(init_world(), None, {}, runs_root=tmp_path, name="es")
    assert run.parent == tmp_path and run.name.startswith("es-")


def test_metrics_are_written_by_rank_zero_only(tmp_path):
    class NotRoot:
        is_root = False

    log = metrics_log(NotRoot(), tmp_path)
    log.write(epoch=0)
    assert not (tmp_path / "metrics.jsonl").exists()


def test_checkpoint_round_trip_and_links(tmp_path):
    arrays = {"params": np.arange(-5, 5, dtype=np.int8), "state": np.ones((2, 3), np.float32)}
    first = save_checkpoint(tmp_path / "checkpoints", 1, arrays, {"seed": 9})
    second = save_checkpoint(tmp_path / "checkpoints", 2, {k: v * 2 for k, v in arrays.items()}, {"seed": 9})
    mark_best(tmp_path / "checkpoints", first)
    loaded, record = load_checkpoint(tmp_path)  # a run directory resolves to its latest
    assert record["step"] == 2 and record["meta"] == {"seed": 9}
    assert loaded["params"].dtype == np.int8 and np.array_equal(loaded["params"], arrays["params"] * 2)
    assert resolve_checkpoint(tmp_path / "checkpoints").resolve() == second.resolve()
    best, _ = load_checkpoint(tmp_path / "checkpoints" / "best")
    assert np.array_equal(best["state"], arrays["state"])
    assert os.readlink(tmp_path / "checkpoints" / "latest") == second.name  # relative: run dirs move
    assert not [p for p in os.listdir(tmp_path / "checkpoints") if ".tmp-" in p]


def test_damaged_checkpoints_are_refused(tmp_path):
    path = save_checkpoint(tmp_path, 0, {"w": np.arange(1000, dtype=np.int32)}, {})
    raw = bytearray(path.read_bytes())
    offset = raw.find(np.arange(1000, dtype=np.int32).tobytes()[400:416])
    raw[offset] ^= 0xFF
    path.write_bytes(bytes(raw))
    with pytest.raises(BadInput, match="is damaged .*CRC.*holds no earlier one"):  # caught by the zip layer
        load_checkpoint(path)
    record = save_checkpoint(tmp_path / "ok", 0, {"w": np.arange(1000, dtype=np.int32)}, {})
    with np.load(record) as npz:  # a well-formed archive whose array no longer matches its record
        np.savez(path, w=npz["w"] + 1, __meta__=npz["__meta__"])
    with pytest.raises(BadInput, match="array 'w' fails its checksum"):
        load_checkpoint(path)
    path.write_bytes(bytes(raw[: len(raw) // 2]))  # its zip directory is gone
    with pytest.raises(BadInput, match="is damaged"):
        load_checkpoint(path)
    with pytest.raises(BadInput, match="is damaged"):
        checkpoint_step(path)
    (tmp_path / "text.npz").write_text("not a zip")
    with pytest.raises(BadInput, match="not an eggnog checkpoint \\(not a zip file\\)"):
        load_checkpoint(tmp_path / "text.npz")
    np.savez(tmp_path / "plain.npz", w=np.zeros(3))
    with pytest.raises(BadInput, match="not an eggnog checkpoint"):
        load_checkpoint(tmp_path / "plain.npz")
    with pytest.raises(BadInput, match="no checkpoint at"):
        load_checkpoint(tmp_path / "nowhere")


def test_checkpoints_refuse_object_arrays(tmp_path):
    with pytest.raises(ValueError, match="pickle"):
        save_checkpoint(tmp_path, 0, {"bad": np.array([{"a": 1}], dtype=object)}, {})


def test_checkpoint_metadata_is_json_not_pickle(tmp_path):
    path = save_checkpoint(tmp_path, 3, {"w": np.zeros(2)}, {"note": "x"})
    with np.load(path, allow_pickle=False) as npz:
        record = json.loads(npz["__meta__"].tobytes())
    assert record["format"] == "eggnog-checkpoint" and record["step"] == 3


def test_user_errors_exit_with_status_two(capsys):
    @user_errors
    def command():
        raise BadInput("the flag --x must be positive")

    with pytest.raises(SystemExit) as exit_info:
        command()
    assert exit_info.value.code == 2
    assert capsys.readouterr().err == "error: the flag --x must be positive\n"


def test_progress_bar_only_on_rank_zero(monkeypatch):
    from eggnog.runtime.progress import progress

    class Rank:
        def __init__(self, root):
            self.is_root = root

    monkeypatch.setenv("EGGNOG_PROGRESS", "1")
    assert not progress(10, Rank(True)).disable
    assert progress(10, Rank(False)).disable
    monkeypatch.setenv("EGGNOG_PROGRESS", "0")
    assert progress(10, Rank(True)).disable


def test_without_any_mpi_library_a_lone_process_still_runs():
    import subprocess
    import sys

    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    code = ("from eggnog.runtime.world import init_world, mpi_library; import numpy as np\n"
            "w = init_world()\n"
            "print(w.size, w.all_true(True), w.all_true(False), w.bcast_json({'a': 1}), "
            "w.allgather_array(np.arange(2)).tolist(), mpi_library())")
    env = dict(os.environ, PYTHONPATH=root, MPI4PY_LIBMPI="/nonexistent/libmpi.so.12")
    for var in ("SLURM_NTASKS", "SLURM_NPROCS", "PMI_SIZE", "OMPI_COMM_WORLD_SIZE", "PMIX_SIZE"):
        env.pop(var, None)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=60)
    assert out.stdout.strip() == "1 True False {'a': 1} [0, 1] none (single process)", out.stderr
    launched = subprocess.run([sys.executable, os.path.join(root, "bin", "selfcheck.py")], capture_output=True,
                              text=True, env=dict(env, SLURM_NTASKS="4"), timeout=60)
    assert launched.returncode == 2 and "no MPI library could be loaded" in launched.stderr
