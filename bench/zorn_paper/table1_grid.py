"""The Table 1 grid of the zero-order RNN paper: LSTM sizes, methods, the authors' settings and their
corrected A40 seconds per step (their README; distributed = 8 GPUs), and a memory estimate used to
skip cells that cannot fit."""

import math

from bench.peers import FOLDER as PEERS
from eggnog.zorn.rge.run import RgeRunConfig

# name: (hidden_size, num_heads); input_size = vocab = 100
SIZES = {"100k": (240, 12), "1M": (1600, 32), "10M": (9600, 64), "100M": (66000, 220), "1.1B": (297500, 350)}
METHODS = {"bptt": 0, "cdrge96": 96, "cdrge512": 512}
MODES = ("series", "reduce", "seeds")
# the authors' learning rates (eps = lr) per probe count and size; BPTT: their AdamW lr, 0.01 for 100k and 1M
# but 0.001 for 10M (their medium-bptt LSTM config): Adam's first steps move every weight by about lr, so the
# logits move in proportion to the width, and at 10M on text 0.01 overshoots (8.3 -> 41 bits in one step).
# 100M and 1.1B have no BPTT setting of theirs (out of memory on an A40); they keep the 10M rate.
LR = {96: dict(zip(SIZES, (0.1, 0.1, 0.01, 0.01, 0.005))), 512: dict(zip(SIZES, (0.5, 0.1, 0.1, 0.1, 0.01))),
      0: dict(zip(SIZES, (0.01, 0.01, 0.001, 0.001, 0.001)))}
A40 = {  # seconds per step; None: not run (out of memory on one A40)
    ("bptt", "series"): (0.10, 0.17, 33.7, None, None),
    ("cdrge96", "series"): (5.7, 6.0, 7.8, 24.3, 145),
    ("cdrge512", "series"): (30.0, 31.1, 40.7, 132, 777),
    ("cdrge96", "distributed"): (0.05, 0.06, 0.07, 0.40, 4.4),
    ("cdrge512", "distributed"): (0.25, 0.29, 0.29, 1.87, 19.3),
}
TOKENS = 11  # 2 input + 10 target tokens: 11 recurrent steps


def a40_seconds(size, method, mode):
    row = A40.get((method, "series" if mode == "series" else "distributed"))
    return None if row is None else row[list(SIZES).index(size)]


def cell_config(size, method, mode, batch_size, task, steps, probe_batch=0):
    hidden, heads = SIZES[size]
    probes = METHODS[method]
    return RgeRunConfig(model="lstm", solver="bptt" if probes == 0 else "cdrge", probes=max(probes, 1),
                        lr=LR[probes][size], optimizer="adam" if probes == 0 else "sgd",
                        dist_mode="seeds" if mode == "series" else mode, hidden_size=hidden, num_heads=heads,
                        input_size=100, task=task, batch_size=batch_size, overfit=True, steps=steps,
                        min_seq_len=2, max_seq_len=10, probe_batch=probe_batch)


def lstm_params(size):
    h, n = SIZES[size]
    return 100 * 100 + 4 * 100 * h + 4 * h * h // n + 4 * h + 2 * h + 100 * h + 100


def estimated_bytes(size, method, batch_size):
    """fp32 bytes a cell needs at least: parameters (and a work copy, or gradient and Adam moments),
    the input projection of all steps, and for BPTT the per-step states and gates kept for backward."""
    h = SIZES[size][0]
    params = 4 * lstm_params(size)
    per_step = 4 * batch_size * (4 * h + 2 * h)
    if METHODS[method] == 0:
        return 4 * params + per_step * TOKENS * 2
    return 2 * params + per_step * TOKENS + 4 * batch_size * h * 2


def fits(size, method, batch_size, available):
    need = estimated_bytes(size, method, batch_size)
    return need <= available, math.ceil(need / 2**30)


def torch_loop_command(torch_python, size, method, batch, steps, warmup, device="cpu"):
    """The command of the plain PyTorch loop (bench/peers/table1_torch_loop.py) on one cell, at its learning rate."""
    hidden, heads = SIZES[size]
    probes = METHODS[method]
    return [torch_python, str(PEERS / "table1_torch_loop.py"),
            "--hidden", str(hidden), "--heads", str(heads), "--batch", str(batch),
            "--method", "bptt" if probes == 0 else "cdrge", "--probes", str(max(probes, 1)), "--steps", str(steps),
            "--warmup", str(warmup), "--lr", str(LR[probes][size]), "--device", device]
