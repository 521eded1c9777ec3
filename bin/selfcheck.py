"""Check this installation end to end: MPI world, backend and GPU binding, the byte corpus, and the
noise kernels on the chosen backend against the NumPy reference (bit for bit on integer outputs).
Under a launcher (`srun --mpi=pmi2 python -m mpi4py bin/selfcheck.py`) rank 0 prints the rank-to-GPU
map: one line per rank with its host, node-local rank and the GPU it binds, or cpu.

With --gpu, check instead what this node's CUDA stack can do, in under a minute: versions, linker,
PTX ISA against the driver, cudadevrt, the shared-memory opt-in, grid sync, one IMMA and one HMMA
kernel against their CPU twins. It stops at the first item that cannot work, names it and exits 1;
under NUMBA_ENABLE_CUDASIM=1 it skips the items that need the real CUDA target and says so."""

import os
import socket
import sys
from pathlib import Path

import numpy as np
import typer

from eggnog.runtime.cli import cli_help, user_errors

# plain click help: rich truncates long flag names at 80 columns
app = typer.Typer(add_completion=False, pretty_exceptions_enable=False, rich_markup_mode=None)


def _escape(window):
    return "".join(chr(b) if 32 <= b < 127 else "\\n" if b == 10 else f"\\x{b:02x}" for b in window)


MAP_LINE_BYTES = 240  # one rank's line of the rank-to-GPU map, as it crosses MPI


def bound_device(chosen):
    """What this process computes on: "cpu", or its GPU's index, name, UUID and the GPUs the launcher
    let it see (SLURM's --gpus-per-task=1 shows each rank one, which it sees as GPU 0)."""
    if chosen.name != "cuda":
        return "cpu"
    details = [chosen.device_name]
    if not chosen.simulated:
        from eggnog.kernels.core.cuda_api import cuda

        uuid = getattr(cuda.get_current_device(), "uuid", None)
        details += [str(uuid)] if uuid else []
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    details += [f"CUDA_VISIBLE_DEVICES={visible}"] if visible is not None else []
    return f"gpu {chosen.device_index} ({', '.join(details)})"


def rank_map(world, chosen):
    """One line per rank (rank, host, node-local rank, the GPU it binds or "cpu"), gathered to every rank."""
    line = (f"rank {world.rank}  host {socket.gethostname()}  local rank {world.local_rank}  "
            f"{bound_device(chosen)}").encode()[:MAP_LINE_BYTES]
    mine = np.zeros((1, MAP_LINE_BYTES), dtype=np.uint8)
    mine[0, :len(line)] = np.frombuffer(line, dtype=np.uint8)
    return [row.tobytes().rstrip(b"\0").decode(errors="replace") for row in world.allgather_array(mine)]


def check_gpu():
    """Print each platform item as it is checked; 0 when none failed, else 1."""
    from eggnog.kernels.checks.platform_check import run_checks

    items = []
    for item in run_checks():
        items.append(item)
        print(f"{item.status:<8} {item.name:<10} {item.detail}", flush=True)
    failed = [item for item in items if item.status == "failed"]
    if failed:
        print(f"FAILED: {failed[0].name}: {failed[0].detail}")
        return 1
    skipped = [item.name for item in items if item.status == "skipped"]
    print(f"GPU check passed: {len(items) - len(skipped)} items"
          + (f"; skipped on the simulator: {', '.join(skipped)}" if skipped else ""))
    return 0


@app.command(help=cli_help(__doc__))
@user_errors
def main(
    data: Path = typer.Option(None, help="Corpus (.bin/.h5/.zarr); default: the embedded stdlib corpus."),
    backend: str = typer.Option(None, help="auto, cpu or cuda (default: EGGNOG_BACKEND or auto)."),
    elements: int = typer.Option(1 << 20, help="Noise elements compared per kind."),
    seed: int = typer.Option(0),
    gpu: bool = typer.Option(False, "--gpu", help="Check what this node's GPU stack can do instead (see above)."),
):
    if gpu:
        sys.exit(check_gpu())
    from eggnog.corpus.default import default_corpus
    from eggnog.corpus.reader import open_corpus
    from eggnog.corpus.samplers import RandomWindows
    from eggnog.kernels.core.backend import select_backend
    from eggnog.kernels.core.placement import to_host
    from eggnog.kernels.noise import scalar_math, streams
    from eggnog.runtime.world import init_world, mpi_library

    world = init_world()
    chosen = select_backend(backend, world.local_rank)
    places = rank_map(world, chosen)
    corpus = open_corpus(data) if data else world.root_first(default_corpus)
    if world.is_root:
        print(f"world: {world.size} rank(s); MPI: {mpi_library()}")
        print(f"backend: {chosen.name} ({chosen.device_name}); rank-to-GPU map:")
        for line in places:
            print(f"  {line}")
        print(f"corpus: {corpus.path} ({'memory-mapped' if corpus.memory_mapped else 'block reads'})")
        for name, split in corpus.meta.get("splits", {}).items():
            print(f"  {name:<5} {split['bytes']:>12,} bytes  unigram {split['unigram_bpb']:.3f}  "
                  f"bigram {split['bigram_bpb']:.3f} bits/byte")
        window = RandomWindows(corpus.train, 72, seed).batch(0, 0, 1)[0]
        print(f"  sample: {_escape(window)}")
    failures = 0
    key = scalar_math.stream_key(seed, 1, 0, world.rank)
    start = 1 << 31  # any slice of a stream, without generating the rest
    for kind in streams.KINDS:
        ref = streams.generate(kind, key, start, elements, backend="numpy")
        got = to_host(streams.generate(kind, key, start, elements, backend=chosen.name))
        if kind == "normal_float32":
            ulps = np.abs(got - ref) / (np.finfo(np.float32).eps * np.maximum(np.abs(ref), 1))
            ok, detail = bool(ulps.max() <= 4), f"max {ulps.max():.1f} ulp"
        else:
            ok, detail = bool(np.array_equal(got, ref)), f"{np.count_nonzero(got == ref):,} identical"
        ok = world.all_true(ok)
        failures += not ok
        if world.is_root:
            print(f"noise {kind:<16} {'ok' if ok else 'MISMATCH':<8} {detail} of {elements:,} on every rank; "
                  f"mean {got.mean():+.4f} std {got.std():.4f}")
    if world.is_root:
        print("all OK" if not failures else f"FAILED: {failures} noise kind(s) differ from the reference")
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    app()
