"""The H100 (sm_90) figures the static report judges kernels against: per-SM resource limits for
occupancy, and the H100 SXM5 peaks for the roofline. All are stated in the report."""

from math import ceil

# Per-SM and per-block limits of compute capability 9.0 (CUDA programming guide, compute capabilities
# table; the rounding follows cuda_occupancy.h).
SM90 = {
    "registers_per_sm": 65536,
    "registers_per_block": 65536,
    "max_registers_per_thread": 255,
    "register_allocation_per_warp": 256,  # a warp's registers are allocated in units of 256
    "register_sub_partitions": 4,  # registers are allocated per SM sub-partition (one per scheduler)
    "shared_memory_per_sm": 228 * 1024,  # the largest carveout, which the driver picks when needed
    "shared_memory_per_block": 227 * 1024,
    "shared_memory_reserved_per_block": 1024,  # the system's 1 KB per block (cc 8.0 and later)
    "shared_memory_allocation": 128,
    "max_threads_per_sm": 2048,
    "max_threads_per_block": 1024,
    "max_blocks_per_sm": 32,
    "warp_size": 32,
}

# H100 SXM5 dense peaks (NVIDIA datasheet); the L2 figure is an estimate, not a datasheet number.
H100_SXM = {
    "int8_tensor": 1979e12,  # int8 ops/s (2 per multiply-accumulate), dense
    "bf16_tensor": 989e12,  # FLOP/s, bf16 or fp16 inputs, dense
    "tf32_tensor": 495e12,  # FLOP/s, dense
    "fp32_simt": 67e12,  # FLOP/s, FFMA on the CUDA cores
    "hbm": 3.35e12,  # bytes/s, HBM3
    "l2": 5.5e12,  # bytes/s, L2 to SMs: an estimate
}
PEAK_UNITS = {"int8_tensor": "int8 op/s", "bf16_tensor": "FLOP/s", "tf32_tensor": "FLOP/s", "fp32_simt": "FLOP/s",
              "hbm": "B/s", "l2": "B/s"}
SM_COUNT = 132
ISSUE_CLOCK_HZ = 1.98e9  # maximum boost clock (the one the fp32 peak assumes: 132 SMs x 128 FMA x 2 x 1.98 GHz)
SCHEDULERS_PER_SM = 4  # each issues at most one warp instruction per clock


def _round_up(x, unit):
    return unit * ceil(x / unit)


def occupancy(registers, shared_bytes, block, limits=SM90):
    """Resident blocks and warps per SM for a kernel's registers per thread and static shared memory at
    `block` threads, with the limit(s) that bind (cuda_occupancy.h's model, no dynamic shared memory)."""
    warp = limits["warp_size"]
    warps = ceil(block / warp)
    max_warps = limits["max_threads_per_sm"] // warp
    per_warp = _round_up(max(registers, 1) * warp, limits["register_allocation_per_warp"])
    parts = limits["register_sub_partitions"]
    if (registers > limits["max_registers_per_thread"] or block > limits["max_threads_per_block"]
            or per_warp * _round_up(warps, parts) > limits["registers_per_block"]):
        by_registers = 0
    else:
        by_registers = (limits["registers_per_sm"] // parts // per_warp) * parts // warps
    smem = _round_up(shared_bytes + limits["shared_memory_reserved_per_block"], limits["shared_memory_allocation"])
    by_smem = 0 if shared_bytes > limits["shared_memory_per_block"] else limits["shared_memory_per_sm"] // smem
    bound = {"registers": by_registers, "shared memory": by_smem, "warps": max_warps // warps,
             "blocks": limits["max_blocks_per_sm"]}
    blocks = min(bound.values())
    return {"blocks_per_sm": blocks, "warps_per_sm": blocks * warps, "occupancy": round(blocks * warps / max_warps, 3),
            "limited_by": [name for name, value in bound.items() if value == blocks]}


def stated_limits():
    """The figures above as one record for the report."""
    return {"sm_90_occupancy": SM90, "h100_sxm_peaks": H100_SXM, "peak_units": PEAK_UNITS, "sm_count": SM_COUNT,
            "issue_clock_hz": ISSUE_CLOCK_HZ, "schedulers_per_sm": SCHEDULERS_PER_SM,
            "l2_bandwidth_is_estimate": True}
