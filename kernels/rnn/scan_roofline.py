"""Roofline workloads of the MinGRU scan for the static report (kernels/STATIC_REPORT.md); scan.py
re-exports them, as the report asks the module of the scan's kernels.

Passes: the scan kernels at 8 x 4096 x 1536 (400 MB an array: every byte streams from HBM), one
launch a call reading each input and writing each output once (forward 12 B an element, backward 24 B);
and the fold kernels of a segmented call (1 x 16384 x 128: 4 blocks of channels, too few to fill the GPU,
so T is cut into 64 segments), which read k and u (forward) or grad_h and k (backward) once more:
8 B an element over all but one segment. Calls: every launch of cuda_scan_forward / _backward, what
the static model predicts and the throughput benchmark measures.
"""

from eggnog.kernels.core.cuda_api import blocks
from eggnog.kernels.rnn.scan_layout import STEPS, plan

MODULE = "eggnog.kernels.rnn.scan"
BIG, SEGMENTED = (8, 4096, 1536), (1, 16384, 128)

_PASSES = {  # workload: (kernel, bytes per element, 32-bit words loaded per element)
    "scan 8x4096x1536 forward: scan pass": ("forward_scan_cuda", 12, 2),
    "scan 8x4096x1536 backward: scan pass": ("backward_scan_cuda", 24, 4 + 1 / STEPS),
    "scan 1x16384x128 forward: fold pass": ("forward_fold_cuda", 8, 2),
    "scan 1x16384x128 backward: fold pass": ("backward_fold_cuda", 8, 2 + 1 / STEPS),
}
_CALLS = {f"scan {'x'.join(map(str, shape))} {direction}": (shape, direction)
          for shape in (BIG, SEGMENTED) for direction in ("forward", "backward")}
ROOFLINE_WORKLOADS = tuple(_PASSES) + tuple(_CALLS)


def roofline(workload):
    """A pass: its hot loop against HBM filled by its own bytes (the issue ceiling counts the loop's
    instructions per element, elements per iteration read from the words its loads bring). A call: its
    launches for the static model."""
    if workload in _CALLS:
        return _call(workload, *_CALLS[workload])
    kernel_name, moved, loads = _PASSES[workload]
    return {
        "name": f"{workload} ({kernel_name})",
        "kernel": f"{MODULE}.{kernel_name}",
        "unit": "element",
        "ops_per_unit": 10,
        "compute_limit": None,
        "reference_limit": "hbm",
        "bytes_per_unit": {"hbm": moved},
        "loads_per_unit": loads,
        "basis": (f"{moved} B per element streamed from HBM, {loads:g} 32-bit words loaded per element; "
                  "about 10 flops per element (no FLOP peak binds)."),
    }


def _bytes(direction, segments):
    """HBM bytes per element of one call: every input read and every output written once, the fold
    pass's two inputs again over all but one segment (the carry pass's maps are negligible)."""
    once = 12 if direction == "forward" else 24
    return once + 8 * (segments - 1) / segments


def _call(workload, shape, direction):
    batch, steps, channels = shape
    threads, groups, segments, seg_len = plan(batch, steps, channels)
    elements = batch * steps * channels
    one = {"shape": (elements,), "dtype": "float32"}
    state = {"shape": (batch, channels), "dtype": "float32"}
    dims = [steps, channels, seg_len, segments]
    if direction == "forward":  # k, u, h0 (none: a view of h stands in), carried, h
        args = [one, one, {"shape": (batch * steps, channels), "dtype": "float32"}, False, one, *dims]
        carry_args = [one, args[2], False, *dims]
    else:  # grad_h, k, u, h, h0 (none: dh0 stands in), carried, dk, du, dh0
        args = [one, one, one, one, state, False, one, one, state, *dims]
        carry_args = [one, one, *dims]
    launches = []
    if segments > 1:
        launches += [(f"{direction}_fold_cuda", batch * groups * (segments - 1), threads, args),
                     (f"{direction}_carry_cuda", *blocks(batch * channels), carry_args)]
    launches.append((f"{direction}_scan_cuda", batch * groups * segments, threads, args))
    moved = _bytes(direction, segments)
    names = ", ".join(name.split("_")[1] for name, *_ in launches)
    return {
        "name": f"{workload}: {names} launch{'es' if len(launches) > 1 else ''}",
        "kernel": None,
        "unit": "element",
        "ops_per_unit": 10,
        "compute_limit": None,
        "reference_limit": "hbm",
        "bytes_per_unit": {"hbm": moved},
        "basis": f"{moved:g} B per element streamed from HBM over the launches of one call ({segments} "
                 f"segment{'s' if segments > 1 else ''} of {seg_len} steps).",
        "launches": [{"kernel": f"{MODULE}.{name}", "grid": grid, "block": block, "args": a}
                     for name, grid, block, a in launches],
        "units": elements,
        "measured": {"benchmark": "scan_throughput", "ms_per_run": "ms",
                     "row": {"op": direction, "shape": "x".join(map(str, shape))}},
    }
