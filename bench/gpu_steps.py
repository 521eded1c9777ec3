"""What a GPU run runs (bench/gpu_run.py): two plans, each sized to one command of a short GPU slot.

- QUICK (`bash bench/gpu.sh --quick`, 240 s): the node's CUDA stack (bin/selfcheck.py --gpu), the GPU
  tests of the riskiest mechanisms (QUICK_TESTS), one EGGROLL point at the headline size and d-eggs'
  transformer at a small population.
- FULL (`bash bench/gpu.sh`, 540 s): the GPU tests QUICK left out, d-eggs' transformer at its population
  chunk, then the float benchmarks and the Table 1 suite.

Every estimate is seconds on one H100 for a first run on a fresh node, start-up included: numba
compiles each kernel signature when it is first launched (roughly 1-5 s each; the static report
lists 89) and caches nothing yet, so compilation dominates most steps. They are judgements, not
measurements, argued step by step below; a wrong one costs at most the steps after it, since no step
runs past the budget. The static report (bench/static_report) is not here: it needs no GPU.
"""

import sys
from dataclasses import dataclass, field

PY = sys.executable  # the python3 that runs the runner runs every step, in the same environment

QUICK_BUDGET_S = 240
FULL_BUDGET_S = 540
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
    # selfcheck's own figure: toolchain queries and two smoke kernels, mostly start-up and compiles
    Step("selfcheck", "the node's CUDA stack: versions, linker, cudadevrt, shared memory, IMMA and HMMA",
         (PY, "bin/selfcheck.py", "--gpu"), 45),
    # about 30 kernel signatures (scan 11, LSTM 8, the fused epoch and its update 6, mma 2, TF32 2) at
    # about 1.5 s each, the CPU twins' numba compiles (~20 s; the EGG epoch twin alone 10 s on 2 cores)
    # and their runs, and ~10 s of pytest and CUDA start-up
    Step("gpu-tests-quick", "GPU tests of the riskiest mechanisms: mma, fused EGG epoch, LSTM modes, TF32, scan",
         PYTEST + QUICK_TESTS, 90, ON_THE_GPU, outcome=PYTEST_OUTCOME),
    # the fused kernel's compile (~10 s; again if perturbed and plain are two signatures) and start-up;
    # 9 evaluations of 32768 x 100 bytes take seconds even at a tenth of the static 9e7 member-tokens/s
    Step("eggroll", "EGGROLL, EGG 6x256, population 32768, 100 bytes, perturbed and plain",
         (PY, "-m", "bench.eggroll_throughput", "--depth", "6", "--dim", "256", "--populations", "32768",
          "--tokens", "100", "--backend", "cuda"), 45),
    # the tensor-core transformer epoch's compile (~25 s: one signature, perturbed and plain alike, and the
    # weight padding kernel) and start-up; 7 evaluations of 4096 x 64 tokens are a fraction of a second
    Step("eggroll-transformer", "EGGROLL, d-eggs' transformer 4x256 (heads of 64, vocabulary 8192), population "
         "4096, 64 tokens", DEGGS_THROUGHPUT + ("--populations", "4096"), 40),
)

# Ordered by what a GPU run is for: correctness, then the float kernels, then the suite with the most
# cells last, since a stopped Table 1 keeps the rows it printed (one per cell).
FULL = (
    # the other ~60 signatures (the transformer epoch, DNC, MinGRU, integer ops, RNG, perturbations) at
    # about 1.5 s, their CPU twins' compiles (~50 s) and runs at full size (the transformer twin's 4096
    # members x 64 tokens at d-eggs' width, twice, ~30 s), and start-up
    Step("gpu-tests", "the GPU tests the quick run leaves out",
         PYTEST + ("tests/gpu",) + tuple(f"--deselect={t}" for t in QUICK_TESTS), 190, ON_THE_GPU,
         outcome=PYTEST_OUTCOME),
    # the transformer kernel is in numba's cache from the GPU tests; start-up, the model, 7 evaluations of
    # 40960 x 64 tokens (~0.1 s each at a third of the static 8.8e7 member-tokens/s) and the memory probe
    Step("eggroll-transformer", "EGGROLL, d-eggs' transformer 4x256 (heads of 64, vocabulary 8192), population "
         "40960 (its chunk), 64 tokens", DEGGS_THROUGHPUT + ("--populations", "40960"), 25),
    # 11 scan signatures, a copy-bandwidth probe and timed runs over 200 MB arrays (milliseconds each)
    Step("scan", "MinGRU scan 8x4096x1536", (PY, "-m", "bench.scan_throughput", "--shapes", "8x4096x1536",
                                             "--backend", "cuda"), 30),
    # a few matmul signatures; 155 GFLOP a forward product, milliseconds at tensor-core rates; importing
    # torch or CuPy for the library rows, where installed, takes 10-20 s
    Step("matmul", "fp32 and TF32 matmul 32768x1536x1536, cuBLAS/cuBLASLt beside it",
         (PY, "-m", "bench.matmul_throughput", "--shapes", "32768x1536x1536", "--backend", "cuda"), 40),
    # ~20 signatures of the MinGRU LM forward, backward and AdamW, then 3 timed steps of a 105M model
    Step("mingru-bptt", "MinGRU BPTT step, dim 1024 x depth 8 (105M parameters), batch 8 x 2048, device-resident",
         (PY, "-m", "bench.mingru_side_by_side", "--configs", "1024x8:8x2048", "--steps", "3", "--backend", "cuda"),
         60),
    # one cell process: the LSTM and perturbation kernels' compiles and start-up; its steps take milliseconds
    Step("table1-probe-batch", "Table 1 100k CD-RGE-96 series with 32 evaluations a pass (probes as extra heads)",
         (PY, "-m", "bench.table1_cell", "--size", "100k", "--method", "cdrge96", "--mode", "series", "--steps", "3",
          "--probe-batch", "32", "--backend", "cuda"), 30),
    # 18 cell processes (9 series cells, timed and measured apart) at ~4 s of start-up each once the first
    # has compiled and cached the kernels (~20 s), and the 10M cells: CD-RGE-512 is 2.7 s a step at its
    # static bound, 6 steps timed and 2 measured. Distributed cells would put all ranks on this one GPU:
    # they measure communication, not speed-up
    Step("table1", "Table 1, LSTM 100k-10M, in series (cells over 60 s skipped by the suite itself)",
         (PY, "-m", "bench.table1", "--sizes", "100k,1M,10M", "--modes", "series", "--max-cell-seconds", "60",
          "--backend", "cuda"), 140),
)

PLANS = {"quick": (QUICK, QUICK_BUDGET_S), "full": (FULL, FULL_BUDGET_S)}
