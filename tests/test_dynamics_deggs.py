"""bench/dynamics/deggs.py without a GPU: the data it writes reads back through eggnog's d-eggs reader,
d-eggs' coordinator.log parses into a curve, the verdict, --prepare-only against a stand-in checkout and
compiler, and bad inputs (or no GPU) exit 2 with one sentence and nothing written. With
EGGNOG_DEGGS=<a d-eggs checkout>: its real coordinator, built with g++, runs a few steps against a
stand-in worker speaking its protocol, and (with nvcc) its worker builds for sm_90."""

import json
import os
import shutil
import socket
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pytest

from bench.dynamics.deggs import deggs_curve, parse_coordinator_log, port_free, result_row, verdict
from bench.dynamics.deggs_build import VOCAB, build, build_plan, deggs_folder, sources_digest, write_deggs_data
from tests.helpers import ROOT, assert_user_error, run_bench

REAL_DEGGS = os.environ.get("EGGNOG_DEGGS")
MAKEFILE = "CFLAGS = -O3 -Iinclude\nNVCCFLAGS = -O3 -Iinclude -arch=sm_86 -lcublas -rdc=true\n"
# a stand-in nvcc: prints a release, "compiles" by writing an executable at -o (FAIL: exits 1)
FAKE_NVCC = """#!/bin/sh
if [ "$1" = "--version" ]; then echo "Cuda compilation tools, release 13.0, V13.0.88"; exit 0; fi
FAIL
while [ $# -gt 0 ]; do if [ "$1" = "-o" ]; then printf '#!/bin/sh\\n' > "$2"; chmod +x "$2"; fi; shift; done
"""


def bench(tmp_path, *args, env=None):
    return run_bench("dynamics.deggs", tmp_path, *args, env=env)


def fake_checkout(tmp_path):
    """A folder laid out as d-eggs (its Makefile's flag lines, the files the bench looks for)."""
    folder = tmp_path / "egg.c" / "d-eggs"
    for name in ("src/worker.cu", "src/kernels.cu", "include/config.h", "include/protocol.h"):
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / name).write_text("// stand-in\n")
    (folder / "src/coordinator.cpp").write_text("int main() { return 0; }\n")
    (folder / "Makefile").write_text(MAKEFILE)
    return folder


def fake_nvcc(tmp_path, fail=False):
    path = tmp_path / "nvcc"
    path.write_text(FAKE_NVCC.replace("FAIL", 'echo "src/worker.cu(1): error: stand-in failure" >&2; exit 1'
                                      if fail else ""))
    path.chmod(0o755)
    return path


def test_data_round_trips_through_eggnogs_deggs_reader(tmp_path):
    from eggnog.corpus.deggs_tokens import open_deggs, read_decoding

    stream = np.concatenate([np.arange(256, dtype=np.uint8), np.frombuffer(b"def f(x):\n    return x\n" * 40,
                                                                            np.uint8)])
    info = write_deggs_data(stream, tmp_path / "data")
    assert info["tokens"] == stream.size and info["vocab"] == VOCAB == 8192
    raw = (tmp_path / "data" / "input.bin").read_bytes()
    assert len(raw) == 4 * stream.size and raw[4:8] == b"\x01\x00\x00\x00"  # little-endian uint32 tokens
    corpus = open_deggs(tmp_path / "data", 0.05, VOCAB)
    assert np.array_equal(np.concatenate([corpus.train, corpus.val]), stream)
    assert corpus.decode(np.concatenate([corpus.train, corpus.val])) == stream.tobytes()
    decoding = read_decoding(tmp_path / "data" / "decoding.bin")
    assert decoding[:256] == [bytes([t]) for t in range(256)] and set(decoding[256:]) == {b""}
    assert sorted(p.name for p in (tmp_path / "data").iterdir()) == ["decoding.bin", "input.bin"]


# as include/utils/log.h writes it: egg_log_init's block, then egg_log_record's "%ld,%.4f,%.4f,%llu,%.6f"
SAMPLE_LOG = """=== Training Run ===
Run Start:       2026-11-26T02:00:00
Hardware:        0 GPUs, 0.00 MB VRAM/GPU
Model Config:    Hidden=256, Head=64, Layers=4, SeqLen=64
                 Vocab=8192, Heads=4, PopSize=327680, SoftmaxScaleBit=18
Noise Config:    HostGaussian=0, DeviceGaussian=0, HostMask=15, DeviceMask=15
Quant Config:    FixedPoint=4, SigmaShift=3, SigmaShiftVec=4
Shift Config:    Attn=8, QKV=6, Out=9, Logit=8, MLP_Up=8, MLP_Dn=10
Optimizer:       Adam(B1=0.900, B2=0.950, Eps=1.0e-08, WD=0.0100)
Misc:            SoftmaxExpScale=6.00
----------------------------------------------------------------
Step,RelTime,Loss,Updates,LR
0,31.2000,9.9000,0,0.500000
"""


def test_coordinator_log_parses_into_the_last_runs_curve():
    second = SAMPLE_LOG.replace("0,31.2000,9.9000,0,0.500000\n", "0,12.5021,7.1234,0,0.500000\n"
                                "1,30.0113,7.0456,204871,0.500000\n2,47.8,7.0")  # torn last line
    text = SAMPLE_LOG + "\n" + second
    assert parse_coordinator_log(text) == [(0, 12.5021, 7.1234, 0, 0.5), (1, 30.0113, 7.0456, 204871, 0.5)]
    assert parse_coordinator_log(SAMPLE_LOG.split("Step,")[0]) == []
    assert parse_coordinator_log("") == []


def test_verdict_and_row():
    assert verdict(5.1, 5.0, 0.05) == "match"
    assert verdict(4.0, 5.0, 0.05) == "eggnog better"
    assert verdict(6.0, 5.0, 0.05) == "d-eggs better"
    assert verdict(None, 5.0, 0.05) == "not compared"
    theirs = {"step": list(range(7)), "step_s": [60.0] + [10.0] * 6, "proxy": [9, 8, 7, 6, 5, 4, 3]}
    ours = {"step": list(range(7)), "step_s": [30.0] + [5.0] * 6, "proxy": [9, 8, 7, 6, 5, 4, 3.5],
            "bits_per_token": [8.0] * 7, "val_bits_per_token": 8.0}
    row = result_row(7, theirs, ours, 0.05)
    assert row["deggs_proxy"] == 5.0 and row["eggnog_proxy"] == 5.1 and row["verdict"] == "match"
    assert row["deggs_s_per_step"] == 10.0 and row["eggnog_s_per_step"] == 5.0
    failed = result_row(7, "its worker stopped after 0 steps: No input.bin", ours, 0.05)
    assert failed["verdict"] == "not compared" and failed["curves"]["deggs"] is None
    assert failed["deggs_why_not"].endswith("No input.bin")


def test_a_run_writes_both_curves_json_and_png(tmp_path, monkeypatch):
    """The run's report with both sides stood in (they need a GPU): what the JSON holds."""
    import bench.dynamics.deggs as bench_module
    import bench.report

    if shutil.which("g++") is None:
        pytest.skip("no g++")
    seen = {}

    def theirs(build_dir, data_dir, run_dir, steps, timeout):
        seen["deggs"] = data_dir / "input.bin"
        return {"step": list(range(steps)), "seconds": [9.0 * (s + 1) for s in range(steps)], "step_s": [9.0] * steps,
                "proxy": [8.0 - 0.1 * s for s in range(steps)], "updates": [0] * steps, "lr": [0.5] * steps}

    def ours(steps, data_dir, run_dir, timeout, mode):
        seen["eggnog"] = data_dir / "input.bin"
        assert os.access(run_dir.parent.parent / "build" / "worker", os.X_OK)  # built before either side runs
        return {"step": list(range(steps)), "seconds": [4.0 * (s + 1) for s in range(steps)], "step_s": [4.0] * steps,
                "proxy": [8.0 - 0.2 * s for s in range(steps)], "bits_per_token": [7.5] * steps,
                "val_bits_per_token": 7.4}

    monkeypatch.setattr(bench_module, "gpu_name", lambda: "NVIDIA H100 80GB HBM3")
    monkeypatch.setattr(bench_module, "port_free", lambda port=12345: True)
    monkeypatch.setattr(bench_module, "deggs_curve", theirs)
    monkeypatch.setattr(bench_module, "eggnog_curve", ours)
    monkeypatch.setattr(bench.report, "RESULTS", tmp_path / "results")
    folder = fake_checkout(tmp_path)
    (tmp_path / "data").mkdir()
    write_deggs_data(np.frombuffer(b"abc" * 100, np.uint8), tmp_path / "data")
    bench_module.main(deggs=str(folder), steps=8, arch="sm_90", data=str(tmp_path / "data"), build_dir=None,
                      nvcc=str(fake_nvcc(tmp_path)), prepare_only=False, eggnog_mode="sync", tolerance=0.05,
                      timeout=60)
    assert seen["deggs"] == seen["eggnog"] == tmp_path / "data" / "input.bin"  # the very same file
    [path] = (tmp_path / "results").glob("dynamics_deggs-nvidia-h100-80gb-hbm3-*.json")
    assert path.with_suffix(".png").stat().st_size > 0
    text = path.read_text()
    assert str(tmp_path) not in text and tempfile.gettempdir() not in text
    record = json.loads(text)
    [row] = record["rows"]
    assert row["deggs_proxy"] == pytest.approx(7.5) and row["eggnog_proxy"] == pytest.approx(7.0)
    assert row["verdict"] == "eggnog better" and row["difference"] == pytest.approx(-0.5)
    assert row["deggs_s_per_step"] == 9.0 and row["eggnog_s_per_step"] == 4.0
    assert record["settings"]["population"] == 327680 and record["data"]["tokens"] == 300
    assert record["build"]["commands"]["worker"].startswith("nvcc ")
    settings = record["settings"]
    assert settings["eggnog_mode"] == "sync" and any("sync mode" in d for d in settings["differences"])


def test_eggnog_commands():
    from bench.dynamics.deggs import eggnog_command

    sync = eggnog_command(5, Path("data"), Path("run"), "sync")
    assert sync[1].endswith("train_es.py") and sync[2:4] == ["--preset", "d-eggs"] and "--mode" not in sync
    assert sync[sync.index("--data") + 1] == "data" and sync[sync.index("--steps") + 1] == "5"
    coordinated = eggnog_command(5, Path("data"), Path("run"), "coordinator")
    assert coordinated[1:3] == ["-n", "2"] and coordinated[3:] == sync + ["--mode", "coordinator",
                                                                         "--chunk-mean-filter", "--adaptive-threshold"]


def test_prepare_only_builds_and_writes_the_data_it_will_train_on(tmp_path):
    from eggnog.corpus.prepare import prepare
    from eggnog.corpus.reader import open_corpus

    if shutil.which("g++") is None:
        pytest.skip("no g++")
    folder = fake_checkout(tmp_path)
    (tmp_path / "text.py").write_text("def f(x):\n    return x + 1\n" * 50)
    prepare([str(tmp_path / "text.py")], tmp_path / "corpus.bin", val_fraction=0.1)
    corpus = open_corpus(tmp_path / "corpus.bin")
    stream = np.concatenate([np.asarray(corpus.train), np.asarray(corpus.val)])
    args = ["--prepare-only", "--build-dir", tmp_path / "build", "--nvcc", fake_nvcc(tmp_path),
            "--data", tmp_path / "corpus.bin", "--arch", "sm_80"]
    result = bench(tmp_path, "--deggs", folder.parent, *args)
    assert result.returncode == 0, result.stderr
    record = json.loads((tmp_path / "build" / "build.json").read_text())
    worker = record["commands"]["worker"]
    assert "-arch=sm_80" in worker and "-lcublas" not in worker and "-include BUILD/cuda13_compat.h" in worker
    assert record["commands"]["coordinator"] == "g++ -O3 -Iinclude -o BUILD/coordinator src/coordinator.cpp -lpthread"
    assert record["sources_sha256"] == sources_digest(folder)[0]
    tokens = np.fromfile(tmp_path / "build" / "data" / "input.bin", "<u4")
    assert np.array_equal(tokens, stream)
    assert "--build-dir" in result.stdout and "--data" in result.stdout and "--arch sm_80" in result.stdout
    assert not (tmp_path / "results").exists()
    again = bench(tmp_path, "--deggs", folder, *args)
    assert again.returncode == 0 and "reusing" in again.stdout, again.stderr


def test_a_failing_compiler_leaves_nothing_behind(tmp_path):
    if shutil.which("g++") is None:
        pytest.skip("no g++")
    folder = fake_checkout(tmp_path)
    result = bench(tmp_path, "--deggs", folder, "--prepare-only", "--build-dir", tmp_path / "build",
                   "--nvcc", fake_nvcc(tmp_path, fail=True))
    assert_user_error(result, "building d-eggs' worker failed", "stand-in failure")
    assert not (tmp_path / "build").exists()


@pytest.mark.parametrize("args, message", [
    (["--deggs", "{missing}"], "is not a folder"),
    (["--deggs", "{empty}"], "is not a d-eggs checkout"),
    (["--deggs", "{checkout}", "--steps", "0"], "--steps"),
    (["--deggs", "{checkout}", "--arch", "hopper"], "--arch"),
    (["--deggs", "{checkout}", "--data", "{missing}"], "--data"),
    (["--deggs", "{checkout}", "--data", "{raw}"], "has no metadata file"),
    (["--deggs", "{checkout}", "--build-dir", "{root}/build-deggs"], "outside the project"),
    (["--deggs", "{checkout}", "--build-dir", "{checkout}/build"], "outside the project"),
    (["--deggs", "{checkout}", "--build-dir", "{occupied}"], "holds other files"),
    (["--deggs", "{checkout}", "--nvcc", "{missing}"], "is not an executable"),
])
def test_bad_input_exits_2_with_one_sentence_and_nothing_written(tmp_path, args, message):
    names = {"checkout": fake_checkout(tmp_path), "missing": tmp_path / "missing", "empty": tmp_path / "empty",
             "occupied": tmp_path / "occupied", "raw": tmp_path / "raw.bin", "root": ROOT}
    names["empty"].mkdir()
    names["occupied"].mkdir()
    (names["occupied"] / "notes.txt").write_text("mine\n")
    names["raw"].write_bytes(b"plain bytes")
    before = sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*"))
    assert_user_error(bench(tmp_path, *(a.format(**names) for a in args), "--prepare-only"), message)
    assert sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*")) == before
    assert not Path(ROOT, "build-deggs").exists()


def test_without_nvcc_it_says_so(tmp_path):
    if any(os.access(p, os.X_OK) for p in ("/usr/local/cuda/bin/nvcc",)):
        pytest.skip("/usr/local/cuda has an nvcc, which the bench finds without PATH")
    folder = fake_checkout(tmp_path)
    result = bench(tmp_path, "--deggs", folder, "--prepare-only", env={"PATH": str(tmp_path / "nothing"),
                                                                         "CUDA_HOME": "", "CUDA_PATH": ""})
    assert_user_error(result, "nvcc was not found")


def test_without_a_gpu_it_says_so_and_writes_nothing(tmp_path):
    from bench.gpu.run import probe_gpu

    if shutil.which("g++") is None or probe_gpu() is not None:
        pytest.skip("needs g++ and no GPU")
    folder = fake_checkout(tmp_path)
    result = bench(tmp_path, "--deggs", folder, "--steps", "3", "--build-dir", tmp_path / "build",
                   "--nvcc", fake_nvcc(tmp_path))
    assert_user_error(result, "no CUDA GPU is usable here", "--prepare-only")
    assert not (tmp_path / "build").exists() and not (tmp_path / "results").exists()


# ---- against a real d-eggs checkout ---------------------------------------------------------------
real = pytest.mark.skipif(not REAL_DEGGS, reason="EGGNOG_DEGGS names no d-eggs checkout")

# speaks d-eggs' protocol (include/protocol.h, big-endian): takes every chunk it is given and reports
# a loss sum whose proxy is 10 - step / 2, and an all-zero packed fitness
STAND_IN_WORKER = """#!PYTHON
import socket, struct, time
HEADER = struct.Struct(">IBBI")
def send(s, op, payload):
    s.sendall(HEADER.pack(0x4A4F4253, 1, op, len(payload)) + payload)
def recv(s, n):
    data = b""
    while len(data) < n:
        more = s.recv(n - len(data))
        if not more:
            raise SystemExit(0)
        data += more
    return data
s = socket.create_connection(("127.0.0.1", 12345))
step, seed = 0, 42
while True:
    send(s, 0, struct.pack(">QQQ", seed, step, 0))
    _, _, op, size = HEADER.unpack(recv(s, 10))
    payload = recv(s, size)
    seed, last_step, position, model_size = struct.unpack(">QQQI", payload[:28])
    if model_size:
        step = last_step
    elif position == 2**64 - 1:
        time.sleep(0.02)
    else:
        loss = int((10 - step / 2) * 40960 * 64 * 16)
        send(s, 1, struct.pack(">QQQQqI", seed, step, position, 0, loss, 4096) + bytes(4096))
"""


@real
def test_real_coordinator_runs_steps_with_a_stand_in_worker(tmp_path):
    if shutil.which("g++") is None or not port_free():
        pytest.skip("needs g++ and TCP port 12345 free")
    folder = deggs_folder(REAL_DEGGS)
    plan = build_plan(folder, "sm_90", (13, 0))
    build(folder, tmp_path / "build", {"coordinator": plan["coordinator"]}, {}, "nvcc")
    worker = tmp_path / "build" / "worker"
    worker.write_text(STAND_IN_WORKER.replace("PYTHON", sys.executable))
    worker.chmod(0o755)
    (tmp_path / "data").mkdir()
    begin = time.monotonic()
    curve = deggs_curve(tmp_path / "build", tmp_path / "data", tmp_path / "run", 3, 60)
    assert isinstance(curve, dict), curve
    assert curve["step"] == [0, 1, 2] and curve["proxy"] == [10.0, 9.5, 9.0] and curve["lr"] == [0.5] * 3
    assert len(curve["step_s"]) == 3 and all(s > 0 for s in curve["step_s"])
    assert time.monotonic() - begin < 50
    assert "Tracking initialized" not in (tmp_path / "run" / "coordinator.out").read_text()
    with socket.socket() as s:  # both processes are gone
        assert s.connect_ex(("127.0.0.1", 12345)) != 0


@real
def test_real_worker_builds_for_sm_90(tmp_path):
    if shutil.which("nvcc") is None:
        pytest.skip("no nvcc")
    result = bench(tmp_path, "--deggs", REAL_DEGGS, "--prepare-only", "--build-dir", tmp_path / "build")
    assert result.returncode == 0, result.stderr
    assert os.access(tmp_path / "build" / "worker", os.X_OK) and "built d-eggs" in result.stdout
