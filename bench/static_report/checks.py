"""What the static report holds against a compiled kernel (and the test fails on), and the summary
observations it prints. A row is one kernel signature as __main__ builds it."""

import inspect
import re
import sys

INT64_HEAVY = 0.25  # share of an innermost loop's instructions spent on 64-bit integer halves
_PARAGRAPH = re.compile(r"^\s*Shared memory:.*?(?=\n\s*\n|\Z)", re.S | re.M)


def loop_total(row):
    """The instruction mix summed over a row's innermost loops."""
    total = {}
    for loop in row["sass"]["innermost_loops"]:
        for key, value in loop.items():
            if isinstance(value, int) and key not in ("start", "end", "depth", "function"):
                total[key] = total.get(key, 0) + value
    return total


def problems(row):
    """Sentences naming what a kernel must not have: spills, local memory, f64 in a float32/integer
    kernel, and, for a kernel marked tensor_cores, innermost loops without IMMA/HMMA."""
    found = []
    if row["spill_stores"] or row["spill_loads"]:
        found.append(f"spills: {row['spill_stores']} bytes stored, {row['spill_loads']} bytes loaded")
    if row["stack_frame"] or row["sass"]["local_accesses"]:
        found.append(f"local memory: {row['stack_frame']} bytes stack frame, "
                     f"{row['sass']['local_accesses']} local loads/stores")
    if row["float64_free"] and row["sass"]["whole"]["f64"]:
        found.append(f"{row['sass']['whole']['f64']} f64 instructions in a float32/integer kernel")
    if row["tensor_cores"] and not any(loop["mma"] for loop in row["sass"]["innermost_loops"]):
        found.append("marked tensor_cores but no innermost loop issues IMMA/HMMA/HGMMA")
    return found


def shared_memory_argument(pyfunc):
    """The 'Shared memory:' paragraph of a kernel's docstring, else of its module's (the case against
    bank conflicts), or None."""
    module = sys.modules.get(getattr(pyfunc, "__module__", None))
    for doc in (inspect.getdoc(pyfunc), getattr(module, "__doc__", None)):
        found = _PARAGRAPH.search(doc or "")
        if found:
            return " ".join(found.group(0).split())
    return None


def observations(rows):
    """Lists of kernels worth a look, keyed by what was seen."""
    seen = {"spills or local memory": [], "f64 instructions": [], "calls in innermost loops": [],
            "64-bit-heavy innermost loops": [], "8/16-bit memory accesses in innermost loops": [],
            "occupancy below 50%": [], "shared memory, bank conflicts not argued": [],
            "tensor-core instructions": []}
    for row in rows:
        name = row["kernel"]
        loops = loop_total(row)
        if row["spill_stores"] or row["spill_loads"] or row["stack_frame"] or row["sass"]["local_accesses"]:
            seen["spills or local memory"].append(name)
        if row["sass"]["whole"]["f64"]:
            seen["f64 instructions"].append(f"{name} ({row['sass']['whole']['f64']})")
        if loops.get("call"):
            seen["calls in innermost loops"].append(f"{name} ({loops['call']})")
        if loops.get("instructions") and loops["int64"] >= INT64_HEAVY * loops["instructions"]:
            seen["64-bit-heavy innermost loops"].append(f"{name} ({loops['int64']}/{loops['instructions']})")
        narrow = sum(v for k, v in loops.items() if k.endswith("_8") or k.endswith("_16"))
        if narrow:
            seen["8/16-bit memory accesses in innermost loops"].append(f"{name} ({narrow})")
        if row["occupancy"]["occupancy"] < 0.5:
            seen["occupancy below 50%"].append(
                f"{name} ({row['occupancy']['occupancy']:.0%}, {'/'.join(row['occupancy']['limited_by'])})")
        if (row["smem"] or row["dynamic_shared"]) and not row["shared_memory_argument"]:
            seen["shared memory, bank conflicts not argued"].append(name)
        if row["sass"]["whole"]["mma"]:
            seen["tensor-core instructions"].append(f"{name} ({row['sass']['whole']['mma']})")
    return seen
