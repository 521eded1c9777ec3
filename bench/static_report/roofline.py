"""Roofline estimates for headline workloads: operations and bytes per unit of work, taken from a
kernel's loop structure, against the H100 SXM limits of limits.py. A workload is the dict of
kernels/STATIC_REPORT.md (REQUIRED keys, optional loads_per_unit): the two built in here, and those
kernel modules add through ROOFLINE_WORKLOADS and roofline(workload).

Units per second under each ceiling are peak / (ops or bytes per unit); the kernel's hot loop adds an
issue ceiling (4 schedulers x 1 warp instruction per clock per SM, at the static body's MACs, or units,
per instruction). The estimate is the lowest ceiling.
"""

import importlib
from math import ceil

from bench.static_report.limits import H100_SXM, ISSUE_CLOCK_HZ, SCHEDULERS_PER_SM, SM_COUNT

REQUIRED = ("name", "kernel", "unit", "ops_per_unit", "compute_limit", "reference_limit", "bytes_per_unit", "basis")


def int_matmul_workload(n_layer=6, dim=256, members=32768):
    """Every int_matmul of one EGG member-token (all layers' matrices and the head), as the tiled
    perturbed_matmul_cuda and its noise_dot_cuda companion do it."""
    from eggnog.kernels.egg import int_matmul
    from eggnog.kernels.egg.layout import egg_layout

    tile, tile_k = int_matmul.TILE, int_matmul.TILE_K
    macs = l2 = hbm = 0
    for _, shape, kind, _ in egg_layout(n_layer, dim):
        if kind != "matrix":
            continue
        d_out, d_in = shape
        tiles_out, steps = ceil(d_out / tile), ceil(d_in / tile_k)
        macs += d_out * d_in
        # each step stages TILE rows of x and TILE rows of w, TILE_K bytes each, for TILE members
        staged = tiles_out * steps * 2 * tile * tile_k / tile
        # noise_dot reads x and writes s (int64); the epilogue reads s per output tile, writes out
        l2 += staged + d_in + 8 + 8 * tiles_out + d_out
        # launch inputs and outputs pass HBM once; the weights once per launch, shared by all members
        hbm += d_in + 16 + d_out + d_out * d_in / members
    return {
        "name": f"EGG {n_layer}x{dim}, population {members}: int_matmul (perturbed_matmul_cuda)",
        "kernel": "eggnog.kernels.egg.int_matmul.perturbed_matmul_cuda",
        "unit": "member-token",
        "ops_per_unit": 2 * macs,
        "compute_limit": None,
        "reference_limit": "int8_tensor",
        "bytes_per_unit": {"hbm": hbm, "l2": l2},
        "basis": (f"{macs} int8 MACs per member-token over the EGG's matrices; each {tile}x{tile} tile step stages "
                  f"2x{tile}x{tile_k} bytes from global memory for {tile * tile * tile_k} MACs (L2); HBM assumes "
                  "each launch's activations pass HBM once and the weights are read once per launch. IDP4A on the "
                  "CUDA cores has no stated peak here: its ceiling is the hot loop's issue rate."),
    }


def float_matmul_workload(rows=32768, d_in=1536, d_out=1536):
    """The fp32 register-blocked matmul_cuda at the MinGRU LM's layer product (forward)."""
    from eggnog.kernels.layers import matmul

    block, step = matmul.BLOCK, matmul.STEP
    tiles_out, steps = ceil(d_out / block), ceil(d_in / step)
    staged = tiles_out * steps * 2 * block * step * 4 / block  # per row: a and b slices, fp32
    return {
        "name": f"matmul {rows}x{d_in}x{d_out} fp32 forward (matmul_cuda)",
        "kernel": "eggnog.kernels.layers.matmul.matmul_cuda",
        "unit": "row",
        "ops_per_unit": 2 * d_in * d_out,
        "compute_limit": "fp32_simt",
        "reference_limit": "fp32_simt",
        "bytes_per_unit": {"hbm": 4 * (d_in + d_out) + 4 * d_in * d_out / rows, "l2": staged + 4 * d_out},
        "basis": (f"each {block}x{block} block tile stages 2x{block}x{step} fp32 from global memory per step for "
                  f"{block * block * step} FMAs (L2); HBM: x read and y written once, the weights once per launch."),
        "launches": [{"kernel": "eggnog.kernels.layers.matmul.matmul_cuda", "grid": (tiles_out, ceil(rows / block)),
                      "block": (matmul.THREADS, matmul.THREADS), "args": [
                          *({"shape": s, "dtype": "float32"} for s in ((rows, d_in), (d_out, d_in), (rows, d_out))),
                          False, True]}],
        "units": rows,
        "measured": {"benchmark": "matmul_throughput", "row": {"op": "forward", "shape": f"{rows}x{d_in}x{d_out}"},
                     "ms_per_run": "ours_ms"},
    }


BUILT_IN = (int_matmul_workload, float_matmul_workload)


def module_workloads(module_names):
    """Workloads of kernel modules that define ROOFLINE_WORKLOADS and roofline(workload)."""
    found = []
    for name in sorted(set(module_names)):
        module = importlib.import_module(name)
        names = getattr(module, "ROOFLINE_WORKLOADS", ())
        if names and not callable(getattr(module, "roofline", None)):
            raise ValueError(f"{name} defines ROOFLINE_WORKLOADS but no roofline(workload) function")
        for workload in names:
            row = dict(module.roofline(workload))
            missing = [key for key in REQUIRED if key not in row]
            if missing:
                raise ValueError(f"{name}.roofline({workload!r}) lacks {', '.join(missing)}")
            found.append(row)
    return found


def hot_loop(kernel_rows):
    """The innermost loop with the most multiply-accumulates per instruction, over a kernel's signatures
    (a once-per-launch staging loop may hold more MACs per iteration, e.g. in an integer division's
    float steps, at a far lower density); None when no innermost loop multiplies."""
    loops = [loop for row in kernel_rows for loop in row["sass"]["innermost_loops"] if loop["warp_macs"]]
    return max(loops, key=lambda loop: (loop["warp_macs"] / loop["instructions"], loop["warp_macs"]), default=None)


def estimate(workload, loop=None):
    """Units per second under each ceiling, the binding one, and the fraction of the reference peak."""
    ops = workload["ops_per_unit"]
    ceilings = {}
    if workload["compute_limit"]:
        ceilings[workload["compute_limit"]] = H100_SXM[workload["compute_limit"]] / ops
    for level, moved in workload["bytes_per_unit"].items():
        if moved:
            ceilings[level] = H100_SXM[level] / moved
    issue = None
    if loop is not None and "loads_per_unit" in workload:  # a streaming loop: units, not MACs
        words = sum(loop.get(f"ldg_{bits}", 0) * bits // 32 for bits in (32, 64, 128))
        units = 32 * words / workload["loads_per_unit"]
        issue = {"units_per_warp_iteration": units, "instructions_per_iteration": loop["instructions"]}
        ceilings["issue"] = SCHEDULERS_PER_SM * SM_COUNT * ISSUE_CLOCK_HZ * units / loop["instructions"]
    elif loop is not None:
        macs_per_clock_sm = SCHEDULERS_PER_SM * loop["warp_macs"] / loop["instructions"]
        issue = {"warp_macs_per_iteration": loop["warp_macs"], "instructions_per_iteration": loop["instructions"],
                 "macs_per_clock_per_sm": round(macs_per_clock_sm, 2)}
        ceilings["issue"] = 2 * macs_per_clock_sm * SM_COUNT * ISSUE_CLOCK_HZ / ops
    bound = min(ceilings, key=ceilings.get)
    limit = workload["reference_limit"]
    # a bandwidth reference: the rate at which the kernel's own traffic would fill that bandwidth
    reference = H100_SXM[limit] / (workload["bytes_per_unit"][limit] if limit in workload["bytes_per_unit"] else ops)
    return {**{k: workload[k] for k in REQUIRED}, "ceilings_units_per_s": {k: _digits(v) for k, v in ceilings.items()},
            "bound": bound, "units_per_s": _digits(ceilings[bound]), "reference_units_per_s": _digits(reference),
            "fraction_of_reference": _digits(ceilings[bound] / reference), "hot_loop": issue}


def _digits(x):
    return float(f"{x:.3g}")
