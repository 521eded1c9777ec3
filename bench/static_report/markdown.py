"""The static report's markdown: the same record as its JSON, for reading."""

import json

MIX_COLUMNS = ("mma", "idp4a", "ffma", "int64", "call")


def widths(mix, kind):
    """'8:2 32:4' for the accesses of one kind (ldg, lds, sts, stg) by width in bits."""
    found = sorted((int(k.split("_")[1]), v) for k, v in mix.items() if k.startswith(kind + "_"))
    return " ".join(f"{w}:{n}" for w, n in found) or "-"


def summary_table(rows):
    table = []
    for r in rows:
        mix = r["innermost_loop_mix"]
        table.append({"kernel": r["kernel"], "block": r["block"], "regs": r["registers"],
                      "spill": r["spill_stores"] + r["spill_loads"], "stack": r["stack_frame"],
                      "smem": f"{r['smem']}+dyn" if r["dynamic_shared"] else r["smem"],
                      "occ": f"{r['occupancy']['occupancy']:.0%}", "loops": len(r["sass"]["innermost_loops"]),
                      "loop_ins": mix.get("instructions", 0), **{k: mix.get(k, 0) for k in MIX_COLUMNS},
                      "f64": r["sass"]["whole"]["f64"], "ldg": widths(mix, "ldg"), "lds": widths(mix, "lds"),
                      "sts": widths(mix, "sts"), "stg": widths(mix, "stg")})
    return table


def _table(rows, columns=None):
    columns = columns or list(rows[0])
    lines = ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
    lines += ["| " + " | ".join(str(r[c]) for c in columns) + " |" for r in rows]
    return lines


def _limits(limits):
    occ = limits["sm_90_occupancy"]
    lines = ["## Limits used", "",
             f"Occupancy (sm_90): {occ['registers_per_sm']} registers per SM (at most "
             f"{occ['max_registers_per_thread']} per thread, allocated per warp in units of "
             f"{occ['register_allocation_per_warp']}, in "
             f"{occ['register_sub_partitions']} sub-partitions), {occ['shared_memory_per_sm'] // 1024} KB shared "
             f"memory per SM and at most {occ['shared_memory_per_block'] // 1024} KB per block (plus "
             f"{occ['shared_memory_reserved_per_block']} bytes the system reserves per block, allocated in units of "
             f"{occ['shared_memory_allocation']} bytes), {occ['max_threads_per_sm']} threads and "
             f"{occ['max_blocks_per_sm']} blocks per SM. Occupancy is at the launcher's block size with the static "
             "shared memory ptxas reports; dynamic shared memory (sized at launch) is not counted, so the "
             "occupancy of a kernel that uses it is an upper bound.", "",
             "Roofline (H100 SXM5, dense): " + ", ".join(
                 f"{k} {v:.3g} {limits['peak_units'][k]}" for k, v in limits["h100_sxm_peaks"].items())
             + " (the L2 bandwidth is an estimate, not a datasheet figure). Issue bound: "
             f"{limits['sm_count']} SMs x {limits['schedulers_per_sm']} schedulers x one warp instruction per clock "
             f"at {limits['issue_clock_hz'] / 1e9:.2f} GHz, with the hot loop's static multiply-accumulates per "
             "instruction; it ignores latency, pipe throughput and bank conflicts, so it is an upper bound.", ""]
    return lines


def _loops(rows):
    lines = ["## Innermost loops", "", "Static bodies (one pass from the first to the last address of the loop).", ""]
    table = []
    for r in rows:
        for loop in r["sass"]["innermost_loops"]:
            memory = " ".join(f"{kind}[{widths(loop, kind)}]" for kind in ("ldg", "lds", "sts", "stg", "ldl", "stl")
                              if widths(loop, kind) != "-")
            table.append({"kernel": r["kernel"], "addresses": f"{loop['start']:#06x}-{loop['end']:#06x}",
                          "depth": loop["depth"], "instructions": loop["instructions"],
                          "warp MACs": loop["warp_macs"], **{k: loop[k] for k in MIX_COLUMNS},
                          "f64": loop["f64"], "bar": loop["bar"], "memory by width": memory or "-"})
    return lines + _table(table) + [""]


def _shared(rows):
    lines = ["## Shared memory and bank conflicts", "",
             "SASS cannot show bank conflicts; each shared-memory kernel argues their absence in a "
             "'Shared memory:' paragraph of its docstring (or of its module's), quoted here.", ""]
    table = [{"kernel": r["kernel"], "static bytes": r["smem"], "dynamic": "yes" if r["dynamic_shared"] else "no",
              "argument": r["shared_memory_argument"] or "**not argued**"}
             for r in rows if r["smem"] or r["dynamic_shared"]]
    return lines + (_table(table) if table else ["No kernel uses shared memory."]) + [""]


def _roofline(roofline):
    lines = ["## Roofline", ""]
    table = []
    for w in roofline:
        moved = ", ".join(f"{k} {v:.4g}" for k, v in w["bytes_per_unit"].items())
        ceilings = ", ".join(f"{k} {v:.3g}" for k, v in w["ceilings_units_per_s"].items())
        table.append({"workload": w["name"], "unit": w["unit"], "ops/unit": f"{w['ops_per_unit']:.4g}",
                      "bytes/unit": moved, "ceilings (units/s)": ceilings, "bound": w["bound"],
                      "estimate (units/s)": f"{w['units_per_s']:.3g}",
                      "of reference": f"{w['fraction_of_reference']:.2%} of {w['reference_limit']} "
                                      f"({w['reference_units_per_s']:.3g}/s)"})
    lines += _table(table) + [""]
    for w in roofline:
        loop = w["hot_loop"]
        if loop is None:
            issue = ""
        elif "units_per_warp_iteration" in loop:
            issue = (f" Hot loop: {loop['units_per_warp_iteration']:g} {w['unit']}s per warp in "
                     f"{loop['instructions_per_iteration']} instructions.")
        else:
            issue = (f" Hot loop: {loop['warp_macs_per_iteration']} warp MACs in {loop['instructions_per_iteration']} "
                     f"instructions = {loop['macs_per_clock_per_sm']} MAC per clock per SM at full issue.")
        lines.append(f"- {w['name']}: {w['basis']}{issue}")
    lines += ["", "Kernel modules add workloads by defining `ROOFLINE_WORKLOADS` (workload names) and "
              "`roofline(workload)` (kernels/STATIC_REPORT.md).", ""]
    return lines


def _model(record):
    model = record.get("static_model")
    rows = [w for w in record["roofline"] if "prediction" in w]
    if not model or not rows:
        return []
    c = model["constants"]
    bars = model.get("calibration")
    lines = ["## Static model: predictions against measurements", "",
             "Each workload's launches walked through the whole kernels' SASS (bench/static_report/model.py: "
             "instruction counts with loop trip counts, the issue and pipe rates occupancy allows, latency), plus "
             f"its HBM floor and the host's time per call. Constants fitted on the measured kernels as they were "
             f"measured (calibration.py): global load latency {c['global_latency_cycles']} cycles, HBM "
             f"{c['hbm_bytes_per_s']:.3g} B/s, host {c['host_s_per_call'] * 1e3:.2g} ms per call; the walk took "
             f"{model['seconds']} s. Measured: the newest GPU run of the workload's benchmark in bench/results. A "
             "ratio is a check of the model only where the kernel is the one measured: where it changed since, the "
             "prediction is of the new kernel and the measurement of the old, and they are not compared.", ""]
    if bars:
        lines += [f"Calibration ({len(bars['rows'])} kept rows, bench/static_report/calibration_rows.json): "
                  "predicted / measured in sample, with the row left out of the fit, and with its family (kernel "
                  f"module) left out. L2 {c['l2_bytes_per_s']:.3g} B/s; plausible constants (within 10% of the "
                  "best fit's worst ratio): "
                  + ", ".join(f"{k} {lo:.3g}-{hi:.3g}" for k, (lo, hi) in bars["plausible"].items())
                  + f". A prediction's range spans the plausible constants' slow and fast corners, widened by the "
                  f"worst held-out ratio ({bars['held_out_factor']:.2f}x).", ""]
        lines += _table([{"row": e["name"], "family": e["family"], "in sample": e["in_sample"],
                          "left out": e["leave_one_out"], "family left out": e["leave_one_family_out"]}
                         for e in bars["rows"]]) + [""]
    table = []
    for w in rows:
        p, m = w["prediction"], w.get("measured")
        unknown = sum(len(launch["unknown_loops"]) for launch in p["launches"])
        table.append({"workload": w["name"], "predicted (range)": f"{p['range'][0]:.3g}-{p['range'][1]:.3g} "
                      f"{w['unit']}/s ({p['units_per_s']:.3g})",
                      "measured": f"{m['units_per_s']:.3g} ({m['device']}, {m['file']})" if m else "-",
                      "predicted / measured": (f"{m['predicted_over_measured']:.2f}"
                                               + (" (the kernel changed since: not compared)"
                                                  if m["kernel_changed"] else "")) if m else "-",
                      "SM / HBM / host s": f"{p['sm_seconds']:.3g} / {p['hbm_seconds']:.3g} / {p['host_seconds']:.2g}",
                      "loops of unknown trips": unknown})
    return lines + _table(table) + [""]


def render(json_path):
    record = json.loads(json_path.read_text())
    rows = record["rows"]
    lines = ["# Static performance report: every registered CUDA kernel for sm_90 (H100)", "",
             f"Target: {record['target']}. "
             f"Commit {record['commit']}, {record['date']}; {record['kernels']} kernel signatures compiled and "
             f"assembled in {record['compile_and_assemble_seconds']} s on {record['cpu']}. Tools: "
             + "; ".join(f"{k}: {v}" for k, v in record["tools"].items()) + ".", ""]
    lines += _limits(record["limits"])
    lines += ["## Findings", ""]
    if record["problems"]:
        lines += [f"- **{name}**: {'; '.join(found)}" for name, found in record["problems"].items()]
    else:
        lines.append("- No spills, no local memory, no f64 in float32/integer kernels, and every kernel marked "
                     "tensor_cores has IMMA/HMMA in an innermost loop.")
    for what, names in record["observations"].items():
        lines.append(f"- {what}: {', '.join(names) if names else 'none'}")
    lines += ["", "## Kernels", "",
              "Loop columns sum the kernel's innermost loops; f64 counts the whole kernel; memory columns give "
              "width:count (bits).", ""]
    lines += _table(summary_table(rows)) + [""]
    lines += _loops(rows) + _shared(rows) + _roofline(record["roofline"]) + _model(record)
    lines += ["## Definitions", ""] + [f"- {k}: {v}" for k, v in record["definitions"].items()]
    return "\n".join(lines) + "\n"
