"""The static report (bench/static_report): every cuda.jit kernel of the package is registered and
compiles for sm_90 (numba-cuda's compilers), the population matmul uses dp4a, and every registered
kernel assembled for sm_90 has no spill,
no local memory and no f64 in a float32/integer kernel, a kernel marked tensor_cores has IMMA/HMMA
in an innermost loop, and the static model predicts each kept calibration row (the kernels as measured) and
each measured workload whose kernel is the one measured within 2x, prints the rows' held-out errors and
gives every prediction a range that holds it. The SASS parser,
occupancy and roofline pieces are tested on hand-written input (the model's: tests/test_static_model.py).
Needs ptxas/cuobjdump/nvdisasm (the dev extra) and numba-cuda's compilers; tests/run.sh requires them."""

import json
import os
import subprocess
import sys
import types

import pytest

from bench.static_report import parse
from bench.static_report.checks import problems, shared_memory_argument
from bench.static_report.limits import occupancy
from bench.static_report.roofline import estimate, hot_loop, int_matmul_workload, module_workloads
from eggnog.kernels.checks.ptx_compile import F64_INSTRUCTION

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MISSING = ("not found (install the dev extra", "DynamicLibNotFoundError", "libnvrtc", "libnvvm", "NvvmSupportError")


@pytest.fixture(scope="session")
def report(tmp_path_factory):
    """The report's JSON record, from one run of the script (every kernel compiled once per session)."""
    out = tmp_path_factory.mktemp("sass_report")
    env = dict(os.environ, NUMBA_ENABLE_CUDASIM="0", PYTHONPATH=ROOT, EGGNOG_BENCH_RESULTS=str(out))
    result = subprocess.run([sys.executable, "-m", "bench.static_report"], capture_output=True,
                            text=True, env=env, cwd=ROOT, timeout=1800)
    if result.returncode and any(m in result.stderr for m in MISSING):
        if os.environ.get("EGGNOG_REQUIRE_PTX") == "1":
            pytest.fail("the static report's tools are missing: install the dev and cu13 extras\n"
                        + result.stderr[-2000:])
        pytest.skip("ptxas/cuobjdump/nvdisasm or numba-cuda's compilers not installed")
    assert result.returncode == 0, result.stderr[-4000:]
    (path,) = out.glob("sass_report-*.json")
    assert path.with_suffix(".md").exists()
    record = json.loads(path.read_text())
    assert record["rows"] and record["roofline"], "the report lists no kernel or no workload"
    record["printed"] = result.stdout
    return record


def test_every_registered_signature_is_assembled_and_disassembled(report):
    from eggnog.kernels.core.cuda_api import KERNELS
    from eggnog.kernels.core.registry import import_families

    import_families()
    rows = report["rows"]
    assert len(rows) > 20
    assert sorted(r["name"] for r in rows) == sorted(s.name for s in KERNELS for _ in s.signatures)
    assert all(r["registers"] > 0 and r["sass"]["whole"]["instructions"] > 0 for r in rows)
    assert all(0 < r["occupancy"]["occupancy"] <= 1 for r in rows)


def test_every_cuda_kernel_of_the_package_is_registered(report):
    """The compiled set is every cuda.jit kernel bound in the package, not a subset."""
    env = dict(os.environ, NUMBA_ENABLE_CUDASIM="0", PYTHONPATH=ROOT)
    listed = subprocess.run([sys.executable, "-m", "eggnog.kernels.checks.ptx_compile", "--inventory"],
                            capture_output=True, text=True, env=env, cwd=ROOT, timeout=300)
    assert listed.returncode == 0, listed.stderr[-4000:]
    inventory = set(json.loads(listed.stdout))
    names = {r["name"] for r in report["rows"]}
    assert len(inventory) > 20
    assert names == inventory, {"unregistered": sorted(inventory - names), "not found": sorted(names - inventory)}
    assert all(r["ptx_bytes"] > 0 for r in report["rows"])


def test_float32_and_integer_kernels_have_no_f64_in_their_ptx(report):
    offenders = [r["kernel"] for r in report["rows"] if r["float64_free"] and r["f64_instructions"]]
    assert not offenders, offenders


def test_population_matmul_uses_dp4a(report):
    matmul = [r for r in report["rows"] if r["name"] == "eggnog.kernels.egg.int_matmul.perturbed_matmul_cuda"]
    assert matmul and all(r["dp4a_instructions"] >= 1 for r in matmul)


def test_f64_detector_counts_instructions_not_registers():
    ptx = ("\t.reg .f64 \t%fd<3>;\n\tcvt.rn.f64.s64 \t%fd1, %rd72;\n\tmul.f64 \t%fd2, %fd1, 0d3F;\n"
           "\tmov.f32 \t%f64, 0f37CBAC00;\n\tadd.f32 \t%f1, %f2, %f64;\n")
    assert len(F64_INSTRUCTION.findall(ptx)) == 2


def test_no_spill_local_memory_or_f64_in_float32_and_integer_kernels(report):
    offenders = {r["kernel"]: found for r in report["rows"]
                 if (found := [p for p in problems(r) if "tensor_cores" not in p])}
    assert not offenders, offenders


def test_tensor_core_kernels_issue_mma_in_an_innermost_loop(report):
    offenders = {r["kernel"]: found for r in report["rows"]
                 if (found := [p for p in problems(r) if "tensor_cores" in p])}
    assert not offenders, offenders


def test_scan_passes_stream_at_80_percent_of_hbm_or_more_by_their_roofline_rows(report):
    """The scan's target: its hot loops issue fast enough that HBM, not the instruction rate, binds."""
    rows = [r for r in report["roofline"] if (r["kernel"] or "").startswith("eggnog.kernels.rnn.scan.")]
    assert len(rows) == 4
    assert all(r["fraction_of_reference"] >= 0.8 for r in rows), [(r["name"], r["fraction_of_reference"]) for r in rows]


HEADLINE = ("EGG 6x256, population 32768: fused", "EGG 6x256, population 32768, unperturbed",
            "population 40960: tensor-core", "TF32 (matmul_tf32_cuda)", "fp32 forward (matmul_cuda)",
            "scan 8x4096x1536 forward: scan launch")


def test_static_model_walks_the_headline_workloads_with_known_loops(report):
    """Every headline workload has a prediction and a GPU measurement in bench/results, and no walk
    leaves many loops of unknown trip count."""
    rows = [r for r in report["roofline"] if "prediction" in r]
    assert rows, "the report predicts no workload"
    measured = [r["name"] for r in rows if "measured" in r]
    assert all(any(h in name for name in measured) for h in HEADLINE), (HEADLINE, sorted(measured))
    assert all(not launch["unknown_loops"] or sum(launch["unknown_loops"].values()) < 50
               for r in rows for launch in r["prediction"]["launches"]), "loops of unknown trip count"


def within_2x(roofline, calibration_rows):
    """Check predicted / measured within [0.5, 2] for each kept calibration row (in sample: its kernels as
    measured, walked into bench/static_report/calibration_rows.json) and each measured workload whose kernels
    are the ones measured (a changed kernel's prediction beside the old kernel's measurement checks nothing);
    fail when there is none of either."""
    ratios = {f"kept: {e['name']} ({e['file']})": e["in_sample"] for e in calibration_rows}
    ratios.update({name: r["measured"]["predicted_over_measured"] for r in roofline
                   if "prediction" in r and "measured" in r and not r["measured"]["kernel_changed"]
                   for name in [r["name"]]})
    assert ratios, "no kept calibration row and no measured workload whose kernel is current"
    assert all(0.5 <= ratio <= 2 for ratio in ratios.values()), ratios


def test_static_model_predicts_every_measured_row_within_2x(report):
    """The static model (model.py, constants fitted in calibration.py) against every kept measurement and the
    newest GPU measurement of each workload in bench/results whose kernel has not changed since."""
    within_2x(report["roofline"], report["static_model"]["calibration"]["rows"])


def _measured(name, ratio, changed):
    return {"name": name, "prediction": {}, "measured": {"predicted_over_measured": ratio, "kernel_changed": changed}}


def test_the_2x_check_compares_kept_rows_and_current_kernels_and_never_passes_over_none():
    kept = [{"name": "k", "file": "f.json", "in_sample": 1.1}]
    within_2x([_measured("a", 1.2, False), _measured("b", 9.8, True), {"name": "c", "prediction": {}}], kept)
    within_2x([_measured("b", 9.8, True)], kept)
    with pytest.raises(AssertionError, match="'a': 2.5"):
        within_2x([_measured("a", 2.5, False), _measured("b", 1.0, True)], kept)
    with pytest.raises(AssertionError, match=r"'kept: k \(f.json\)': 0.4"):
        within_2x([], [{**kept[0], "in_sample": 0.4}])
    with pytest.raises(AssertionError, match="no kept calibration row and no measured workload"):
        within_2x([_measured("b", 1.0, True), {"name": "c", "prediction": {}}], [])


def test_the_report_prints_held_out_errors_and_a_range_for_every_prediction(report):
    """Every calibration row with its leave-one-out and leave-one-family-out ratio, printed; every prediction
    with a range that holds its point, printed as low-high."""
    bars = report["static_model"]["calibration"]
    assert len(bars["rows"]) >= 8
    assert all(e["leave_one_out"] and e["leave_one_family_out"] for e in bars["rows"])
    for e in bars["rows"]:
        assert (f"calibration: {e['name']} ({e['family']}, {e['file']}): predicted / measured {e['in_sample']} in "
                f"sample, {e['leave_one_out']} left out, {e['leave_one_family_out']} with its family left out"
                in report["printed"])
    predicted = [r for r in report["roofline"] if "prediction" in r]
    assert predicted
    for r in predicted:
        low, high = r["prediction"]["range"]
        assert low <= r["prediction"]["units_per_s"] <= high, r["name"]
        assert f"model: {r['name']}: predicted {low:.3g}-{high:.3g} {r['unit']}/s" in report["printed"]


# ---- the parser, on hand-written SASS ----

LISTING = """
\tcode for sm_90
\t\tFunction : kernel_a
\t.headerflags\t@"EF_CUDA_SM90 EF_CUDA_VIRTUAL_SM(EF_CUDA_SM90)"
        /*0000*/                   LDC R1, c[0x0][0x28] ;                  /* 0x00000a00ff017b82 */
        /*0010*/                   S2R R0, SR_TID.X ;                      /* 0x0000000000007919 */
        /*0020*/                   LDG.E.U8 R2, desc[UR4][R4.64] ;         /* 0x0000000000007919 */
        /*0030*/                   LDG.E R3, desc[UR4][R4.64] ;            /* 0x0000000000007919 */
        /*0040*/                   LDS.U16 R5, [R6] ;                      /* 0x0000000000007919 */
        /*0050*/                   IMMA.16832.S8.S8 R8, R12, R16, R8 ;     /* 0x0000000000007919 */
        /*0060*/                   IADD3 R4, P0, R4, 0x40, RZ ;            /* 0x0000000000007919 */
        /*0070*/                   IADD3.X R5, RZ, R5, RZ, P0, !PT ;       /* 0x0000000000007919 */
        /*0080*/              @!P1 BRA 0x30 ;                              /* 0x0000000000007919 */
        /*0090*/                   LDG.E.128 R8, desc[UR4][R4.64] ;        /* 0x0000000000007919 */
        /*00a0*/                   STS.64 [R6], R8 ;                       /* 0x0000000000007919 */
        /*00b0*/               @P2 BRA 0x90 ;                              /* 0x0000000000007919 */
        /*00c0*/                   CALL.REL.NOINC 0x200 ;                  /* 0x0000000000007919 */
        /*00d0*/                   FFMA R7, R7, R7, R7 ;                   /* 0x0000000000007919 */
        /*00e0*/               @P3 BRA 0x30 ;                              /* 0x0000000000007919 */
        /*00f0*/                   STG.E.S8 desc[UR4][R4.64], R2 ;         /* 0x0000000000007919 */
        /*0100*/                   EXIT ;                                  /* 0x0000000000007919 */
        /*0110*/                   BRA 0x110;                              /* 0x0000000000007919 */
        /*0120*/                   NOP;                                    /* 0x0000000000007919 */
"""


def test_parse_reads_predicates_opcodes_and_branch_targets():
    (name, instructions), = parse.parse_sass(LISTING).items()
    assert name == "kernel_a" and len(instructions) == 19
    branch = instructions[8]
    assert (branch.address, branch.predicate, branch.opcode, branch.branch_target()) == (0x80, "@!P1", "BRA", 0x30)
    assert instructions[5].base == "IMMA" and instructions[5].modifiers == ["16832", "S8", "S8"]


def test_loops_are_backward_branches_nested_by_address_and_the_exit_trap_is_none():
    instructions = parse.parse_sass(LISTING)["kernel_a"]
    loops = parse.find_loops(instructions)
    # 0x30 has two back edges (0x80 and 0xe0): one loop to the later one; 0x90-0xb0 is a second loop.
    assert [(lp.start, lp.end, lp.depth, lp.innermost) for lp in loops] == [(0x30, 0xE0, 1, False),
                                                                          (0x90, 0xB0, 2, True)]


def test_innermost_loop_mix_counts_widths_mma_int64_and_calls():
    analysis = parse.analyze_sass(LISTING)
    (loop,) = analysis["innermost_loops"]
    assert (loop["instructions"], loop["ldg_128"], loop["sts_64"], loop["mma"]) == (3, 1, 1, 0)
    whole = analysis["whole"]
    assert {k: whole[k] for k in ("ldg_8", "ldg_32", "ldg_128", "lds_16", "sts_64", "stg_8")} == {
        "ldg_8": 1, "ldg_32": 1, "ldg_128": 1, "lds_16": 1, "sts_64": 1, "stg_8": 1}
    assert (whole["mma"], whole["int64"], whole["call"], whole["ffma"]) == (1, 2, 1, 1)
    assert whole["instructions"] == 18  # the NOP is not counted
    assert whole["warp_macs"] == 16 * 8 * 32 + 32


def _ins(text):
    words = text.split(None, 1)
    operands = [o.strip() for o in words[1].split(",")] if len(words) > 1 else []
    return parse.Instruction(0, words[0], operands)


@pytest.mark.parametrize("text, expected", [
    ("IADD3 R4, P0, R4, 0x40, RZ", True), ("IADD3.X R5, RZ, R5, RZ, P0, !PT", True),
    ("IADD3 R4, R2, R4, RZ", False), ("IMAD.WIDE R40, R41, 0x10, R36", True), ("IMAD.HI.U32 R6, R9, R10, RZ", True),
    ("IMAD R8, R11, R6, RZ", False), ("IMAD.X R7, R12, 0x1, ~R7, P1", True),
    ("ISETP.NE.AND.EX P0, PT, R5, RZ, PT, P0", True), ("ISETP.NE.U32.AND P0, PT, R33, RZ, PT", False),
    ("SHF.R.U64 R3, R2, 0x4, R5", True), ("SHF.R.S32.HI R37, RZ, 0x1f, R36", True),
    ("SHF.R.S32.HI R3, RZ, 0x4, R36", False), ("UIADD3.X UR4, UR7, UR8, URZ, UP0, !UPT", True),
    ("LEA.HI.X R5, R5, RZ, RZ, 0x1c, P1", True), ("LOP3.LUT R10, R3, UR7, RZ, 0x3c, !PT", False)])
def test_int64_rules(text, expected):
    assert parse.is_int64(_ins(text)) is expected


@pytest.mark.parametrize("text, expected", [
    ("DFMA R2, R4, R6, R2", True), ("F2F.F64.F32 R2, R3", True), ("MUFU.RCP64H R3, R5", True),
    ("I2F.F64.S64 R2, R4", True), ("FFMA R2, R4, R6, R2", False), ("DEPBAR.LE SB0, 0x0", False),
    ("F2I.TRUNC.NTZ R2, R3", False)])
def test_f64_rules(text, expected):
    assert parse.is_f64(_ins(text)) is expected


def test_multiply_accumulates_per_warp_instruction():
    assert parse.warp_macs(_ins("IMMA.16832.S8.S8 R8, R12, R16, R8")) == 4096
    assert parse.warp_macs(_ins("HMMA.16816.F32 R8, R12, R16, R8")) == 2048
    assert parse.warp_macs(_ins("HGMMA.64x128x16.F32.BF16 R24, gdesc[UR4], R24")) == 64 * 128 * 16 // 4
    assert parse.warp_macs(_ins("IDP.4A.S8.S8 R45, R45, R38, RZ")) == 128
    assert parse.warp_macs(_ins("LDS.U8 R2, [R3]")) == 0


PTXAS_LOG = """ptxas info    : 80 bytes gmem
ptxas info    : Compiling entry function '_Z6kernel' for 'sm_90'
ptxas info    : Function properties for _Z6helper
    8 bytes stack frame, 4 bytes spill stores, 4 bytes spill loads
ptxas info    : Function properties for _Z6kernel
    16 bytes stack frame, 12 bytes spill stores, 8 bytes spill loads
ptxas info    : Used 54 registers, used 1 barriers, 2048 bytes smem
ptxas info    : Compile time = 63.383 ms
"""


def test_ptxas_log_gives_entry_resources_and_spills_of_every_function():
    found = parse.parse_ptxas(PTXAS_LOG)
    assert found == {"entry": "_Z6kernel", "registers": 54, "barriers": 1, "smem": 2048, "stack_frame": 24,
                     "spill_stores": 16, "spill_loads": 12}


def _row(listing, **flags):
    row = {"kernel": "k", "spill_stores": 0, "spill_loads": 0, "stack_frame": 0, "float64_free": True,
           "tensor_cores": False, "sass": parse.analyze_sass(listing)}
    row.update(flags)
    return row


def test_checks_name_spills_local_memory_f64_and_tensor_core_loops_without_mma():
    assert problems(_row(LISTING)) == []
    # the IMMA of LISTING sits in the outer loop, not in the innermost one
    assert problems(_row(LISTING, tensor_cores=True)) == [
        "marked tensor_cores but no innermost loop issues IMMA/HMMA/HGMMA"]
    with_mma = LISTING.replace("STS.64 [R6], R8", "IMMA.16832.S8.S8 R8, R12, R16, R8")
    assert problems(_row(with_mma, tensor_cores=True)) == []
    with_f64 = LISTING.replace("FFMA R7, R7, R7, R7", "DFMA R6, R6, R6, R6")
    assert len(problems(_row(with_f64))) == 1 and problems(_row(with_f64, float64_free=False)) == []
    assert len(problems(_row(LISTING, spill_stores=8, stack_frame=8))) == 2
    with_local = LISTING.replace("STS.64 [R6], R8", "STL [R1], R8")
    assert problems(_row(with_local)) == ["local memory: 0 bytes stack frame, 1 local loads/stores"]


def test_occupancy_follows_the_sm90_limits():
    assert occupancy(54, 2048, 256) == {"blocks_per_sm": 4, "warps_per_sm": 32, "occupancy": 0.5,
                                        "limited_by": ["registers"]}
    assert occupancy(128, 1000, 64)["blocks_per_sm"] == 8  # 4 warps per sub-partition x 4, 2 warps a block
    assert occupancy(16, 0, 32)["limited_by"] == ["blocks"]  # 32 blocks of one warp
    assert occupancy(32, 0, 1024)["limited_by"] == ["registers", "warps"]
    assert occupancy(16, 100 * 1024, 128)["blocks_per_sm"] == 2  # 228 KB / (100 KB + 1 KB reserved)
    assert occupancy(255, 0, 1024)["blocks_per_sm"] == 0


def test_shared_memory_paragraph_is_quoted_from_the_docstring():
    def argued():
        """A kernel.

        Shared memory: rows are padded to 65 words, so the 32 lanes of a column read
        hit 32 different banks.

        More text."""

    assert shared_memory_argument(argued).startswith("Shared memory: rows are padded to 65 words, so the 32 lanes")
    assert shared_memory_argument(argued).endswith("32 different banks.")
    assert shared_memory_argument(lambda: None) is None


def test_shared_memory_paragraph_may_come_from_the_module(monkeypatch):
    module = types.ModuleType("fake_shared_module", "Kernels.\n\nShared memory: pitch 16 mod 32 words.\n")
    monkeypatch.setitem(sys.modules, module.__name__, module)

    def undocumented():
        pass

    undocumented.__module__ = module.__name__
    assert shared_memory_argument(undocumented) == "Shared memory: pitch 16 mod 32 words."


def test_dynamic_shared_memory_is_seen_in_the_ptx():
    assert parse.uses_dynamic_shared(".extern .shared .align 4 .b8 _cudapy_smem_2[];\n")
    assert not parse.uses_dynamic_shared(".visible .shared .align 1 .b8 _cudapy_smem_3[1024];\n")


WORKLOAD = {"name": "w", "kernel": "k", "unit": "item", "ops_per_unit": 2e6, "compute_limit": "int8_tensor",
            "reference_limit": "int8_tensor", "bytes_per_unit": {"hbm": 1e3, "l2": 1e6}, "basis": "hand-made"}


def test_roofline_takes_the_lowest_ceiling_and_the_hot_loop_issue_rate():
    est = estimate(WORKLOAD)
    assert est["bound"] == "l2" and est["units_per_s"] == pytest.approx(5.5e6, rel=1e-3)
    assert est["fraction_of_reference"] == pytest.approx(5.5e6 / (1979e12 / 2e6), rel=1e-3)
    loops = [{"warp_macs": 128, "instructions": 100}, {"warp_macs": 4096, "instructions": 200},
             {"warp_macs": 0, "instructions": 5}]
    loop = hot_loop([{"sass": {"innermost_loops": loops}}])
    assert loop["warp_macs"] == 4096
    slow = estimate(WORKLOAD, {"warp_macs": 128, "instructions": 1000})
    assert slow["bound"] == "issue"  # 0.512 MAC per clock per SM
    assert slow["units_per_s"] == pytest.approx(2 * 0.512 * 132 * 1.98e9 / 2e6, rel=5e-3)  # 3 digits kept


def test_kernel_modules_add_workloads_through_the_hook(monkeypatch):
    module = types.ModuleType("fake_kernel_module")
    module.ROOFLINE_WORKLOADS = ("big", "small")
    module.roofline = lambda name: {**WORKLOAD, "name": name}
    monkeypatch.setitem(sys.modules, module.__name__, module)
    assert [w["name"] for w in module_workloads([module.__name__, module.__name__])] == ["big", "small"]
    module.roofline = lambda name: {"name": name}
    with pytest.raises(ValueError, match="lacks kernel"):
        module_workloads([module.__name__])


def test_int_matmul_workload_counts_the_egg_matrices_and_the_tile_traffic():
    from eggnog.kernels.egg.layout import egg_layout

    work = int_matmul_workload(6, 256, 32768)
    macs = sum(s[0] * s[1] for _, s, kind, _ in egg_layout(6, 256) if kind == "matrix")
    assert work["ops_per_unit"] == 2 * macs == 2 * (6 * 12 * 256 * 256 + 256 * 256)
    # 16x16 tiles stepping 64 bytes: 2048 bytes staged per 16384 MACs, plus the rows in and out
    assert macs / 8 < work["bytes_per_unit"]["l2"] < macs / 8 * 1.1


def test_missing_tools_are_one_sentence_of_bad_input(monkeypatch):
    from bench.static_report import tools
    from eggnog.runtime.errors import BadInput

    monkeypatch.setattr(tools, "find_tool", lambda name: None if name == "nvdisasm" else "/bin/true")
    with pytest.raises(BadInput, match=r"^nvdisasm not found \(install the dev extra, which brings "
                                       r"nvidia-cuda-nvdisasm\)$"):
        tools.find_tools()
