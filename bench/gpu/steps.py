"""What a GPU run runs (bench/gpu/run.py): four plans, each sized to one command of a short GPU slot.

- QUICK (`bash bench/gpu/run.sh --quick`, 150 s): the node's CUDA stack (bin/selfcheck.py --gpu), the GPU
  tests of the riskiest mechanisms (QUICK_TESTS), one EGGROLL point at the headline size and d-eggs'
  transformer at a small population.
- FULL (`bash bench/gpu/run.sh`, 450 s): the GPU tests QUICK left out, d-eggs' transformer at its population
  chunk, eggnog beside nano-egg's JAX (with --nano-egg), the float benchmarks beside PyTorch and
  Table 1's ends (100k, 10M) beside a plain PyTorch loop.
- PROFILE (`bash bench/gpu/run.sh --profile`, 300 s): where the time goes (bench/gpu/profile.py): per-kernel
  times of the EGGROLL evaluates, kernel-only scan and matmul, each op of a MinGRU BPTT step, the host
  profile of a Table 1 CD-RGE step, and Nsight Compute's sections of the two fused epochs.

Every estimate is seconds on one H100, start-up and kernel compilation included, taken from what the
H100 runs measured (bench/results/gpu-h100-80gb-hbm3-2026-11-27*.json: each step's `seconds`) with a
margin for what has changed since. A wrong one
costs at most the steps after it, since no step runs past the budget. A step with a peer
(`peer`: "torch" or "nano-egg") runs it where the peer is at hand (`peer_s` more seconds) and
otherwise runs eggnog's side alone, or is skipped when `needs_peer`. The static report is not here: it
needs no GPU.
"""

import sys
from dataclasses import dataclass, field, replace
from pathlib import Path

PY = sys.executable  # the python3 that runs the runner runs every step, in the same environment

QUICK_BUDGET_S = 150
FULL_BUDGET_S = 450
PROFILE_BUDGET_S = 300
# The probe before the first step (bench/gpu/run.py): a process that imports numba and opens a
# CUDA context; counted against the budget like a step.
PROBE_S = 10


@dataclass(frozen=True)
class Step:
    name: str
    what: str
    argv: tuple
    estimate_s: int  # seconds on one H100, start-up and kernel compilation included
    env: dict = field(default_factory=dict)
    outcome: str | None = None  # a pattern for the output line that sums the step up (pytest's last line)
    peer: str | None = None  # "torch" or "nano-egg": run beside eggnog's side where it is at hand
    peer_s: int = 0  # seconds the peer adds to the estimate
    needs_peer: bool = False  # without its peer the step has nothing to add: skipped
    basis: str | None = None  # where estimate_s comes from when no run has measured the step

    @property
    def script(self):
        """The repository file the step runs, if it runs one (a missing one skips the step): a script,
        or the file of a bench module run with -m."""
        first = str(self.argv[1]) if len(self.argv) > 1 else ""
        if first == "-m" and len(self.argv) > 2 and str(self.argv[2]).startswith("bench."):
            return str(self.argv[2]).replace(".", "/") + ".py"
        return first if first.endswith(".py") else None

    def script_in(self, repo):
        """Whether the step's script is in the checkout at `repo` (a bench package run with -m counts by
        its __main__.py)."""
        path = Path(repo) / self.script
        return path.is_file() or (path.with_suffix("") / "__main__.py").is_file()

    def command(self):
        return " ".join("python3" if a == PY else str(a) for a in self.argv)


# The GPU tests of the mechanisms most likely to break on real hardware (node ids or whole files).
QUICK_TESTS = (
    "tests/gpu/test_mma_gpu.py",  # IMMA and HMMA fragment layouts the tensor-core kernels rely on
    "tests/gpu/test_int_path_gpu.py::test_eggroll_epoch",  # the fused EGG epoch, bit for bit
    "tests/gpu/test_lstm_sequence_gpu.py",  # the three LSTM modes, the persistent cooperative one among them
    "tests/gpu/test_matmul_tf32_gpu.py",  # the TF32 tensor-core matmul
    "tests/gpu/test_float_models_gpu.py::test_scan_accuracy_at_64k_steps",
    "tests/gpu/test_float_models_gpu.py::test_scan_backward_with_approximate_gates_matches_the_reference",
)

PYTEST = (PY, "-m", "pytest", "-q", "-rs")
DEGGS_THROUGHPUT = (PY, "-m", "bench.throughput.eggroll", "--model", "transformer", "--depth", "4", "--dim", "256",
                    "--head-dim", "64", "--vocab-size", "8192", "--tokens", "64", "--backend", "cuda")
# a GPU that numba cannot use fails the step instead of skipping every test
ON_THE_GPU = {"EGGNOG_REQUIRE_GPU": "1"}
PYTEST_OUTCOME = r"\d+ (passed|failed|error|skipped)"

QUICK = (
    # measured 4.9 and 5.1 s
    Step("selfcheck", "the node's CUDA stack: versions, linker, cudadevrt, shared memory, IMMA and HMMA",
         (PY, "bin/selfcheck.py", "--gpu"), 10),
    # measured 50.3 and 55.7 s
    Step("gpu-tests-quick", "GPU tests of the riskiest mechanisms: mma, fused EGG epoch, LSTM modes, TF32, scan",
         PYTEST + QUICK_TESTS, 60, ON_THE_GPU, outcome=PYTEST_OUTCOME),
    # measured 10.8 and 11.2 s
    Step("eggroll", "EGGROLL, EGG 6x256, population 32768, 100 bytes, perturbed and plain",
         (PY, "-m", "bench.throughput.eggroll", "--depth", "6", "--dim", "256", "--populations", "32768",
          "--tokens", "100", "--backend", "cuda"), 20),
    # measured 29.9 s, most of it the tensor-core epoch's compile
    Step("eggroll-transformer", "EGGROLL, d-eggs' transformer 4x256 (heads of 64, vocabulary 8192), population "
         "4096, 64 tokens", DEGGS_THROUGHPUT + ("--populations", "4096"), 35),
)

# Ordered by what a GPU run is for: correctness, then the peers, then the suite with the most cells
# last, since a stopped Table 1 keeps the rows it printed (one per cell).
FULL = (
    # measured 115.7 s (53 tests, the transformer's at full size among them)
    Step("gpu-tests", "the GPU tests the quick run leaves out",
         PYTEST + ("tests/gpu",) + tuple(f"--deselect={t}" for t in QUICK_TESTS), 120, ON_THE_GPU,
         outcome=PYTEST_OUTCOME),
    # measured 11.7 s (the kernel in numba's cache from the GPU tests)
    Step("eggroll-transformer", "EGGROLL, d-eggs' transformer 4x256 (heads of 64, vocabulary 8192), population "
         "40960 (its chunk), 64 tokens", DEGGS_THROUGHPUT + ("--populations", "40960"), 15),
    # measured 47.6 s with nano-egg: eggnog's side as the quick plan's eggroll step (~11 s); nano-egg's JAX
    # compiles its vmapped epoch twice (perturbed, plain) and runs 8 evaluations of 32768 x 100 bytes
    Step("eggroll-nano-egg", "EGGROLL, EGG 6x256, population 32768, 100 bytes: eggnog beside nano-egg's JAX",
         (PY, "-m", "bench.throughput.nano_egg_side_by_side", "--backend", "cuda", "--configs", "6x256:32768",
          "--tokens", "100"),
         15, peer="nano-egg", peer_s=40, needs_peer=True),
    # measured 4.4 s
    Step("scan", "MinGRU scan 8x4096x1536", (PY, "-m", "bench.throughput.scan", "--shapes", "8x4096x1536",
                                             "--backend", "cuda"), 10),
    # measured 9.1 s, the library rows (torch, CuPy) included
    Step("matmul", "fp32 and TF32 matmul 32768x1536x1536, cuBLAS/cuBLASLt beside it",
         (PY, "-m", "bench.throughput.matmul", "--shapes", "32768x1536x1536", "--backend", "cuda"), 15),
    # measured 8.5 s alone, 19.7 s with minGRU-pytorch on the GPU beside it
    Step("mingru-bptt", "MinGRU BPTT step, dim 1024 x depth 8 (105M parameters), batch 8 x 2048, device-resident",
         (PY, "-m", "bench.throughput.mingru_side_by_side", "--configs", "1024x8:8x2048", "--steps", "3",
          "--backend", "cuda"),
         10, peer="torch", peer_s=15),
    # measured 242.1 s for BPTT and CD-RGE-96 at 100k, 1M and 10M, each cell timed, measured apart and
    # beside the plain PyTorch loop (three processes a cell, 5-10 s of start-up each); here the two ends,
    # 100k and 10M: two thirds of that (`python -m bench.zorn_paper.table1` runs any grid)
    Step("table1", "Table 1, LSTM 100k and 10M, BPTT and CD-RGE-96, in series, beside a plain PyTorch loop",
         (PY, "-m", "bench.zorn_paper.table1", "--sizes", "100k,10M", "--methods", "bptt,cdrge96", "--modes", "series",
          "--max-cell-seconds", "60", "--backend", "cuda"), 125, peer="torch", peer_s=45),
)

PROFILE_PART = (PY, "-m", "bench.gpu.profile")
PROFILE = (
    # measured 7.6 s with both epochs in numba's cache from the quick plan; ~30 s more to compile them
    Step("profile-eggroll", "per-kernel time of one EGGROLL evaluate: EGG 6x256, population 32768, 16 bytes, and "
         "d-eggs' transformer 4x256 at population 40960, perturbed and plain", PROFILE_PART + ("eggroll",), 40),
    # measured 8.2 s
    Step("profile-kernels", "scan and matmul kernel-only times (CUDA events), allocation timed apart",
         PROFILE_PART + ("kernels",), 20),
    # measured 8.5 s
    Step("profile-mingru", "each op of one MinGRU BPTT step, 1024x8, batch 8x2048", PROFILE_PART + ("mingru",), 20),
    # measured 16.1 s
    Step("profile-table1-host", "cProfile (top 25) of one Table 1 100k CD-RGE-96 step",
         PROFILE_PART + ("table1-host",), 25),
    # measured 18.0 s with both epochs at population 8192; at the eggroll part's populations the replayed
    # launches take 5-10x longer (0.2 s and 1 s each, a few passes per section)
    Step("profile-ncu", "Nsight Compute SpeedOfLight, Occupancy and WarpStateStats of egg_epoch_cuda and "
         "transformer_epoch_cuda", PROFILE_PART + ("ncu",), 90),
)

FIRST_CONTACT_BUDGET_S = 480
TABLE1_10M = (PY, "-m", "bench.zorn_paper.table1", "--sizes", "10M", "--methods", "cdrge96", "--modes", "series",
              "--steps", "3", "--max-cell-seconds", "60", "--backend", "cuda")
PROBES = Step("probes", "probes of what the static model cannot see: L2 bandwidth under the EGG's pattern, dp4a and "
              "IMMA issue rates, 16-byte loads at two blocks an SM, grid.sync, the async-copy ring's wait, the "
              "persistent LSTM loop's issue rate", (PY, "-m", "bench.probes"), 60,
              basis="stated: the probes are sized to under 60 s together, start-up and compilation included")
TUNE = Step("tune", "every tunable kernel's variants timed, the fastest recorded per GPU and problem (quick sizes)",
            (PY, "-m", "bench.gpu.tune", "--quick"), 60,
            basis="stated: a few variants of five kernels, each compiled once and timed over a few launches")
REFIT = Step("refit", "the static model refitted on the committed measurements and this run's: constants, "
             "leave-one-out and leave-one-family-out errors, the refitted report",
             (PY, "-m", "bench.static_report.calibration", "--refit"), 30,
             basis="stated: host work only (the kept counts, a grid search), no GPU")


def _from(plan, name, **changes):
    step = next(s for s in plan if s.name == name)
    return replace(step, **changes) if changes else step


# Ordered as QUICK then FULL: correctness first, then what the model needs (the probes, which the tuned
# launches do not change; the tuner, so the benchmarks run the variants it picked), then the benchmarks
# against the model's rows, the profile and the refit, which reads what the run measured.
FIRST_CONTACT = (
    _from(QUICK, "selfcheck"),
    _from(QUICK, "gpu-tests-quick"),
    PROBES,
    TUNE,
    _from(FULL, "eggroll-nano-egg", estimate_s=20),  # QUICK's eggroll beside nano-egg
    _from(QUICK, "eggroll-transformer"),
    _from(FULL, "scan"),
    _from(FULL, "matmul"),
    _from(FULL, "mingru-bptt"),
    # the goal row the model's headline question rests on (83% of it the persistent LSTM kernel); the
    # old kernels took 4.2 s a step there, the PyTorch loop 3.0
    Step("table1-10m", "Table 1, LSTM 10M, CD-RGE-96, in series, 3 steps, beside a plain PyTorch loop",
         TABLE1_10M, 45, peer="torch", peer_s=30,
         basis="stated: 6 steps at the old 4.2 s, two start-ups of 10 s; the PyTorch loop's 5 steps at 3.0 s"),
    _from(PROFILE, "profile-eggroll", estimate_s=15),  # the epochs compiled by the eggroll steps before it
    _from(PROFILE, "profile-kernels"),
    _from(PROFILE, "profile-table1-host"),
    REFIT,
)

PLANS = {"quick": (QUICK, QUICK_BUDGET_S), "full": (FULL, FULL_BUDGET_S), "profile": (PROFILE, PROFILE_BUDGET_S),
         "first-contact": (FIRST_CONTACT, FIRST_CONTACT_BUDGET_S)}
