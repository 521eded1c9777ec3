"""The goals of the static report (bench/static_report/goals.py, steps.py) without the compiler: a step
traced at its sizes without running a kernel, the step's time from its launches' (the longer of the
device's and the host's time between host waits), the signature a traced launch takes, the verdicts, and
the refusals of the tracer. The predictions themselves come from model.py (tests/test_static_model.py)."""

import pytest
from numba import types

from bench.static_report import goals, steps
from bench.static_report.model import fits
from eggnog.runtime.errors import BadInput


def test_a_mingru_step_is_traced_with_its_sizes_and_one_host_wait():
    trace = steps.traced("mingru", "16x1:2x8:fp32")
    kernels = {launch["kernel"].rsplit(".", 1)[-1] for launch in trace["launches"]}
    assert {"matmul_cuda", "forward_scan_cuda", "backward_scan_cuda", "adamw_step_cuda"} <= kernels
    assert trace["counts"]["allocations"] == 0 and trace["counts"]["host_waits"] == 1
    assert trace["sequence"].count(-1) == 1 and len(trace["sequence"]) == trace["counts"]["launches"] + 1
    embedding = next(x for x in trace["launches"] if x["kernel"].endswith(".embedding_cuda"))
    assert {"shape": [256, 16], "dtype": "float32"} in embedding["args"]
    bf16 = steps.traced("mingru", "16x1:2x8:bf16")
    assert any(x["kernel"].endswith("matmul_bf16_cuda") for x in bf16["launches"])


@pytest.mark.parametrize("kind,spec,message", [
    ("mingru", "16x1:2x8", "DIMxDEPTH"), ("mingru", "16:2x8:fp32", "DIMxDEPTH"),
    ("mingru", "16x1:2x8:fp16", "unknown precision"), ("table1", "2M:bptt", "SIZE:METHOD"),
    ("table1", "10M:adam", "SIZE:METHOD"), ("lstm", "10M", "unknown step")])
def test_the_tracer_refuses_what_it_cannot_read(kind, spec, message):
    with pytest.raises(BadInput, match=message):
        steps.traced(kind, spec)


def test_the_tracer_refuses_a_wrong_number_of_arguments(capsys):
    with pytest.raises(SystemExit) as stop:
        steps.main(["mingru"])
    assert stop.value.code == 2 and "two arguments" in capsys.readouterr().err


def test_a_step_is_the_longer_of_device_and_host_between_waits(monkeypatch):
    device = {"a": 1e-3, "b": 1e-5}
    monkeypatch.setattr(goals, "launch_seconds", lambda launch, code, constants=None: device[launch["kernel"]])
    a, b = {"kernel": "a", "args": []}, {"kernel": "b", "args": []}
    # one stretch of a device-bound launch and 3 host-bound ones, then a wait, then 2 host-bound launches
    (timed,) = goals.step_seconds([{"launches": [a, b], "sequence": [0, 1, 1, 1, -1, 1, 1]}], code=None)
    host = goals.HOST_S_PER_LAUNCH
    expected = max(1e-3 + 3e-5, 4 * host) + goals.WAIT_S + max(2e-5, 2 * host) + goals.WAIT_S
    assert timed["seconds"] == pytest.approx(expected)
    assert (timed["launches"], timed["host_waits"]) == (6, 1)
    assert timed["kernels"] == [{"kernel": "a", "launches": 1, "seconds": 1e-3},
                                {"kernel": "b", "launches": 5, "seconds": 5e-5}]


def test_a_traced_launch_takes_the_signature_its_arrays_and_scalars_fit():
    f32_2d, i8_1d = types.float32[:, ::1], types.int8[::1]
    args = [{"shape": [4, 2], "dtype": "float32"}, 3]
    assert fits((f32_2d, types.int32), args)
    assert not fits((i8_1d, types.int32), args)
    assert not fits((types.float32[::1], types.int32), args)
    assert not fits((f32_2d, f32_2d), args)
    assert not fits((f32_2d,), args)


def test_verdicts_are_speed_over_the_goal():
    faster = {"peer": 3.0, "goal_ratio": 0.6, "higher_is_better": False}  # within 5 ms: 60% of a 3 ms peer
    assert goals.verdict(faster, 2.5) == pytest.approx(2.0)
    bandwidth = {"peer": 1000.0, "goal_ratio": 0.7, "higher_is_better": True}
    assert goals.verdict(bandwidth, 350.0) == pytest.approx(0.5)
    assert goals.verdict({**faster, "peer": None}, 1.0) is None



def test_tracing_gives_the_simulated_device_its_own_sm_count_back():
    from eggnog.kernels.rnn.lstm_sequence_cuda import coresident_blocks

    steps.traced("mingru", "16x1:2x8:fp32")
    assert coresident_blocks() == 1  # later simulated cooperative launches hold one block again
