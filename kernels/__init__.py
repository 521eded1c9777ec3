"""Hand-written kernels: each operation has a NumPy reference, a CPU twin and a CUDA kernel."""
