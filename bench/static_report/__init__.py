"""The static report of every registered CUDA kernel for sm_90, without a GPU: `python -m
bench.static_report` (__main__.py). Its parts: tools (finding and running ptxas, cuobjdump, nvdisasm),
parse (ptxas logs and SASS listings), limits (the sm_90 and H100 figures), checks (what a kernel must
not have, and the observations), roofline (workload estimates), workloads (those workloads and the model's
code of the kernels they launch), markdown (the .md beside the JSON), and the static model that predicts
workloads from the whole kernels' SASS: operands and machine (what instructions compute), walk (counts,
trip counts, latency), timing (what instructions cost), model (a launch's time), measurements (the GPU
rows in bench/results), fitting (the constants' grid and fit), keep and error_bars (the rows fitted on, the
held-out errors) and calibration (the refit and its command). goals (`python -m
bench.static_report.goals`) predicts the float paths' goal rows, whole training steps traced by steps;
written reads a report the report wrote. What it reads from kernel modules: kernels/STATIC_REPORT.md."""
