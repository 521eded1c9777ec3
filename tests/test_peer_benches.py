"""The CPU side-by-side benches against PyTorch peers (bench/throughput/mingru_side_by_side.py against
minGRU-pytorch, bench/zorn_paper/table1_side_by_side.py against a plain PyTorch CD-RGE loop) where the peer is
absent or broken, and their refusals of bad flags; and, with no GPU, the commands that put each peer on
the GPU beside eggnog (torch's `--device cuda`, nano-egg's JAX `--platform cuda`)."""

import json

import pytest

from tests.helpers import assert_user_error, run_bench


def bench(module, tmp_path, *args):
    return run_bench(module, tmp_path, *args)


@pytest.mark.parametrize("peer", ["absent", "broken"])
def test_mingru_bench_reports_eggnog_alone_without_its_peer(tmp_path, peer):
    args = ["--configs", "16x1:2x8,8x2:1x4", "--steps", "1", "--warmup", "0"]
    if peer == "broken":  # a Python without minGRU-pytorch
        fake = tmp_path / "python"
        fake.write_text("#!/bin/sh\necho 'No module named minGRU_pytorch' >&2\nexit 1\n")
        fake.chmod(0o755)
        args += ["--torch-python", str(fake)]
    result = bench("throughput.mingru_side_by_side", tmp_path, *args)
    assert result.returncode == 0, result.stderr
    assert ("no --torch-python given" if peer == "absent" else "No module named minGRU_pytorch") in result.stdout
    [path] = (tmp_path / "results").glob("mingru_side_by_side-cpu-*.json")
    rows = json.loads(path.read_text())["rows"]
    assert [(r["model"], r["batch"], r["seq"]) for r in rows] == [("16x1", 2, 8), ("8x2", 1, 4)]
    assert all(r["eggnog_s_per_step"] > 0 and r["speedup"] is None for r in rows)


@pytest.mark.parametrize("script, args, message", [
    ("throughput.mingru_side_by_side", ["--configs", "64x2"], "dim x depth : batch x seq"),
    ("throughput.mingru_side_by_side", ["--configs", "64x0:8x8"], "dim x depth : batch x seq"),
    ("throughput.mingru_side_by_side", ["--steps", "0"], "--steps must be positive"),
    ("throughput.mingru_side_by_side", ["--torch-python", "/nonexistent/python"], "is not an executable Python"),
    ("zorn_paper.table1_side_by_side", ["--sizes", "5M"], "choose from 100k"),
    ("zorn_paper.table1_side_by_side", ["--probes", "7"], "96 or 512"),
    ("zorn_paper.table1_side_by_side", ["--torch-python", "/nonexistent/python"], "is not an executable Python"),
    ("scale.es_modes", ["--ranks", "1"], "--ranks must be at least 2"),
    ("scale.es_modes", ["--steps", "3", "--warmup", "3"], "more than --warmup"),
])
def test_bad_flags_exit_2_with_one_sentence(tmp_path, script, args, message):
    result = bench(script, tmp_path, *args)
    assert_user_error(result, message)
    assert not (tmp_path / "results").exists()


def recording_python(tmp_path, reply):
    """An executable standing in for a peer's Python: it writes its arguments to args.txt and prints `reply`."""
    fake = tmp_path / "peer-python"
    fake.write_text(f"#!/bin/sh\necho \"$@\" > {tmp_path / 'args.txt'}\necho '{json.dumps(reply)}'\n")
    fake.chmod(0o755)
    return str(fake)


def test_table1_runs_its_torch_peer_on_the_cells_device(tmp_path):
    from bench.zorn_paper import table1
    from bench.zorn_paper.table1_grid import LR, SIZES

    fake = recording_python(tmp_path, {"s_per_step": 0.5, "loss_first_bits": 7.0, "loss_after_bits": 6.0})
    args = {"steps": 5, "warmup": 1, "batch_size": 64, "task": "char_lm"}
    columns = table1.peer_columns(fake, "10M", "bptt", args, "cuda", 60, ours=0.25)
    assert columns == {"torch_s_per_step": 0.5, "speed_vs_torch": 2.0, "torch_loss_first_bits": 7.0,
                       "torch_loss_after_bits": 6.0}
    sent = (tmp_path / "args.txt").read_text().split()
    hidden, heads = SIZES["10M"]
    for flag, value in (("--device", "cuda"), ("--method", "bptt"), ("--hidden", str(hidden)),
                        ("--heads", str(heads)), ("--batch", "64"), ("--lr", str(LR[0]["10M"]))):
        assert sent[sent.index(flag) + 1] == value
    assert table1.peer_columns(None, "10M", "bptt", args, "cuda", 60, 0.25) == {
        "torch_why_not": "not run: no --torch-python given"}


def test_the_mingru_peer_runs_on_the_gpu_beside_a_cuda_step(tmp_path):
    from bench.throughput import mingru_side_by_side

    fake = recording_python(tmp_path, {"s_per_step": 0.3})
    assert mingru_side_by_side.torch_seconds(fake, 16, 1, 2, 8, 1, 0, 60, "cuda") == {"s_per_step": 0.3}
    sent = (tmp_path / "args.txt").read_text().split()
    assert sent[sent.index("--device") + 1] == "cuda" and sent[sent.index("--dim") + 1] == "16"


def test_nano_egg_runs_on_jax_gpu_beside_a_cuda_evaluation(tmp_path):
    from bench.throughput import nano_egg_side_by_side

    fake = recording_python(tmp_path, {"modes": {}})
    got = nano_egg_side_by_side.nano_side(fake, str(tmp_path), 6, 256, 32768, 100, 3, 60, "cuda")
    assert got["modes"] == {}
    sent = (tmp_path / "args.txt").read_text().split()
    assert sent[sent.index("--platform") + 1] == "cuda" and sent[sent.index("--population") + 1] == "32768"
