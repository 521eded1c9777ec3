"""--log tensorboard and --log wandb beside metrics.jsonl: a tiny bin/train_es.py run's every metrics line
(train loss per step, validation), config and plots read back from RUN/tb/ with TensorBoard's reader;
an offline W&B run in RUN/wandb/ naming the metrics, continued under the same id on resume; a missing
package and a logger that raises each cost one line on stderr and never the run; an unknown logger
is refused; a gossip run under `mpiexec -n 2` writes each island's own lines (RUN/tb/rank-NN)."""

import json
import os
import struct
import subprocess
import sys

import pytest
from typer.testing import CliRunner

from bench.faults.mpi import MPIEXEC
from eggnog.runtime import loggers, optional
from eggnog.runtime.rundir import read_jsonl
from tests.es_helpers import TINY, tiny_corpus
from tests.helpers import ROOT, run_script
from tests.test_flags import load_script

ES = [f"--{k.replace('_', '-')}={v}" for k, v in TINY.items() if k not in ("steps", "checkpoint_every")]
ES += ["--backend", "cpu", "--steps", "4"]  # validations after steps 2 and 4
QUIET = {"EGGNOG_PROGRESS": "0"}


@pytest.fixture
def corpus(tmp_path):
    return tiny_corpus(tmp_path)


@pytest.fixture(autouse=True)
def fresh_process_memory(monkeypatch):
    """Each test starts as a process that has said nothing yet."""
    monkeypatch.setattr(optional, "_said", set())


def accumulated(directory):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    events = EventAccumulator(str(directory), size_guidance={"scalars": 0, "images": 0, "tensors": 0})
    events.Reload()
    return events


def scalars(events, tag):
    """[(step, value)] of a scalar tag (float32 in the event file)."""
    return [(e.step, pytest.approx(e.value, rel=1e-6)) for e in events.Scalars(tag)]


def logged(run, key, metrics="metrics.jsonl"):
    return [(r["step"], r[key]) for r in read_jsonl(run / metrics) if key in r]


def test_tensorboard_reads_back_every_line_the_config_and_the_plots(tmp_path, corpus):
    pytest.importorskip("tensorboard")
    run = tmp_path / "run"
    result = run_script("train_es.py", "--run-dir", run, "--data", corpus, *ES, "--checkpoint-every", "100",
                        "--log", "tensorboard", env=QUIET)
    assert result.returncode == 0, result.stderr
    events = accumulated(run / "tb")
    assert [s for s, _ in scalars(events, "train_bpb")] == [1, 2, 3, 4]
    assert scalars(events, "train_bpb") == logged(run, "train_bpb")
    assert [s for s, _ in scalars(events, "val_bpb")] == [2, 4] and scalars(events, "val_bpb") == logged(run, "val_bpb")
    [image] = events.Images("plots/loss")
    assert image.step == 4 and image.width > 100 and image.encoded_image_string[:4] == b"\x89PNG"
    [config] = events.Tensors("config")
    assert b'"script": "train_es.py"' in config.tensor_proto.string_val[0]
    assert f"tensorboard --logdir {run / 'tb'}" in result.stdout


def wandb_env(tmp_path):
    home = tmp_path / "wandb-home"
    return {**QUIET, "WANDB_MODE": "offline", "WANDB_SILENT": "true", "WANDB_CONFIG_DIR": str(home / "config"),
            "WANDB_CACHE_DIR": str(home / "cache"), "WANDB_DATA_DIR": str(home / "data")}


def wandb_records(folder):
    """{kind: [{key: value}]} of an offline run's .wandb file: protobuf records in LevelDB's log format
    (a 7-byte file header; 32 KiB blocks of chunks, each with a 7-byte header: checksum, length, type
    full 1 / first 2 / middle 3 / last 4; a block's tail shorter than a header is padding)."""
    from wandb.proto.wandb_internal_pb2 import Record

    [path] = folder.glob("*.wandb")
    data, block = path.read_bytes(), 32768
    assert data[:4] == b":W&B"
    found, pos, parts = {}, 7, b""
    while pos + 7 <= len(data):
        if block - pos % block < 7:
            pos += block - pos % block
            continue
        length, kind = struct.unpack("<HB", data[pos + 4:pos + 7])
        parts, pos = parts + data[pos + 7:pos + 7 + length], pos + 7 + length
        if kind in (1, 4):
            record = Record.FromString(parts)
            parts, what = b"", record.WhichOneof("record_type")
            items = {"history": lambda: record.history.item, "config": lambda: record.config.update}.get(what)
            if items:
                found.setdefault(what, []).append({i.key or "/".join(i.nested_key): json.loads(i.value_json)
                                                   for i in items()})
            elif what == "run":
                found.setdefault("run", []).append({"id": record.run.run_id, "group": record.run.run_group})
    return found


def test_wandb_offline_writes_the_run_in_the_run_directory_and_a_resume_continues_its_id(tmp_path, corpus):
    pytest.importorskip("wandb")
    run, env = tmp_path / "run", wandb_env(tmp_path)
    first = run_script("train_es.py", "--run-dir", run, "--data", corpus, *ES[:-2], "--steps", "2", "--no-plots",
                       "--log", "wandb", env=env)
    assert first.returncode == 0, first.stderr
    run_id = (run / "wandb_id").read_text().strip()
    [folder] = (run / "wandb").glob("offline-run-*")
    assert folder.name.endswith(f"-{run_id}")
    found = wandb_records(folder)
    assert found["run"] == [{"id": run_id, "group": "run"}]
    assert [(h["step"], h["train_bpb"]) for h in found["history"]] == logged(run, "train_bpb")
    assert [(h["step"], h["val_bpb"]) for h in found["history"] if "val_bpb" in h] == logged(run, "val_bpb")
    assert any(c.get("script") == "train_es.py" and c.get("log") == "wandb" for c in found["config"])
    again = run_script("train_es.py", "--resume", run, "--steps", "3", env=env)  # --log wandb kept from config.json
    assert again.returncode == 0, again.stderr
    folders = sorted((run / "wandb").glob("offline-run-*"))
    assert len(folders) == 2 and all(f.name.endswith(f"-{run_id}") for f in folders)
    resumed = wandb_records(folders[-1])
    assert resumed["run"][0]["id"] == run_id and [h["step"] for h in resumed["history"]] == [3]
    assert f"wandb sync {run / 'wandb'}/offline-run-*" in again.stdout


def invoke(args):
    """bin/train_es.py in this process, with no backend chosen yet (another test may have chosen one)."""
    from eggnog.kernels.core import backend

    chosen, backend._selected = backend._selected, None
    try:
        return CliRunner().invoke(load_script("train_es.py").app, [str(a) for a in args], env=QUIET)
    finally:
        backend._selected = chosen


def stderr_lines(result):
    return [line for line in result.stderr.splitlines() if line.strip()]


def test_a_missing_package_costs_one_line_and_never_the_run(tmp_path, corpus, monkeypatch):
    monkeypatch.setitem(sys.modules, "tensorboard", None)  # what an import of a package not installed meets
    run = tmp_path / "run"
    result = invoke(["--run-dir", run, "--data", corpus, *ES, "--no-plots", "--log", "tensorboard"])
    assert result.exit_code == 0, result.output
    assert stderr_lines(result) == ["note: tensorboard is not installed: --log tensorboard is off; metrics.jsonl has "
                                    "every line (pip install 'eggnog[tensorboard]')"]
    assert [r["step"] for r in read_jsonl(run / "metrics.jsonl")] == [1, 2, 3, 4] and not (run / "tb").exists()


class Raising:
    """A logger whose every metrics line raises (installed or not, as the real one is called)."""

    name = "tensorboard"

    def __init__(self, directory):
        pass

    def config(self, config):
        pass

    def line(self, *args):
        raise RuntimeError("the disk of the event files is gone")

    def close(self):
        pass


def test_a_logger_that_raises_costs_one_line_and_never_the_run(tmp_path, corpus, monkeypatch):
    monkeypatch.setattr(loggers, "TensorBoardLog", Raising)
    run = tmp_path / "run"
    result = invoke(["--run-dir", run, "--data", corpus, *ES, "--no-plots", "--log", "tensorboard"])
    assert result.exit_code == 0, result.output
    [warning] = stderr_lines(result)
    assert warning.startswith("warning: tensorboard failed logging a metrics line (RuntimeError: the disk")
    assert [r["step"] for r in read_jsonl(run / "metrics.jsonl")] == [1, 2, 3, 4]
    refused = invoke(["--run-dir", tmp_path / "other", *ES, "--log", "wandb,mlflow"])
    assert refused.exit_code == 2 and stderr_lines(refused) == [
        "error: --log: unknown logger 'mlflow'; choose wandb, tensorboard, wandb,tensorboard or none"]
    assert not (tmp_path / "other").exists()


GOSSIP = ["--dim", "16", "--depth", "1", "--chunk-size", "8", "--context-chunks", "2", "--batch-size", "2",
          "--val-rows", "4", "--val-tokens", "16", "--steps", "3", "--validate-every", "3", "--checkpoint-every",
          "20", "--population-every", "1", "--gossip-mixing-rate", "0.5", "--backend", "cpu", "--no-plots"]


@pytest.mark.skipif(MPIEXEC is None, reason="no mpiexec")
def test_each_gossip_island_logs_its_own_lines_under_mpiexec(tmp_path, corpus):
    pytest.importorskip("tensorboard")
    run = tmp_path / "run"
    env = dict(os.environ, PYTHONPATH=ROOT, NUMBA_ENABLE_CUDASIM="0", NUMBA_NUM_THREADS="1", **QUIET)
    job = subprocess.run([MPIEXEC, "-n", "2", sys.executable, f"{ROOT}/bin/train_gossip.py", *GOSSIP, "--data", corpus,
                          "--run-dir", run, "--log", "tensorboard"], capture_output=True, text=True, env=env,
                         cwd=tmp_path, timeout=120)
    assert job.returncode == 0, job.stdout + job.stderr
    for island in ("rank-00", "rank-01"):
        events = accumulated(run / "tb" / island)
        assert scalars(events, "train_bpb") == logged(run, "train_bpb", f"{island}/metrics.jsonl")
        assert [s for s, _ in scalars(events, "train_bpb")] == [1, 2, 3]
        assert [s for s, _ in scalars(events, "val_bpb")] == [3]
    population = accumulated(run / "tb")  # rank 0's summaries, against the round
    rounds = [r["round"] for r in read_jsonl(run / "metrics.jsonl")]
    assert [e.step for e in population.Scalars("tournaments")] == rounds and len(rounds) >= 3
