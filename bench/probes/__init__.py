"""Small timing kernels for what the static model cannot see (kernels/STATIC_REPORT.md): the L2 bandwidth
under the EGG epoch's weight loads, the dp4a and IMMA issue rates, 16-byte loads under two blocks an SM,
grid.sync and a cooperative launch, the TF32 matmul's asynchronous-copy ring and the persistent LSTM's
inner loop. `python -m bench.probes --list` names them and the constant each row gives; `catalog.py`
holds that list without importing a kernel, so `--list` and `--help` need no GPU.
"""
