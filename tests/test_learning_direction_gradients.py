"""Every gradient-side trainer learns in the right direction: CD-RGE and FDRAS (zero-order estimates;
the fused SGD step, Adam, and the estimate summed over ranks then stepped on the host) on a tiny
multi-head LSTM overfitting one fixed copy-task batch, and the BPTT trainer with each optimiser
(Schedule-Free AdamW, AdamW, SGD) on a tiny MinGRU LM over a fixed slice of bytes. Each test runs the
real trainer's step a stated number of times and asserts that the loss on fixed data (bits) falls by at
least a stated margin.

The margins are about half of the fall measured at these seeds (given beside each), so a slower but
correct trainer still passes while a reversed update, whose loss rises instead, fails by far: the
estimate's sign flipped in RgeTrainer.coefficients, the host step of "reduce" mode reversed, or an
optimiser's step sign flipped (in training/optimizers.py or its CPU twin in kernels/optim/float_steps.py),
each makes its test fail."""

import numpy as np
import pytest

from eggnog.corpus.reader import ByteCorpus
from eggnog.kernels.core.backend import Backend
from eggnog.models.lstm import LstmConfig, LstmModel
from eggnog.runtime.world import init_world
from eggnog.training.mingru.bptt import BpttRunConfig, BpttTrainer
from eggnog.zorn.rge.trainer import RgeConfig, RgeTrainer
from eggnog.zorn.tasks import VOCAB, make_task

CPU = Backend("cpu")

# ---- zero-order: CD-RGE and FDRAS on a fixed copy-task batch ---------------------------------------------

LSTM = LstmModel(LstmConfig(VOCAB, 4, 8, 2))  # 1,604 parameters
COPY_BATCH = make_task("copy", 2, 4, seed=1).batch(0, 8)
RGE_STEPS = 60
# 16 probes, sigma 0.01 for all; "seeds" (the default) steps with the fused SGD pass or the optimiser,
# "reduce" sums the estimate over ranks and steps on the host: another code path, one rank here
RGE_SETTINGS = {"sgd": dict(lr=0.2), "adam": dict(optimizer="adam", lr=0.02),
                "sgd-reduce": dict(lr=0.2, dist_mode="reduce")}
# Measured falls after 60 steps from 6.756 bits: cdrge and fdras alike, sgd 1.59 (both modes), adam 1.36.
# Half of the smaller, rounded; a reversed estimate raises the loss.
RGE_MARGIN_BITS = 0.7


@pytest.mark.parametrize("setting", sorted(RGE_SETTINGS))
@pytest.mark.parametrize("solver", ["cdrge", "fdras"])
def test_zero_order_estimates_lower_the_loss(solver, setting):
    cfg = RgeConfig(solver=solver, probes=16, sigma=0.01, **RGE_SETTINGS[setting])
    trainer = RgeTrainer(LSTM, cfg, CPU, LSTM.init_params(2), 9, 0, init_world())
    before = LSTM.loss("cpu", trainer.theta, COPY_BATCH)
    for _ in range(RGE_STEPS):
        trainer.train_step(COPY_BATCH)
    after = LSTM.loss("cpu", trainer.theta, COPY_BATCH)
    assert before - after >= RGE_MARGIN_BITS, (
        f"{solver} with {setting}: loss {before:.3f} -> {after:.3f} bits after {RGE_STEPS} steps, "
        f"a fall under {RGE_MARGIN_BITS}")


# ---- BPTT: a MinGRU LM on a fixed slice of bytes, with each optimiser ------------------------------------

TEXT = (b"a careful reviewer reads every line. the loss must fall when the update goes the right way, "
        b"and rise when it is reversed. ")
TRAIN = np.frombuffer(TEXT * 40, np.uint8)
VAL = TRAIN[:1000]  # the same text: validation is the loss on fixed, learnable data
BPTT = dict(dim=16, depth=1, chunk_size=16, context_chunks=2, batch_size=4, val_rows=4, val_tokens=64, seed=2)
BPTT_STEPS = 40
BPTT_LR = {"sf-adamw": 1e-2, "adamw": 1e-2, "sgd": 0.1}  # sgd with the default momentum 0.9
# Measured falls of the validation loss after 40 steps from 7.995 bits: sf-adamw 4.03, adamw 4.17,
# sgd 3.98. About half; a reversed step raises the loss.
BPTT_MARGIN_BITS = 2.0


@pytest.mark.parametrize("optimizer", sorted(BPTT_LR))
def test_bptt_lowers_the_loss_with_each_optimizer(optimizer):
    cfg = BpttRunConfig(**BPTT, optimizer=optimizer, lr=BPTT_LR[optimizer], steps=BPTT_STEPS).resolved()
    trainer = BpttTrainer(cfg, init_world(), CPU, ByteCorpus("fixed bytes", TRAIN, VAL))
    before = trainer.validate()  # at the optimiser's evaluation point (x for sf-adamw)
    for _ in range(BPTT_STEPS):
        trainer.train_step()
    after = trainer.validate()
    assert before - after >= BPTT_MARGIN_BITS, (
        f"bptt with {optimizer}: validation loss {before:.3f} -> {after:.3f} bits after {BPTT_STEPS} steps, "
        f"a fall under {BPTT_MARGIN_BITS}")
