"""bench/gpu/host_path.py refuses, in one sentence and with exit status 2, to run off the simulator or with
widths and counts it cannot use, before any step runs and without writing a result."""

import os
import subprocess
import sys

import pytest

from eggnog.corpus.default import default_corpus
from tests.helpers import ROOT


@pytest.mark.parametrize("simulator,args,fragment", [
    ("0", [], "simulator only"),
    ("1", ["--hidden", "4"], "--hidden >= 12"),
    ("1", ["--probes", "-1"], "--probes >= 0"),
])
def test_bad_inputs_are_refused(tmp_path, simulator, args, fragment):
    env = dict(os.environ, NUMBA_ENABLE_CUDASIM=simulator, EGGNOG_BENCH_RESULTS=str(tmp_path),
               PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    result = subprocess.run([sys.executable, "-m", "bench.gpu.host_path", *args], capture_output=True, text=True,
                            env=env, cwd=ROOT, timeout=120)
    assert result.returncode == 2, result.stderr
    assert fragment in result.stderr and len(result.stderr.strip().splitlines()) == 1, result.stderr
    assert not any(tmp_path.iterdir())


def test_a_cdrge_step_and_a_mingru_bptt_step_after_warm_up():
    """The counting hook over a CD-RGE step (an LSTM at width 4, 2 probes: one pass of 4 evaluations; short
    copy samples keep the simulator quick) and a MinGRU BPTT step: nothing allocated, one wait (the losses),
    the batch uploaded once (CD-RGE: the batch, the probe keys and scales, the update's coefficients; BPTT:
    the chunk, beside the optimiser's scalars). bench/gpu/host_path.py counts the Table 1 sizes."""
    from bench.gpu.host_path import counted_step
    from eggnog.kernels.core.backend import Backend
    from eggnog.runtime.world import init_world
    from eggnog.training.mingru.bptt import BpttRunConfig, BpttTrainer
    from eggnog.zorn.rge.run import RgeRun, RgeRunConfig

    device = Backend("cuda", simulated=True)
    cfg = RgeRunConfig(hidden_size=4, num_heads=2, input_size=2, batch_size=1, probes=2, min_seq_len=1,
                       max_seq_len=1, steps=3, validate_every=0)
    run = RgeRun(cfg, init_world(), device)
    cdrge = counted_step(lambda index: run.train_step(run.task.batch(index, cfg.batch_size)))
    assert (cdrge.allocations, cdrge.host_waits, cdrge.uploads) == (0, 1, 3), cdrge
    assert cdrge.launches <= 11 and cdrge.by_kernel["probe_copies_cuda"] == 1, cdrge
    bptt_cfg = BpttRunConfig(dim=8, depth=1, batch_size=1, chunk_size=2, steps=3, val_rows=1, val_tokens=4).resolved()
    trainer = BpttTrainer(bptt_cfg, init_world(), device, default_corpus())
    bptt = counted_step(lambda index: trainer.train_step())
    assert (bptt.allocations, bptt.host_waits) == (0, 1), bptt
    # two uploads: the chunk's inputs and targets packed (2 bytes each, at 8-byte offsets) and SF-AdamW's 9 scalars
    assert (bptt.uploads, bptt.uploaded_bytes) == (2, 2 * 8 + 9 * 4), bptt
