"""The static model's pieces on hand-written SASS (no compiler, no GPU): the integer meaning of
instructions, loop trip counts from a launch's parameters, branch weights, the launch's constant bank,
the calibration's measurement lookup, its fit on the kept rows (keep.py; it reproduces the fit of 2026-11-27),
probes, held-out errors and prediction ranges (error_bars.py). The model against real kernels and
measurements is tests/test_sass_report.py::test_static_model_predicts_every_measured_row_within_2x."""

import json
import math

import numpy as np
import pytest
from numba import types

from bench.static_report import calibration, error_bars, keep, machine, parse
from bench.static_report.model import constant_bank, param_sizes, walk_block
from bench.static_report.timing import Timing
from eggnog.runtime.errors import BadInput

HEADER = "\tcode for sm_90\n\t\tFunction : k\n"
PTX = ".visible .entry k(\n\t.param .u64 k_param_0\n)\n{\n}\n"
TIMING = Timing(700, 5.5e12)


def listing(*lines):
    return HEADER + "".join(f"        /*{16 * k:04x}*/  {text} ;\n" for k, text in enumerate(lines))


def run(lines, **registers):
    """A 32-lane warp after the instructions, registers given as lane values."""
    w = machine.Warps(b"\0" * 0x300, {"SR_TID.X": np.arange(32, dtype=np.uint64)}, [], 32)
    for name, value in registers.items():
        w.r[name] = np.full(32, value, np.uint64) if np.isscalar(value) else np.asarray(value, np.uint64)
    for ins in next(iter(parse.parse_sass(listing(*lines)).values())):
        machine.execute(ins, w)
    return w


def test_adds_carry_into_the_high_half_and_compares_64_bits():
    w = run(["IADD3 R4, P0, R2, 0x1, RZ", "IADD3.X R5, RZ, R3, RZ, P0, !PT",
             "ISETP.GT.U32.AND P1, PT, R4, 0x5, PT", "ISETP.GT.AND.EX P1, PT, R5, RZ, PT, P1"],
            R2=0xFFFFFFFF, R3=7)
    assert (int(w.r["R4"][0]), int(w.r["R5"][0])) == (0, 8)
    assert w.p["P1"].all()  # 8 << 32 > 5


def test_wide_multiply_funnel_shift_lop3_and_lea():
    w = run(["IMAD.WIDE.U32 R4, R2, 0x10, RZ", "SHF.R.U64 R6, R4, 0x2, R5", "LOP3.LUT R7, R2, 0xff, RZ, 0xc0, !PT",
             "LEA.HI R8, R2, R3, RZ, 0x4", "SHF.R.S32.HI R9, RZ, 0x1f, R10"], R2=0x12345678, R3=1, R10=0x80000000)
    assert int(w.r["R4"][0]) | int(w.r["R5"][0]) << 32 == 0x12345678 * 16
    assert int(w.r["R6"][0]) == (0x12345678 * 16 >> 2) & 0xFFFFFFFF
    assert int(w.r["R7"][0]) == 0x78 and int(w.r["R8"][0]) == 1 + (0x12345678 >> 28)
    assert int(w.r["R9"][0]) == 0xFFFFFFFF


def test_a_predicated_write_is_known_only_in_the_lanes_that_ran():
    w = run(["ISETP.EQ.AND P0, PT, R0, RZ, PT", "@P0 IMAD.MOV.U32 R3, RZ, RZ, 0x80"], R0=np.arange(32))
    assert w.r["R3"][0] == 0x80 and w.known["R3"][0] and not w.known["R3"][1:].any()
    assert w.pred(machine.Operand("P0")) is not None


def counted(lines, n, **launch):
    """Block 0's tally of a one-warp launch whose parameter 0 is `n`."""
    instructions = next(iter(parse.parse_sass(listing(*lines)).values()))
    return walk_block(instructions, PTX, (types.int64,), {"grid": 1, "block": 32, "args": [n], **launch}, TIMING)


LOOP = ["LDC R2, c[0x0][0x210]", "IMAD.MOV.U32 R3, RZ, RZ, RZ", "IADD3 R3, R3, 0x1, RZ", "FFMA R5, R5, R5, R5",
        "ISETP.GE.AND P0, PT, R3, R2, PT", "@!P0 BRA 0x20", "EXIT", "BRA 0x70"]


@pytest.mark.parametrize("n", [1, 7, 100])
def test_a_loop_runs_as_often_as_the_launch_parameter_says(n):
    tally = counted(LOOP, n)
    assert tally.classes["fp32"] == n and tally.issued[0] == 2 + 4 * n + 1 and not tally.unknown_loops


def test_a_spilled_loop_bound_stays_known_and_each_lane_spills_its_own():
    """A bound stored to local memory (a register spill) and reloaded in the loop still gives the trip
    count; local memory is per thread: lanes storing their own index at one address read it back."""
    spilled = ["LDC R1, c[0x0][0x28]", "LDC R2, c[0x0][0x210]", "STL [R1+0x8], R2", "IMAD.MOV.U32 R2, RZ, RZ, RZ",
               "IMAD.MOV.U32 R3, RZ, RZ, RZ", "IADD3 R3, R3, 0x1, RZ", "FFMA R5, R5, R5, R5", "LDL R4, [R1+0x8]",
               "ISETP.GE.AND P0, PT, R3, R4, PT", "@!P0 BRA 0x50", "EXIT", "BRA 0xb0"]
    tally = counted(spilled, 9)
    assert tally.classes["fp32"] == 9 and not tally.unknown_loops
    w = run(["S2R R0, SR_TID.X", "STL [R1+0x4], R0", "IMAD.MOV.U32 R0, RZ, RZ, RZ", "LDL R6, [R1+0x4]"], R1=0x100)
    assert (w.r["R6"] == np.arange(32)).all()


def test_the_trip_count_runs_ahead_without_touching_the_walks_spills():
    """Working out the trip count runs the loop's spill stores; the walk itself still starts from the
    counter's value at entry: the first iteration (counter 0) takes the extra FFMA, the others skip it."""
    lines = ["LDC R1, c[0x0][0x28]", "LDC R2, c[0x0][0x210]", "STL [R1+0x8], RZ", "LDL R3, [R1+0x8]",
             "ISETP.NE.AND P2, PT, R3, RZ, PT", "@P2 BRA 0x70", "FFMA R9, R9, R9, R9", "IADD3 R3, R3, 0x1, RZ",
             "STL [R1+0x8], R3", "FFMA R5, R5, R5, R5", "ISETP.GE.AND P0, PT, R3, R2, PT", "@!P0 BRA 0x30", "EXIT",
             "BRA 0xd0"]
    tally = counted(lines, 9)
    assert tally.classes["fp32"] == 9 + 1 and not tally.unknown_loops


def test_a_slot_a_loop_spills_to_is_unknown_after_it():
    """The walk sees one or two iterations of a loop, so a counter it keeps in local memory is not known
    after it: a second loop bounded by that slot is counted as unknown, not by a stale value."""
    lines = ["LDC R1, c[0x0][0x28]", "LDC R2, c[0x0][0x210]", "STL [R1+0x8], RZ", "LDL R3, [R1+0x8]",
             "IADD3 R3, R3, 0x1, RZ", "STL [R1+0x8], R3", "FFMA R5, R5, R5, R5", "ISETP.GE.AND P0, PT, R3, R2, PT",
             "@!P0 BRA 0x30", "LDL R6, [R1+0x8]", "IMAD.MOV.U32 R7, RZ, RZ, RZ", "IADD3 R7, R7, 0x1, RZ",
             "FFMA R8, R8, R8, R8", "ISETP.GE.AND P1, PT, R7, R6, PT", "@!P1 BRA 0xb0", "EXIT", "BRA 0x100"]
    tally = counted(lines, 9)
    assert list(tally.unknown_loops) == [0xb0] and tally.classes["fp32"] >= 9


def test_a_known_branch_that_splits_a_warp_runs_both_sides():
    tally = counted(["S2R R0, SR_TID.X", "ISETP.GE.U32.AND P0, PT, R0, 0x10, PT", "@P0 BRA 0x60",
                     "FFMA R5, R5, R5, R5", "FFMA R5, R5, R5, R5", "BRA 0x70", "FFMA R6, R6, R6, R6", "EXIT"], 0)
    assert tally.classes["fp32"] == 3 and tally.unknown_branches == 0


def test_an_unknown_branch_weighs_each_side_by_one_half():
    tally = counted(["LDC.64 R2, c[0x0][0x210]", "LDG.E R4, desc[UR4][R2.64]", "ISETP.NE.AND P0, PT, R4, RZ, PT",
                     "@P0 BRA 0x70", "FFMA R5, R5, R5, R5", "FFMA R5, R5, R5, R5", "BRA 0x80", "FFMA R6, R6, R6, R6",
                     "EXIT"], 0)
    assert tally.classes["fp32"] == pytest.approx(1.5) and tally.unknown_branches == 1


def test_parameters_sit_at_0x210_at_natural_alignment():
    ptx = ".entry k(\n\t.param .u8 k_param_0,\n\t.param .u64 k_param_1\n)"
    assert param_sizes(ptx) == [1, 8]
    bank = constant_bank(ptx, (types.boolean, types.int64), [True, 5], (2, 1, 1), (32, 1, 1), [0, 0])
    assert bank[0x210] == 1 and int.from_bytes(bank[0x218:0x220], "little") == 5 and bank[0] == 32
    with pytest.raises(ValueError):
        constant_bank(ptx, (types.int64,), [5], (1, 1, 1), (32, 1, 1), [0])


def _result(folder, name, record):
    (folder / name).write_text(json.dumps(record))


def test_the_newest_gpu_measurement_of_a_row_is_used(tmp_path):
    row = {"op": "forward", "shape": "8x8x8"}
    _result(tmp_path, "matmul_throughput-cpu-2026-11-30.json", {"benchmark": "matmul_throughput", "device": "cpu",
                                                              "date": "2026-11-30", "rows": [{**row, "ours_ms": 1}]})
    for name, ms in (("2026-11-27", 4.0), ("2026-11-27-2", 2.0), ("2026-11-26-3", 8.0)):
        _result(tmp_path, f"matmul_throughput-nvidia-h100-{name}.json",
                {"benchmark": "matmul_throughput", "device": "NVIDIA H100", "date": name[:10],
                 "rows": [{**row, "ours_ms": ms}, {"op": "backward", "shape": "8x8x8", "ours_ms": 99}]})
    spec = {"benchmark": "matmul_throughput", "row": row, "ms_per_run": "ours_ms"}
    found = calibration.newest_measurement(spec, 1000, tmp_path)
    assert found["units_per_s"] == pytest.approx(1000 / 2e-3) and found["file"].endswith("2026-11-27-2.json")
    assert calibration.newest_measurement({**spec, "row": {"op": "sideways"}}, 1000, tmp_path) is None


def _synthetic(truth, cases, family="f"):
    """Kept rows (keep.py) measured at `truth`: SM seconds proportional to the latency plus an L2 share."""
    rows = []
    for k, (work, l2_work, hbm) in enumerate(cases):
        table = {f"{l2:.3g}": {str(lat): work * lat / 700 + l2_work * 5.5e12 / l2 for lat in calibration.LATENCIES}
                 for l2 in calibration.L2S}
        sm = work * truth["global_latency_cycles"] / 700 + l2_work * 5.5e12 / truth["l2_bytes_per_s"]
        measured = 1e6 / (max(sm, hbm / truth["hbm_bytes_per_s"]) + truth["host_s_per_call"])
        rows.append({"name": f"row {k}", "family": family if isinstance(family, str) else family[k], "unit": "unit",
                     "units": 1e6, "hbm_bytes": hbm, "sm_seconds": table,
                     "measured": {"units_per_s": measured, "file": f"bench-{k}.json"}})
    return rows


TRUTH = {"global_latency_cycles": 700, "hbm_bytes_per_s": 1.2e12, "host_s_per_call": 5e-4, "l2_bytes_per_s": 4e12}
CASES = ((1.0, 0, 0), (2e-3, 0, 0), (1e-3, 0, 2e9), (1e-3, 0, 3e9), (1e-4, 5e-3, 0))


def test_the_fit_recovers_the_constants_that_made_the_measurements():
    rows = calibration.row_arrays(_synthetic(TRUTH, CASES))
    worst, constants = calibration.fit(rows)
    assert constants == TRUTH and worst < 1e-9
    assert max(map(abs, calibration.errors(rows, {**TRUTH, "global_latency_cycles": 300, "hbm_bytes_per_s": 3e12,
                                                  "host_s_per_call": 0}))) > math.log(2)


def test_between_the_kept_grid_points_sm_seconds_interpolate_in_latency_and_inverse_l2():
    (table, *_), = calibration.row_arrays(_synthetic(TRUTH, [(1.0, 1.0, 0)]))
    # exact for a linear dependence on the latency and on 1 / L2
    assert calibration.sm_seconds(table, [750], [5e12])[0, 0] == pytest.approx(750 / 700 + 5.5 / 5)
    assert calibration.sm_seconds(table, [2000], [1e13])[0, 0] == pytest.approx(1200 / 700 + 5.5 / 7)  # held


def test_the_kept_rows_reproduce_the_2026_11_27_fit():
    """The constants fitted on the eight H100 rows of 2026-11-27 (global latency 700 cycles, HBM 1.2e12 B/s,
    0.5 ms a call) come back from the kept rows, whose kernels have all changed since: at the L2 estimate
    the fit was made with, and with the L2 bandwidth fitted too."""
    kept = keep.kept_rows()
    assert len(kept) >= 8 and {r["measured"]["commit"] for r in kept} == {"f04d3a251652"}
    rows = calibration.row_arrays(kept)
    then = {**calibration.grid(), "l2_bytes_per_s": [5.5e12]}
    three = ("global_latency_cycles", "hbm_bytes_per_s", "host_s_per_call")
    for values in (then, calibration.grid()):
        worst, constants = calibration.fit(rows, values)
        assert {k: constants[k] for k in three} == {"global_latency_cycles": 700, "hbm_bytes_per_s": 1.2e12,
                                                    "host_s_per_call": 5e-4}
    assert calibration.fit(rows)[1] == calibration.CONSTANTS


def test_the_committed_constants_predict_every_kept_row_within_2x():
    kept = keep.kept_rows()
    ratios = [math.exp(e) for e in calibration.errors(calibration.row_arrays(kept), calibration.CONSTANTS)]
    assert kept and all(0.5 <= r <= 2 for r in ratios), dict(zip((r["name"] for r in kept), ratios))


def test_every_kept_row_is_its_committed_measurement_on_the_full_grid():
    kept = keep.kept_rows()
    assert kept
    for row in kept:
        record = json.loads((calibration.MEASURED / row["measured"]["file"]).read_text())
        assert record["commit"] == row["measured"]["commit"] and record["device"] == row["measured"]["device"]
        assert set(row["sm_seconds"]) == {f"{l2:.3g}" for l2 in calibration.L2S}
        assert all(set(t) == {str(lat) for lat in calibration.LATENCIES} for t in row["sm_seconds"].values())
        assert row["walked_at"] and row["family"] and row["units"] > 0


def test_keeping_rows_replaces_a_walk_of_the_same_measurement_and_keeps_the_others(tmp_path, monkeypatch):
    path = tmp_path / "kept.json"
    old = _synthetic(TRUTH, CASES[:2])
    path.write_text(json.dumps({"rows": old}))
    walked = {**old[1], "units": 2e6}
    monkeypatch.setattr(keep, "walked_rows", lambda current_only: [walked])
    monkeypatch.setenv("NUMBA_ENABLE_CUDASIM", "1")  # keep() compiles for the real target: restored after
    (row,) = keep.keep(path=path)
    assert row["walked_at"] and row["model_commit"]
    assert [(r["name"], r["units"]) for r in keep.kept_rows(path)] == [("row 0", 1e6), ("row 1", 2e6)]


def test_a_walk_at_a_commit_imports_eggnog_from_that_checkout(tmp_path):
    """The worktree's process finds eggnog and eggnog.<folder> in the other checkout's folders."""
    for folder in ("eggnog", "kernels"):
        (tmp_path / folder).mkdir()
        (tmp_path / folder / "__init__.py").write_text("")
    finder = keep._TreeFinder(tmp_path)
    assert finder.find_spec("eggnog").origin == str(tmp_path / "eggnog" / "__init__.py")
    assert finder.find_spec("eggnog.kernels").submodule_search_locations == [str(tmp_path / "kernels")]
    assert finder.find_spec("eggnog.models") is None and finder.find_spec("numpy") is None
    assert finder.find_spec("eggnog.kernels.core") is None  # found under the package's own path
    with pytest.raises(BadInput, match="names no commit"):
        keep.walk_at("not-a-commit")
    with pytest.raises(BadInput, match="no kept calibration rows"):
        calibration.refit([])


def test_held_out_errors_exceed_in_sample_ones_for_a_row_off_the_model():
    truth = {**TRUTH, "l2_bytes_per_s": 5.5e12}
    kept = _synthetic(truth, CASES, family=["a", "a", "b", "b", "c"])
    kept[0]["measured"]["units_per_s"] *= 1.5  # a row the constants cannot explain
    errors = error_bars.held_out(kept, calibration.grid())
    assert [e["name"] for e in errors] == [r["name"] for r in kept]
    first = errors[0]
    assert abs(math.log(first["leave_one_out"])) > abs(math.log(first["in_sample"])) > 0
    assert first["leave_one_family_out"] is not None
    assert error_bars.held_out_factor(errors) >= max(max(e["leave_one_family_out"], 1 / e["leave_one_family_out"])
                                                     for e in errors)
    lone = error_bars.held_out(_synthetic(truth, CASES[:2]), calibration.grid())
    assert all(e["leave_one_family_out"] is None and e["leave_one_out"] is not None for e in lone)


def test_a_prediction_range_holds_its_point_and_the_corners_go_the_slow_and_fast_ways():
    bounds = {"global_latency_cycles": (600, 800), "l2_bytes_per_s": (3e12, 7e12), "hbm_bytes_per_s": (1e12, 2e12),
              "host_s_per_call": (0, 5e-4)}
    slow, fast = error_bars.corners(bounds, calibration.CONSTANTS)
    assert (slow["global_latency_cycles"], slow["l2_bytes_per_s"], slow["hbm_bytes_per_s"], slow["host_s_per_call"]) \
        == (800, 3e12, 1e12, 5e-4)
    assert (fast["global_latency_cycles"], fast["l2_bytes_per_s"], fast["hbm_bytes_per_s"], fast["host_s_per_call"]) \
        == (600, 7e12, 2e12, 0)
    low, high = error_bars.prediction_range(2.0, 1.5, 3.0, 2.0)
    assert (low, high) == (0.75, 6.0)
    assert error_bars.prediction_range(2.0, 2.5, 2.2, 1.0) == [2.0, 2.5]  # the point inside, whatever the corners


def test_the_plausible_constants_hold_the_fit_and_a_probe_fixes_its_constant():
    kept = _synthetic(TRUTH, CASES)
    bounds = error_bars.plausible(kept, calibration.grid())
    assert all(lo <= TRUTH[k] <= hi for k, (lo, hi) in bounds.items())
    fixed = error_bars.plausible(kept, calibration.grid({"l2_bytes_per_s": 5e12}))
    assert fixed["l2_bytes_per_s"] == (5e12, 5e12)


def _probes(folder, name, device, rows):
    _result(folder, name, {"benchmark": "probes", "device": device, "date": name[-15:-5], "rows": rows})


def test_the_newest_gpu_probes_set_the_constants_they_name(tmp_path):
    row = {"probe": "l2_read", "value": 6.1e12, "unit": "B/s", "constant": "l2_bytes_per_s", "seconds": 1.0}
    _probes(tmp_path, "probes-nvidia-h100-2026-12-01.json", "NVIDIA H100", [{**row, "value": 4.4e12}])
    _probes(tmp_path, "probes-nvidia-h100-2026-12-03.json", "NVIDIA H100", [
        row, {"probe": "dp4a", "value": 60.0, "unit": "/clock/SM", "constant": "dp4a_per_clock_per_sm", "seconds": 1},
        {"probe": "copy", "value": 1.0, "unit": "s", "constant": None, "seconds": 1}])
    _probes(tmp_path, "probes-simulator-2026-12-09.json", "simulator", [{**row, "value": 1.0}])
    _probes(tmp_path, "probes-nvidia-h100-2026-12-10.json", "NVIDIA H100", [{**row, "value": 2.0, "simulated": True}])
    probed, file = calibration.newest_probes(tmp_path)
    assert probed == {"l2_bytes_per_s": 6.1e12, "dp4a_per_clock_per_sm": 60.0}
    assert file == "probes-nvidia-h100-2026-12-03.json"
    assert calibration.newest_probes(tmp_path / "none") == ({}, None)
    out = calibration.refit(_synthetic(TRUTH, CASES), tmp_path)
    assert out["constants"]["l2_bytes_per_s"] == 6.1e12 and out["plausible"]["l2_bytes_per_s"] == (6.1e12, 6.1e12)
    assert out["probed_not_modelled"]["dp4a_per_clock_per_sm"]["value"] == 60.0


def test_a_measurement_of_a_kernel_changed_since_its_commit_is_told_apart():
    """The EGG epoch was rebuilt after its first H100 measurements (commit f04d3a251652); at HEAD nothing of
    it differs from HEAD; an unknown commit cannot be told apart and counts as current."""
    import subprocess
    from pathlib import Path

    kernel = ["eggnog.kernels.egg.epoch_cuda.egg_epoch_cuda"]
    root = Path(calibration.__file__).resolve().parents[2]
    head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=root, capture_output=True, text=True).stdout.strip()
    dirty = subprocess.run(["git", "diff", "--quiet", "HEAD", "--", "kernels/egg/epoch_cuda.py"], cwd=root).returncode
    assert calibration.changed_since(head, kernel) == bool(dirty)
    assert calibration.changed_since("f04d3a251652", kernel)
    assert not calibration.changed_since("unknown", kernel)


def test_a_running_plans_own_probes_come_before_the_committed_ones(tmp_path, monkeypatch):
    """The first-contact plan gives its steps EGGNOG_RUN_RESULTS: the refit it ends with reads that run's probes."""
    row = {"probe": "l2_read", "value": 4.4e12, "unit": "B/s", "constant": "l2_bytes_per_s", "seconds": 1.0}
    committed, run = tmp_path / "committed", tmp_path / "run"
    committed.mkdir(), run.mkdir()
    _probes(committed, "probes-nvidia-h100-2026-12-03.json", "NVIDIA H100", [{**row, "value": 6.1e12}])
    monkeypatch.setenv(calibration.RUN_RESULTS, str(run))
    assert calibration.refit(_synthetic(TRUTH, CASES), committed)["constants"]["l2_bytes_per_s"] == 6.1e12
    _probes(run, "probes-nvidia-h200-2026-12-01.json", "NVIDIA H200", [row])
    assert calibration.refit(_synthetic(TRUTH, CASES), committed)["constants"]["l2_bytes_per_s"] == 4.4e12
