"""What a GPU run runs (bench/gpu_run.py): three plans, each sized to one command of a short GPU slot.

- QUICK (`bash bench/gpu.sh --quick`, 150 s): the node's CUDA stack (bin/selfcheck.py --gpu), the GPU
  tests of the riskiest mechanisms (QUICK_TESTS), one EGGROLL point at the headline size and d-eggs'
  transformer at a small population.
- FULL (`bash bench/gpu.sh`, 450 s): the GPU tests QUICK left out, d-eggs' transformer at its population
  chunk, eggnog beside nano-egg's JAX (with --nano-egg), the float benchmarks beside PyTorch and the
  Table 1 suite beside a plain PyTorch loop.
- PROFILE (`bash bench/gpu.sh --profile`, 300 s): where the time goes (bench/gpu_profile.py): per-kernel
  times of the EGGROLL evaluates, kernel-only scan and matmul, each op of a MinGRU BPTT step, the host
  profile of a Table 1 CD-RGE step, and Nsight Compute's sections of the two fused epochs.

Every estimate is seconds on one H100, start-up and kernel compilation included, taken from what the
first H100 run measured (bench/results/gpu-h100-80gb-hbm3-2026-11-27*.json: each step's `seconds`)
with a margin for what has changed since; a step that never ran there is argued beside it. A wrong one
costs at most the steps after it, since no step runs past the budget. A step with a peer
(`peer`: "torch" or "nano-egg") runs it where the peer is at hand (`peer_s` more seconds) and
otherwise runs eggnog's side alone, or is skipped when `needs_peer`. The static report is not here: it
needs no GPU.
"""

import sys
from dataclasses import dataclass, field

PY = sys.executable  # the python3 that runs the runner runs every step, in the same environment

QUICK_BUDGET_S = 150
FULL_BUDGET_S = 450
PROFILE_BUDGET_S = 300
# The probe before the first step (bench/gpu_run.py): a process that imports numba and opens a
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

    @property
    def script(self):
        """The repository file the step runs, if it runs one (a missing one skips the step): a script,
        or the file of a bench module run with -m."""
        first = str(self.argv[1]) if len(self.argv) > 1 else ""
        if first == "-m" and len(self.argv) > 2 and str(self.argv[2]).startswith("bench."):
            return str(self.argv[2]).replace(".", "/") + ".py"
        return first if first.endswith(".py") else None

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
DEGGS_THROUGHPUT = (PY, "-m", "bench.eggroll_throughput", "--model", "transformer", "--depth", "4", "--dim", "256",
                    "--head-dim", "64", "--vocab-size", "8192", "--tokens", "64", "--backend", "cuda")
# a GPU that numba cannot use fails the step instead of skipping every test
ON_THE_GPU = {"EGGNOG_REQUIRE_GPU": "1"}
PYTEST_OUTCOME = r"\d+ (passed|failed|error|skipped)"

QUICK = (
    # measured 4.9 s
    Step("selfcheck", "the node's CUDA stack: versions, linker, cudadevrt, shared memory, IMMA and HMMA",
         (PY, "bin/selfcheck.py", "--gpu"), 10),
    # measured 50.3 s
    Step("gpu-tests-quick", "GPU tests of the riskiest mechanisms: mma, fused EGG epoch, LSTM modes, TF32, scan",
         PYTEST + QUICK_TESTS, 60, ON_THE_GPU, outcome=PYTEST_OUTCOME),
    # measured 10.8 s
    Step("eggroll", "EGGROLL, EGG 6x256, population 32768, 100 bytes, perturbed and plain",
         (PY, "-m", "bench.eggroll_throughput", "--depth", "6", "--dim", "256", "--populations", "32768",
          "--tokens", "100", "--backend", "cuda"), 20),
    # never ran (it failed at its first allocation in 1.7 s): the tensor-core epoch's compile, about twice
    # the EGG's (its step took 10.8 s), and 7 evaluations of 4096 x 64 tokens, a fraction of a second
    Step("eggroll-transformer", "EGGROLL, d-eggs' transformer 4x256 (heads of 64, vocabulary 8192), population "
         "4096, 64 tokens", DEGGS_THROUGHPUT + ("--populations", "4096"), 35),
)

# Ordered by what a GPU run is for: correctness, then the peers, then the suite with the most cells
# last, since a stopped Table 1 keeps the rows it printed (one per cell).
FULL = (
    # measured 73.6 s with the 3 transformer tests failing at once; those run the twin at full size (~25 s)
    Step("gpu-tests", "the GPU tests the quick run leaves out",
         PYTEST + ("tests/gpu",) + tuple(f"--deselect={t}" for t in QUICK_TESTS), 100, ON_THE_GPU,
         outcome=PYTEST_OUTCOME),
    # the kernel is in numba's cache from the GPU tests; start-up, 7 evaluations of 40960 x 64 tokens
    Step("eggroll-transformer", "EGGROLL, d-eggs' transformer 4x256 (heads of 64, vocabulary 8192), population "
         "40960 (its chunk), 64 tokens", DEGGS_THROUGHPUT + ("--populations", "40960"), 20),
    # eggnog's side as the quick plan's eggroll step (10.8 s); nano-egg's JAX compiles its vmapped epoch
    # twice (perturbed, plain; ~15 s each) and runs 8 evaluations of 32768 x 100 bytes (~0.5 s each)
    Step("eggroll-nano-egg", "EGGROLL, EGG 6x256, population 32768, 100 bytes: eggnog beside nano-egg's JAX",
         (PY, "-m", "bench.nano_egg_side_by_side", "--backend", "cuda", "--configs", "6x256:32768", "--tokens", "100"),
         15, peer="nano-egg", peer_s=40, needs_peer=True),
    # measured 4.4 s
    Step("scan", "MinGRU scan 8x4096x1536", (PY, "-m", "bench.scan_throughput", "--shapes", "8x4096x1536",
                                             "--backend", "cuda"), 10),
    # measured 9.1 s, the library rows (torch, CuPy) included
    Step("matmul", "fp32 and TF32 matmul 32768x1536x1536, cuBLAS/cuBLASLt beside it",
         (PY, "-m", "bench.matmul_throughput", "--shapes", "32768x1536x1536", "--backend", "cuda"), 15),
    # measured 8.5 s; the peer, minGRU-pytorch on the GPU: torch's start-up and 4 steps of ~0.3 s
    Step("mingru-bptt", "MinGRU BPTT step, dim 1024 x depth 8 (105M parameters), batch 8 x 2048, device-resident",
         (PY, "-m", "bench.mingru_side_by_side", "--configs", "1024x8:8x2048", "--steps", "3", "--backend", "cuda"),
         15, peer="torch", peer_s=20),
    # measured 265.9 s for the 9 series cells with CD-RGE-512 (the 1M cell 5.9 s a step, 100k 4.5 s) and no
    # memory runs (they failed at once). Here BPTT and CD-RGE-96 only: 6 cells timed (~8 s of start-up
    # each, 10M CD-RGE-96 4 s a step x 6) and measured apart (2 steps each), ~150 s. The plain PyTorch
    # loop beside each on the GPU: torch's start-up (~5 s) per cell and 3 CD-RGE steps (0.4-2.6 s each)
    Step("table1", "Table 1, LSTM 100k-10M, BPTT and CD-RGE-96, in series, beside a plain PyTorch loop",
         (PY, "-m", "bench.table1", "--sizes", "100k,1M,10M", "--methods", "bptt,cdrge96", "--modes", "series",
          "--max-cell-seconds", "60", "--backend", "cuda"), 160, peer="torch", peer_s=45),
)

PROFILE_PART = (PY, "-m", "bench.gpu_profile")
PROFILE = (
    # the fused EGG epoch (cached by the quick plan, else ~8 s to compile) and the transformer epoch (~20 s),
    # each evaluated twice per mode at the profile's sizes
    Step("profile-eggroll", "per-kernel time of one EGGROLL evaluate: EGG 6x256, population 32768, 16 bytes, and "
         "d-eggs' transformer 4x256 at population 40960, perturbed and plain", PROFILE_PART + ("eggroll",), 50),
    # 5 scan and matmul signatures and 6 calls of each op over 200-400 MB arrays
    Step("profile-kernels", "scan and matmul kernel-only times (CUDA events), allocation timed apart",
         PROFILE_PART + ("kernels",), 30),
    # measured 8.5 s for the same step in mingru-bptt
    Step("profile-mingru", "each op of one MinGRU BPTT step, 1024x8, batch 8x2048", PROFILE_PART + ("mingru",), 20),
    # one cell process: compiles, then 2 steps of ~0.8 s
    Step("profile-table1-host", "cProfile (top 25) of one Table 1 100k CD-RGE-96 step",
         PROFILE_PART + ("table1-host",), 25),
    # two ncu runs, each a process evaluating twice (kernels cached by now) with the second launch replayed
    # once per section pass
    Step("profile-ncu", "Nsight Compute SpeedOfLight, Occupancy and WarpStateStats of egg_epoch_cuda and "
         "transformer_epoch_cuda", PROFILE_PART + ("ncu",), 120),
)

PLANS = {"quick": (QUICK, QUICK_BUDGET_S), "full": (FULL, FULL_BUDGET_S), "profile": (PROFILE, PROFILE_BUDGET_S)}
