"""Preparing d-eggs for bench/dynamics/deggs.py, all of it without a GPU: finding its checkout (the files
of SOURCES) and nvcc, writing its data from eggnog's corpus (input.bin, one little-endian uint32 token per
byte, and decoding.bin for its vocabulary of 8192), and building its coordinator (g++) and worker (nvcc)
with the Makefile's own CFLAGS and NVCCFLAGS, -arch replaced by --arch, in a staging folder moved into the
build folder (outside the project and the checkout) only once both compile, then reused while build.json's
stamp (the sources' digest, --arch and nvcc's release) matches. Two changes, neither touching d-eggs' code:
-lcublas is left out (only muon.cuh calls cuBLAS, and worker.cu does not include it), and with CUDA 13 or
later a header passed with -include (CUDA13_COMPAT) puts back what CUDA 13 removed and d-eggs still calls
(cub::Max, the int-device cudaMemAdvise and cudaMemPrefetchAsync).
"""

import hashlib
import json
import os
import re
import shlex
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

import numpy as np

from bench.report import REPO
from eggnog.runtime.errors import BadInput

VOCAB = 8192  # d-eggs' VOCAB_SIZE: uint32 tokens
SOURCES = ("Makefile", "src/coordinator.cpp", "src/worker.cu", "src/kernels.cu", "include/config.h",
           "include/protocol.h")
CUDA13_COMPAT = """// CUDA 13 removed these; d-eggs (written for CUDA 12) calls them. Same meaning, new API.
#pragma once
#include <cuda_runtime.h>
namespace cub {
struct Max {
    template <class T> __host__ __device__ __forceinline__ T operator()(const T &a, const T &b) const {
        return a < b ? b : a;
    }
};
}
inline cudaError_t cudaMemAdvise(const void *ptr, size_t count, cudaMemoryAdvise advice, int device) {
    cudaMemLocation where{}; where.type = cudaMemLocationTypeDevice; where.id = device;
    return cudaMemAdvise(ptr, count, advice, where);
}
inline cudaError_t cudaMemPrefetchAsync(const void *ptr, size_t count, int device, cudaStream_t stream) {
    cudaMemLocation where{}; where.type = cudaMemLocationTypeDevice; where.id = device;
    return cudaMemPrefetchAsync(ptr, count, where, 0, stream);
}
"""


# ---- inputs ---------------------------------------------------------------------------------------
def deggs_folder(path):
    """The d-eggs folder of a checkout: DIR itself or DIR/d-eggs (the egg.c repository)."""
    path = Path(path)
    if not path.is_dir():
        raise BadInput(f"--deggs {str(path)!r} is not a folder")
    for folder in (path, path / "d-eggs"):
        if all((folder / name).is_file() for name in SOURCES):
            return folder.resolve()
    raise BadInput(f"--deggs {str(path)!r} is not a d-eggs checkout (no Makefile, src/worker.cu and "
                   "include/config.h in it or in its d-eggs folder)")


def makefile_flags(folder):
    """(CFLAGS, NVCCFLAGS) of d-eggs' Makefile, as argument lists."""
    flags = {}
    for line in (folder / "Makefile").read_text(errors="replace").splitlines():
        found = re.match(r"\s*(CFLAGS|NVCCFLAGS)\s*[:?]?=\s*(.*)$", line)
        if found:
            flags[found[1]] = shlex.split(found[2])
    if set(flags) != {"CFLAGS", "NVCCFLAGS"}:
        raise BadInput(f"{folder / 'Makefile'} has no CFLAGS and NVCCFLAGS lines: not d-eggs' Makefile")
    return flags["CFLAGS"], flags["NVCCFLAGS"]


def sources_digest(folder):
    digest = hashlib.sha256()
    files = [folder / "Makefile"] + sorted(p for sub in ("src", "include") for p in (folder / sub).rglob("*")
                                           if p.is_file())
    for path in files:
        digest.update(path.relative_to(folder).as_posix().encode() + b"\0" + path.read_bytes())
    return digest.hexdigest(), len(files)


def find_nvcc(given=None):
    if given:
        if not (os.path.isfile(given) and os.access(given, os.X_OK)):
            raise BadInput(f"--nvcc {given!r} is not an executable")
        return given
    candidates = [shutil.which("nvcc")] + [os.path.join(root, "bin", "nvcc") for root in
                                           (os.environ.get("CUDA_HOME"), os.environ.get("CUDA_PATH"),
                                            "/usr/local/cuda") if root]
    return next((c for c in candidates if c and os.access(c, os.X_OK)), None)


def nvcc_release(nvcc):
    """(major, minor) of `nvcc --version`."""
    try:
        out = subprocess.run([nvcc, "--version"], capture_output=True, text=True, timeout=60).stdout
    except (OSError, subprocess.SubprocessError) as e:
        raise BadInput(f"nvcc ({nvcc}) does not run: {e}") from None
    found = re.search(r"release (\d+)\.(\d+)", out)
    if not found:
        raise BadInput(f"nvcc ({nvcc}) printed no release number")
    return int(found[1]), int(found[2])


def outside(path, *folders):
    path = Path(path).resolve()
    for folder in folders:
        if path == folder or folder in path.parents:
            raise BadInput(f"--build-dir {str(path)!r} is inside {str(folder)!r}: name a folder outside the "
                           "project and the d-eggs checkout")
    return path


# ---- data -----------------------------------------------------------------------------------------
def corpus_bytes(data):
    """(the byte stream both sides train on, its name): eggnog's embedded default corpus, train split
    then validation split, or the byte corpus at `data`."""
    from eggnog.corpus.default import default_corpus
    from eggnog.corpus.reader import open_corpus

    corpus = default_corpus() if data is None else open_corpus(data)
    stream = np.concatenate([np.asarray(corpus.train, np.uint8), np.asarray(corpus.val, np.uint8)])
    return stream, Path(corpus.path).name


def decoding_bytes(vocab=VOCAB):
    """decoding.bin: u32 vocabulary size, then per token a u32 length and its bytes (token t < 256 is
    byte t; the rest are empty, never in the data)."""
    parts = [vocab.to_bytes(4, "little")]
    parts += [b"\x01\x00\x00\x00" + bytes([t]) for t in range(256)] + [b"\x00" * 4] * (vocab - 256)
    return b"".join(parts)


def write_deggs_data(stream, folder):
    """input.bin (one little-endian uint32 token per byte) and decoding.bin in `folder`; returns
    facts about them. Each file is written under a temporary name and renamed."""
    from eggnog.runtime.files import write_atomic

    folder.mkdir(parents=True, exist_ok=True)
    tokens = np.asarray(stream, np.uint8).astype("<u4")
    write_atomic(folder / "decoding.bin", decoding_bytes())
    write_atomic(folder / "input.bin", tokens.tobytes())
    return {"tokens": int(tokens.size), "vocab": VOCAB, "token": "one byte",
            "input_sha256": hashlib.sha256(tokens.tobytes()).hexdigest()}


def prepared_data(data):
    """A d-eggs data folder given as --data, checked as eggnog reads it; None for a byte corpus."""
    from eggnog.corpus.deggs_tokens import deggs_paths, open_deggs

    if deggs_paths(data) is None:
        return None
    corpus = open_deggs(data, 0.05, VOCAB)
    return Path(corpus.path), {"tokens": int(len(corpus.train) + len(corpus.val)), "vocab": VOCAB,
                               "token": "d-eggs' own", "input_sha256": None}


# ---- build ----------------------------------------------------------------------------------------
def build_plan(folder, arch, release):
    """The two compile commands, run in the d-eggs folder (BUILD stands for the build folder)."""
    cflags, nvccflags = makefile_flags(folder)
    nvccflags = [f for f in nvccflags if f != "-lcublas" and not f.startswith(("-arch", "--gpu-architecture"))]
    extra = ["-include", "BUILD/cuda13_compat.h"] if release >= (13, 0) else []
    return {"coordinator": ["g++", *cflags, "-o", "BUILD/coordinator", "src/coordinator.cpp", "-lpthread"],
            "worker": ["nvcc", *nvccflags, f"-arch={arch}", *extra, "-o", "BUILD/worker", "src/worker.cu"]}


def reusable(build_dir, stamp, keys=("arch", "nvcc", "sources_sha256")):
    """The record of the build kept in `build_dir` when it matches `stamp` on `keys`, else None."""
    try:
        old = json.loads((build_dir / "build.json").read_text())
    except (OSError, ValueError):
        return None
    same = all(old.get(k) == stamp[k] for k in keys)
    return old if same and all(os.access(build_dir / b, os.X_OK) for b in ("coordinator", "worker")) else None


def build(folder, build_dir, plan, stamp, nvcc):
    """Compile into a fresh folder beside `build_dir`, then move the results in; nothing is left
    behind when a compiler fails."""
    created = not build_dir.exists()
    build_dir.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=".building-", dir=build_dir))
    try:
        (staging / "cuda13_compat.h").write_text(CUDA13_COMPAT)
        seconds = {}
        for name, command in plan.items():
            argv = [nvcc if a == "nvcc" else a.replace("BUILD", str(staging)) for a in command]
            begin = time.perf_counter()
            try:
                done = subprocess.run(argv, cwd=folder, capture_output=True, text=True, timeout=1800)
            except (OSError, subprocess.TimeoutExpired) as e:
                raise BadInput(f"building d-eggs' {name} failed: {e}") from None
            if done.returncode:
                errors = [line for line in done.stderr.splitlines() if "error" in line] or ["no message"]
                raise BadInput(f"building d-eggs' {name} failed (exit {done.returncode}): {errors[0].strip()}")
            seconds[name] = round(time.perf_counter() - begin, 1)
        record = dict(stamp, commands={k: shlex.join(v) for k, v in plan.items()}, seconds=seconds)
        (staging / "build.json").write_text(json.dumps(record, indent=1) + "\n")
        for name in (*plan, "cuda13_compat.h", "build.json"):
            os.replace(staging / name, build_dir / name)
        return record
    except BaseException:
        if created:
            shutil.rmtree(build_dir, ignore_errors=True)
        raise
    finally:
        shutil.rmtree(staging, ignore_errors=True)


# ---- choosing the build --------------------------------------------------------------------------
def choose_build(kept, arch, digest, nvcc):
    """(the kept build to reuse or None, the nvcc to build with or None, its release)."""
    compiler = find_nvcc(nvcc)
    release = nvcc_release(compiler) if compiler else None
    stamp = {"arch": arch, "nvcc": None if release is None else f"{release[0]}.{release[1]}", "sources_sha256": digest}
    old = reusable(kept, stamp) if kept else None
    if old is None and compiler is None and kept:  # no nvcc here: what was built elsewhere will do
        old = reusable(kept, dict(stamp, nvcc=None), keys=("arch", "sources_sha256"))
    if old is None and compiler is None:
        raise BadInput("nvcc was not found (PATH, CUDA_HOME, /usr/local/cuda), so d-eggs' worker cannot be built "
                       "here: build it where nvcc is with --prepare-only --build-dir DIR and pass that --build-dir")
    if old is None and shutil.which("g++") is None:
        raise BadInput("g++ was not found on PATH, so d-eggs' coordinator cannot be built here")
    return old, compiler, release, stamp


def check_build_dir(build_dir, folder):
    if build_dir is None:
        return None
    kept = outside(build_dir, REPO, folder)
    if kept.exists() and (not kept.is_dir() or (any(kept.iterdir()) and not (kept / "build.json").exists())):
        raise BadInput(f"--build-dir {build_dir!r} holds other files: name a new or empty folder, or one this "
                       "bench built")
    return kept
