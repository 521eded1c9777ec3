"""The peers' side of the comparisons: scripts run by another environment's Python beside a checkout of the
original implementation (nano-egg's JAX, minGRU-pytorch, zero_order_rnn) or a plain PyTorch loop. Each
imports nothing of eggnog and prints JSON lines that eggnog's side (bench/dynamics, bench/throughput,
bench/zorn_paper) reads."""

from pathlib import Path

FOLDER = Path(__file__).resolve().parent  # where eggnog's side finds the scripts it hands to a peer's Python
