"""Every trainer states the GPU memory a rank will hold before it allocates, and refuses a run that
would not fit with one sentence, exit status 2 and no run directory. The simulator is given a device
size by EGGNOG_SIMULATED_GPU_FREE_BYTES; the estimates are compared with the bytes the trainers really
place on the simulated device (kernel launches stubbed out: only the allocations are counted)."""

import weakref

import numpy as np
import pytest

from eggnog.corpus.reader import open_corpus
from eggnog.evolution.es_trainer import EsTrainer
from eggnog.evolution.float_es_memory import float_eggroll_memory
from eggnog.evolution.float_es_trainer import FloatEsRunConfig, FloatEsTrainer
from eggnog.kernels.core.backend import SIMULATED_FREE_VAR, Backend, device_free_bytes
from eggnog.kernels.core.cuda_api import cuda
from eggnog.runtime.errors import BadInput
from eggnog.runtime.step_clock import UNTIMED
from eggnog.runtime.world import init_world
from eggnog.zorn.rge.memory import rge_device_memory
from eggnog.zorn.rge.run import RgeRun, RgeRunConfig
from eggnog.zorn.rge.trainer import NonFiniteLoss
from tests.es_helpers import tiny_config, tiny_corpus
from tests.helpers import assert_user_error, run_script

SIM = Backend("cuda", simulated=True, device_index=0, device_name="CUDA simulator")
NEEDS = "GiB of GPU memory per rank"
FACTOR = 1.25  # estimates lie within this factor of the bytes really allocated


@pytest.fixture
def device_bytes(monkeypatch):
    """Live and peak bytes of the simulator's device allocations; kernels do not run (their outputs
    are left as allocated), so a step costs only its allocations."""
    from numba.cuda.simulator.kernel import FakeCUDAKernel

    counts = {"live": 0, "peak": 0}

    def freed(n):
        counts["live"] -= n

    def counting(original):
        def allocate(*args, **kwargs):
            array = original(*args, **kwargs)
            owner = array._ary  # the numpy buffer: views of it keep it alive, not the wrapper
            while isinstance(owner.base, np.ndarray):
                owner = owner.base
            counts["live"] += array.nbytes
            counts["peak"] = max(counts["peak"], counts["live"])
            weakref.finalize(owner, freed, array.nbytes)
            return array
        return allocate

    for name in ("to_device", "device_array"):
        monkeypatch.setattr(cuda, name, counting(getattr(cuda, name)))
    monkeypatch.setattr(FakeCUDAKernel, "__call__", lambda self, *args: None)
    return counts


def within_factor(estimate, peak):
    return peak / FACTOR <= sum(estimate.values()) <= peak * FACTOR


def test_the_simulator_reports_the_stated_free_bytes():
    assert device_free_bytes(SIM, environ={}) is None
    assert device_free_bytes(SIM, environ={SIMULATED_FREE_VAR: "1048576"}) == 2**20
    assert device_free_bytes(Backend("cpu"), environ={SIMULATED_FREE_VAR: "1048576"}) is None
    with pytest.raises(BadInput, match=SIMULATED_FREE_VAR):
        device_free_bytes(SIM, environ={SIMULATED_FREE_VAR: "lots"})


# ---- the estimates against the allocations --------------------------------------------------------

@pytest.mark.parametrize("settings", [dict(population=64, tokens_per_update=16),  # per-op path (dim 8)
                                      dict(population=64, dim=64, optimizer="adamw"),  # fused kernel
                                      dict(population=256, dim=256, adaptive_noise=True),
                                      dict(model="transformer", population=64)],
                         ids=["egg-per-op", "egg-fused-adamw", "egg-adaptive", "transformer"])
def test_int_eggroll_estimate_follows_the_allocations(tmp_path, device_bytes, settings):
    cfg = tiny_config(**settings)
    trainer = EsTrainer(cfg, init_world(), SIM, open_corpus(tiny_corpus(tmp_path)))
    for _ in range(2):
        trainer.loop_step(UNTIMED)
    trainer.validate()
    assert within_factor(cfg.device_memory(trainer.model, trainer.members), device_bytes["peak"])


@pytest.mark.parametrize("settings", [dict(dim=16, depth=2, tokens_per_update=32),
                                      dict(dim=32, depth=1, perturbation_rank=4, optimizer="sf-adamw"),
                                      dict(dim=8, depth=3, freeze_vectors=True, optimizer="sgd")])
def test_float_eggroll_estimate_follows_the_allocations(tmp_path, device_bytes, settings):
    cfg = FloatEsRunConfig(**{"population": 64, "group_size": 8, "tokens_per_update": 16, "val_rows": 4,
                              "val_tokens": 32, **settings}).resolved()
    trainer = FloatEsTrainer(cfg, init_world(), SIM, open_corpus(tiny_corpus(tmp_path)))
    for _ in range(2):
        trainer.loop_step(UNTIMED)
    trainer.validate()
    assert within_factor(float_eggroll_memory(cfg, trainer.model, trainer.members), device_bytes["peak"])


@pytest.mark.parametrize("settings", [dict(), dict(probes=4, probe_batch=4, optimizer="adam"), dict(model="dnc"),
                                      dict(model="mingru", dim=16), dict(solver="bptt"),
                                      dict(model="dnc", solver="bptt"), dict(model="mingru", dim=16, solver="bptt"),
                                      dict(batch_size=16, validate_every=50)],
                         ids=["lstm", "lstm-probe-batch", "dnc", "mingru", "lstm-bptt", "dnc-bptt", "mingru-bptt",
                              "lstm-validation"])
def test_rge_estimate_follows_the_allocations(device_bytes, settings):
    cfg = RgeRunConfig(**{"task": "copy", "batch_size": 64, "max_seq_len": 10, "hidden_size": 32, "num_heads": 4,
                          "probes": 2, "validate_every": 0, **settings})
    run = RgeRun(cfg, init_world(), SIM)
    for step in range(2):
        run.batch = run.task.batch(step, cfg.batch_size)
        try:
            run.train_step(run.batch)
        except NonFiniteLoss:  # the stubbed kernels leave garbage losses: the allocations happened
            pass
    if cfg.validate_every:
        run.validation.score(run.model, SIM, run.host_params(), init_world())
    assert within_factor(rge_device_memory(run.cfg, run.model.n_params), device_bytes["peak"])  # probe batch chosen


# ---- refusals in process ----------------------------------------------------------------------------

def refused_then_fits(make, monkeypatch, small, large, *fragments):
    monkeypatch.setenv(SIMULATED_FREE_VAR, str(small))
    with pytest.raises(BadInput) as refusal:
        make()
    message = str(refusal.value)
    assert NEEDS in message and "are free" in message and "\n" not in message
    for fragment in fragments:
        assert fragment in message, (fragment, message)
    monkeypatch.setenv(SIMULATED_FREE_VAR, str(large))
    return make()


def test_egg_refuses_a_population_that_does_not_fit_and_says_how_many_would(tmp_path, monkeypatch):
    corpus = open_corpus(tiny_corpus(tmp_path))
    cfg = tiny_config(population=4096, group_size=64, dim=64)
    trainer = refused_then_fits(lambda: EsTrainer(cfg, init_world(), SIM, corpus), monkeypatch, 2**20, 2**30,
                                "members fit at once", "--population")
    assert trainer.memory_line.startswith("GPU memory per rank: about")
    assert trainer.memory_line in cfg.describe(trainer)


def test_transformer_counts_parameters_optimiser_and_windows_beside_the_members():
    cfg = tiny_config("transformer", optimizer="adamw", tokens_per_update=32)
    model = cfg.build_model()
    needs = cfg.device_memory(model, 64)
    assert needs["parameters"] == model.n_params and needs["AdamW state"] == 12 * model.n_params
    per_member = model.evaluation_bytes(32) + 33 * 4  # its noise, vectors and scores, and its int32 window
    assert needs["evaluation of 64 members"] == 64 * per_member + model.launch_bytes(32)


def test_float_es_refuses_a_population_that_does_not_fit(tmp_path, monkeypatch):
    corpus = open_corpus(tiny_corpus(tmp_path))
    cfg = FloatEsRunConfig(population=512, group_size=8).resolved()
    trainer = refused_then_fits(lambda: FloatEsTrainer(cfg, init_world(), SIM, corpus), monkeypatch, 2**20,
                                2**32, "--population")
    assert trainer.memory_line in cfg.describe(trainer)


@pytest.mark.parametrize("model", ["lstm", "dnc", "mingru"])
def test_rge_refuses_a_batch_that_does_not_fit(monkeypatch, model):
    cfg = RgeRunConfig(model=model, batch_size=256, max_seq_len=20)
    run = refused_then_fits(lambda: RgeRun(cfg, init_world(), SIM), monkeypatch, 2**20, 2**33, "--batch-size")
    assert run.memory_line in cfg.describe(run)


# ---- refusals through the scripts -------------------------------------------------------------------

SCRIPT_CASES = {
    "egg": ("train_es.py", ["--population", "65536", "--group-size", "64"]),
    "transformer": ("train_es.py", ["--model", "transformer", "--population", "65536", "--group-size", "64"]),
    "mingru": ("train_es.py", ["--model", "mingru", "--population", "4096"]),
    "rge": ("train_rge.py", ["--batch-size", "4096", "--max-seq-len", "20"]),
    "gossip-egg": ("train_gossip.py", ["--trainer", "egg", "--population", "65536", "--group-size", "64"]),
    "gossip-rge": ("train_gossip.py", ["--trainer", "rge", "--batch-size", "4096", "--max-seq-len", "20"]),
    "gossip-bptt": ("train_gossip.py", ["--trainer", "bptt", "--batch-size", "4096"]),
}


@pytest.mark.parametrize("case", list(SCRIPT_CASES))
def test_scripts_refuse_a_run_that_does_not_fit_before_writing(tmp_path, case):
    script, flags = SCRIPT_CASES[case]
    run_dir = tmp_path / "run"
    result = run_script(script, *flags, "--run-dir", run_dir, "--backend", "cuda", "--steps", "1",
                        env={"NUMBA_ENABLE_CUDASIM": "1", SIMULATED_FREE_VAR: str(2**20), "EGGNOG_PROGRESS": "0"})
    assert_user_error(result, "GiB of GPU memory", "are free")
    assert not run_dir.exists()
