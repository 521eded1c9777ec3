"""The static report of every registered CUDA kernel for sm_90, without a GPU: `python -m
bench.static_report` (__main__.py). Its parts: tools (finding and running ptxas, cuobjdump, nvdisasm),
parse (ptxas logs and SASS listings), limits (the sm_90 and H100 figures), checks (what a kernel must
not have, and the observations), roofline (workload estimates) and markdown (the .md beside the JSON).
What it reads from kernel modules: kernels/STATIC_REPORT.md."""
