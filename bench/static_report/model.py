"""The static model: seconds of a workload's launches on an H100, from the kernels' SASS (walk.py) and
each launch's own values.

A launch is {"kernel": registered name, "grid": blocks, "block": threads, "args": [...], "shared":
dynamic shared bytes}; args follow the kernel's signature: a NumPy array gives its shape and contents
(small tables whose values steer loops), {"shape": ..., "dtype": ...} an array whose contents do not
matter, a number a scalar. Block 0 is walked; the blocks resident on an SM (occupancy: registers and
shared memory) share its four schedulers, warp w of each on scheduler w % 4. A wave of resident blocks
takes the longer of one block's lockstep time (its segments between barriers, walk.py) and the
throughput of them all (each scheduler's issue slots and busiest pipe, the SM's L1, L2 and tensor
pipes); the grid runs in full waves and a last partial one. A workload adds its launches' times, takes
at least its HBM bytes at the calibrated bandwidth, and adds the host's time per call (calibration.py).
"""

import re
from math import ceil

import numpy as np

from bench.static_report import machine
from bench.static_report.flows import SM_PIPES, per_scheduler
from bench.static_report.limits import H100_SXM, ISSUE_CLOCK_HZ, SM_COUNT, occupancy
from bench.static_report.timing import Timing
from bench.static_report.walk import Kernel, Walker

PARAM_BASE = 0x210  # kernel parameters in constant bank 0 on sm_90
_PARAM = re.compile(r"\.param\s+(?:\.align\s+\d+\s+)?\.[a-z](\d+)\s+\S+?_param_\d+(\[\d+\])?")


def param_sizes(ptx):
    """Byte sizes of the entry's parameters, in order."""
    entry = ptx[ptx.index(".entry"):]
    sizes = []
    for bits, array in _PARAM.findall(entry[:entry.index(")")]):
        if array:
            raise ValueError("aggregate kernel parameters are not modelled")
        sizes.append(int(bits) // 8)
    return sizes


def flatten(signature, args, addresses):
    """numba's flattened kernel arguments: an array is (meminfo, parent, nitems, itemsize, data, *shape,
    *strides), a scalar itself."""
    out = []
    for arg_type, arg, address in zip(getattr(signature, "args", signature), args, addresses):
        if hasattr(arg_type, "ndim"):
            shape = tuple(arg.shape) if hasattr(arg, "shape") else tuple(arg["shape"])
            itemsize = np.dtype(arg.dtype if hasattr(arg, "dtype") else arg["dtype"]).itemsize
            strides, step = [], itemsize
            for n in reversed(shape):
                strides.insert(0, step)
                step *= n
            out += [0, 0, int(np.prod(shape)), itemsize, address, *shape, *strides]
        else:
            out.append(int(arg))
    return out


def fits(signature, args):
    """Whether a compiled signature takes these launch arguments: arrays (NumPy, or {"shape", "dtype"}) of
    its ranks and dtypes where it takes arrays, scalars elsewhere."""
    types = getattr(signature, "args", signature)
    if len(types) != len(args):
        return False
    for arg_type, arg in zip(types, args):
        array = isinstance(arg, (np.ndarray, dict))
        if array != hasattr(arg_type, "ndim"):
            return False
        if array:
            shape, dtype = (arg.shape, arg.dtype) if isinstance(arg, np.ndarray) else (arg["shape"], arg["dtype"])
            if arg_type.ndim != len(shape) or str(arg_type.dtype) != str(np.dtype(dtype)):
                return False
    return True


def constant_bank(ptx, signature, args, grid, block, addresses):
    """Constant bank 0 of a launch: block and grid sizes, then the parameters at natural alignment."""
    values = flatten(signature, args, addresses)
    sizes = param_sizes(ptx)
    if len(values) != len(sizes) or len(args) != len(getattr(signature, "args", signature)):
        raise ValueError(f"{len(values)} flattened arguments for {len(sizes)} kernel parameters")
    bank = bytearray(PARAM_BASE + 8 * len(sizes) + 64)
    for k, v in enumerate((*block, *grid)):
        bank[4 * k:4 * k + 4] = int(v).to_bytes(4, "little")
    offset = PARAM_BASE
    for size, value in zip(sizes, values):
        offset = -(-offset // size) * size
        bank[offset:offset + size] = (int(value) % (1 << 8 * size)).to_bytes(size, "little")
        offset += size
    return bytes(bank)


def _dims(n):
    return tuple(n) + (1,) * (3 - len(n)) if isinstance(n, (tuple, list)) else (int(n), 1, 1)


def walk_block(instructions, ptx, signature, launch, timing):
    """The Tally of block 0's warps (walk.py)."""
    grid, block = _dims(launch["grid"]), _dims(launch["block"])
    addresses = [(k + 1) << 36 for k in range(len(launch["args"]))]  # low halves never carry
    memory = [(a, np.ascontiguousarray(arg).tobytes()) for a, arg in zip(addresses, launch["args"])
              if isinstance(arg, np.ndarray)]
    bank = constant_bank(ptx, signature, launch["args"], grid, block, addresses)
    threads = block[0] * block[1] * block[2]
    ids = np.arange(32 * ceil(threads / 32))
    special = {"SR_TID.X": ids % block[0], "SR_TID.Y": ids // block[0] % block[1],
               "SR_TID.Z": ids // (block[0] * block[1]), "SR_LANEID": ids % 32}
    special = {k: v.astype(np.uint64) for k, v in special.items()}
    special.update({f"SR_CTAID.{a}": np.zeros(len(ids), np.uint64) for a in "XYZ"})
    warps = machine.Warps(bank, special, memory, len(ids))
    warps.mask = ids < threads
    # registers start at zero: code never reads bits it has not written (it keeps predicates in the bits of
    # a register it never cleared), so the zeros steer nothing and those bits stay known
    warps.r.update({f"{prefix}{k}": warps.lanes(0) for prefix, n in (("R", 255), ("UR", 63)) for k in range(n)})
    warps.p.update({f"{prefix}{k}": np.zeros(len(ids), bool) for prefix in ("P", "UP") for k in range(7)})
    return Walker(Kernel(instructions, timing), warps).run()


def launch_cycles(tally, registers, shared_bytes, threads, blocks):
    """Cycles of a launch of `blocks` blocks from block 0's Tally, and the terms of a full wave."""
    blocks_per_sm = occupancy(registers, shared_bytes, threads)["blocks_per_sm"]
    if blocks_per_sm == 0:
        raise ValueError("the kernel cannot be resident at this block size")
    resident = min(blocks_per_sm, ceil(blocks / SM_COUNT))
    full, rest = divmod(blocks, SM_COUNT * resident)
    alone = tally.block_cycles()

    def wave(b):
        terms = {"block": alone, "issue": b * per_scheduler(tally.issued).max(),
                 "pipe": max([b * per_scheduler(v).max() for k, v in tally.pipes.items() if k not in SM_PIPES] or [0])}
        for name in SM_PIPES:
            terms[name] = b * tally.pipes[name].sum() if name in tally.pipes else 0.0
        return terms

    terms = wave(resident)
    total = full * max(terms.values()) + (max(wave(ceil(rest / SM_COUNT)).values()) if rest else 0.0)
    return total, {"blocks_per_sm": resident, "waves": full + (rest > 0), **{k: round(v) for k, v in terms.items()}}


def predict(workload, code, constants):
    """Units per second of a workload with launches; `code[kernel name]` lists (signature, SASS
    instructions of its entry, PTX, registers, static shared bytes) per compiled signature."""
    timing = Timing(constants["global_latency_cycles"], constants.get("l2_bytes_per_s", H100_SXM["l2"]))
    device, launches = 0.0, []
    for launch in workload["launches"]:
        tally, found = None, None
        for signature, instructions, ptx, registers, smem in code[launch["kernel"]]:
            if not fits(signature, launch["args"]):
                continue
            try:
                tally = walk_block(instructions, ptx, signature, launch, timing)
            except ValueError:  # another signature's parameters
                continue
            found = registers, smem + launch.get("shared", 0)
            break
        if tally is None:
            raise ValueError(f"no compiled signature of {launch['kernel']} takes the workload's arguments")
        grid, block = _dims(launch["grid"]), _dims(launch["block"])
        cycles, terms = launch_cycles(tally, *found, int(np.prod(block)), int(np.prod(grid)))
        device += cycles / ISSUE_CLOCK_HZ
        launches.append({"kernel": launch["kernel"], "seconds": _digits(cycles / ISSUE_CLOCK_HZ), **terms,
                         "warp_instructions": _digits(tally.issued.sum()),
                         "unknown_loops": {hex(a): n for a, n in tally.unknown_loops.items()},
                         "unknown_branches": _digits(tally.unknown_branches)})
    units = workload["units"]
    hbm = workload["bytes_per_unit"].get("hbm", 0) * units / constants["hbm_bytes_per_s"]
    host = constants["host_s_per_call"]
    seconds = max(device, hbm) + host
    return {"units_per_s": _digits(units / seconds), "seconds": _digits(seconds), "sm_seconds": _digits(device),
            "hbm_seconds": _digits(hbm), "host_seconds": _digits(host),
            "bound": "hbm" if hbm > device else "sm", "launches": launches}


def _digits(x):
    return float(f"{x:.3g}")
