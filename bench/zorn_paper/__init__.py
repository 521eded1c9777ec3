"""The zero-order RNN paper's Table 1 (seconds per step and memory of BPTT and CD-RGE on its LSTMs, each
cell in its own process, beside a plain PyTorch loop), Table 2 (sort, copy, reverse) and Figure 1 (the DNC
overfitting one batch): `python -m bench.zorn_paper.table1` and the like."""
