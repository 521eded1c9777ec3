"""Counter-based noise: every value a pure function of (seed, tensor id, epoch, member, element).

    scalar_math       the hash and the draws, written once, compiled for the CPU and the GPU
    reference         the NumPy reference of the same streams (data samplers use it too)
    streams           ops: any slice of an int8 or float32 stream
    normal_rows       op: float32 normal rows of many members of one tensor
    gains             per-position noise gains (d-eggs' adaptive noise scaling)
    perturb           ops: CD-RGE probes of a flat float32 parameter vector
"""
