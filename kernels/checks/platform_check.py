"""What this node's CUDA stack can do for eggnog's kernels, item by item, stopping at the first item that
cannot work (what `bin/selfcheck.py --gpu` prints):

    gpu        the device (or the simulator), or why numba finds none
    versions   driver, CUDA toolkit (NVRTC), python, numpy, numba, numba-cuda, llvmlite, cuda-bindings/core
    numpy      names numba-cuda needs that this numpy removed, and which were put back
    linker     nvJitLink or the driver's: who turns PTX into machine code
    ptx        the PTX ISA NVVM emits against the newest the driver's JIT accepts
    cudadevrt  the device runtime library cooperative launches (grid.sync) link
    shared     a kernel with 64 KiB of dynamic shared memory (the per-function opt-in above 48 KiB)
    grid sync  one block per SM meeting at grid.sync, against the CPU twin
    imma       one warp of int8 mma.sync (IMMA), bit for bit against the CPU twin
    hmma       one warp of TF32 mma.sync (HMMA), within the op's tolerance of the CPU twin

More in docs/internals.md (kernels/checks/platform_check.py)."""

import importlib.metadata
import platform
import re
import warnings
from dataclasses import dataclass

import numpy as np

PACKAGES = ("numpy", "numba", "numba-cuda", "llvmlite", "cuda-bindings", "cuda-core")
SHARED_VALUES = 16 * 1024  # int32 values: 64 KiB, past the 48 KiB a kernel gets without the opt-in
SIMULATOR_SKIP = "needs numba's real CUDA target (skipped on the simulator)"


@dataclass(frozen=True)
class Item:
    name: str
    status: str  # "ok", "failed" or "skipped"
    detail: str


def max_ptx_isa(driver_version):
    """The newest PTX ISA (major, minor) a driver of this CUDA version JIT-compiles; None if unknown.
    From the PTX ISA release notes: 11.x -> 7.x, 12.0-12.5 -> 8.0-8.5, 12.6 -> 8.5, 12.8 -> 8.7,
    12.9 -> 8.8, 13.x -> 9.x."""
    major, minor = driver_version
    if major == 11:
        return 7, minor
    if major == 12:
        return 8, {6: 5, 7: 6, 8: 7, 9: 8}.get(minor, minor)
    if major == 13:
        return 9, minor
    return None


def ptx_isa_of(ptx):
    found = re.search(r"^\s*\.version\s+(\d+)\.(\d+)", ptx, re.MULTILINE)
    return (int(found.group(1)), int(found.group(2))) if found else None


def ptx_verdict(emitted, accepted, linker):
    """(ok, sentence) for PTX of ISA `emitted` on a driver accepting up to `accepted` via `linker`."""
    def text(version):
        return "{}.{}".format(*version)

    if accepted is None:
        return True, f"NVVM emits ISA {text(emitted)}; this driver's limit is not known here"
    if emitted <= accepted:
        return True, f"NVVM emits ISA {text(emitted)}, the driver's JIT accepts up to {text(accepted)}"
    if linker == "nvJitLink":
        return True, (f"NVVM emits ISA {text(emitted)}, newer than the {text(accepted)} the driver's JIT accepts; "
                      f"nvJitLink compiles it to machine code, so the driver never sees PTX")
    return False, (f"NVVM emits ISA {text(emitted)} but the driver's JIT accepts only up to {text(accepted)} "
                   "and the driver links: install nvJitLink (numba-cuda[cu13] or [cu12]) or a toolkit no newer "
                   "than the driver")


def _version(name):
    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return "not installed"


def linker_name():
    """"nvJitLink" or "driver": the backend numba-cuda's linker (cuda.core's Linker) will use."""
    try:
        from cuda.core import Linker

        with warnings.catch_warnings():  # its warning without nvJitLink says what the linker item says
            warnings.simplefilter("ignore", RuntimeWarning)
            return str(Linker.which_backend())
    except (ImportError, AttributeError):
        from numba.cuda.cudadrv.driver import _have_nvjitlink

        return "nvJitLink" if _have_nvjitlink() else "driver"


def _no_gpu_reason():
    try:
        from numba.cuda.cudadrv.driver import driver

        driver.get_version()
    except Exception as e:  # the driver's many ways of saying it is missing
        return " ".join(str(e).split())[:200].rstrip(" :")
    return "the driver loads but lists no usable device"


def _agree(name, args, exact, tolerance=None):
    """Run op `name` on the CUDA backend and the CPU twin; (ok, sentence)."""
    from eggnog.kernels.core.placement import to_host
    from eggnog.kernels.core.registry import all_ops

    entry = all_ops()[name]
    assert entry.cuda is not None and entry.cpu is not None  # a registered op has all three
    got, want = np.asarray(to_host(entry.cuda(*args))), np.asarray(entry.cpu(*args))
    if exact:
        same = np.array_equal(got, want)
        return same, f"{np.count_nonzero(got == want)} of {want.size} values identical"
    error = np.abs(got.astype(np.float64) - want.astype(np.float64))
    rtol, atol = tolerance
    ok = bool(np.all(error <= atol + rtol * np.abs(want)))
    return ok, f"max difference {error.max():.2e} (tolerance {rtol:g} relative + {atol:g})"


def _gpu(backend):
    from eggnog.kernels.core.cuda_api import cuda

    if backend.simulated:
        return "ok", "numba's CUDA simulator"
    device = cuda.get_current_device()
    total = cuda.current_context().get_memory_info()[1]
    major, minor = device.compute_capability
    return "ok", (f"{backend.device_name}, compute capability {major}.{minor}, {device.MULTIPROCESSOR_COUNT} SMs, "
                  f"{total / 2**30:.1f} GiB")


def _versions(backend):
    parts = [f"python {platform.python_version()}"] + [f"{name} {_version(name)}" for name in PACKAGES]
    if not backend.simulated:
        from numba.cuda.cudadrv import runtime
        from numba.cuda.cudadrv.driver import driver

        parts = ["driver CUDA {}.{}".format(*driver.get_version()),
                 "toolkit (NVRTC) {}.{}".format(*runtime.get_version())] + parts
    return "ok", ", ".join(parts)


def _numpy(backend):
    from eggnog.kernels.core.numpy_compat import RESTORED

    return "ok", (f"numpy {np.__version__}: put back {', '.join('np.' + a for a in RESTORED)} for numba-cuda"
                  if RESTORED else f"numpy {np.__version__} has every name numba-cuda uses")


def _linker(backend):
    name = linker_name()
    if name == "nvJitLink":
        from cuda.bindings import nvjitlink

        return "ok", "nvJitLink {}.{}".format(*nvjitlink.version())
    return "ok", "the driver's (no nvJitLink found): PTX must be no newer than the driver accepts"


def _ptx(backend):
    if backend.simulated:
        return "skipped", SIMULATOR_SKIP
    from numba.cuda.cudadrv.driver import driver

    from eggnog.kernels.checks.hardware import shared_reverse_cuda
    from eggnog.kernels.core.cuda_api import I32_1D, cuda

    ptx, _ = cuda.compile_ptx(shared_reverse_cuda.py_func, (I32_1D, I32_1D),
                              cc=cuda.get_current_device().compute_capability)
    ok, sentence = ptx_verdict(ptx_isa_of(ptx), max_ptx_isa(driver.get_version()), linker_name())
    return ("ok" if ok else "failed"), sentence


def _cudadevrt(backend):
    if backend.simulated:
        return "skipped", SIMULATOR_SKIP
    from numba.cuda.cudadrv import libs

    try:
        path = libs.get_cudalib("cudadevrt", static=True)
        libs.check_static_lib(path)
    except (FileNotFoundError, OSError) as e:
        return "failed", f"not found ({e}): cooperative launches cannot link; install numba-cuda[cu13] or [cu12]"
    return "ok", str(path)


def _shared(backend):
    values = np.arange(SHARED_VALUES, dtype=np.int32) * 7 - 12345
    ok, sentence = _agree("shared_reverse", (values,), exact=True)
    return ("ok" if ok else "failed"), f"{4 * SHARED_VALUES // 1024} KiB: {sentence}"


def _grid_sync(backend):
    from eggnog.kernels.core.cuda_api import cuda

    blocks = getattr(cuda.get_current_device(), "MULTIPROCESSOR_COUNT", 1)  # the simulator: one block
    rows = np.random.default_rng(0).integers(-(1 << 40), 1 << 40, (blocks, 64), dtype=np.int64)
    ok, sentence = _agree("grid_rotate", (rows,), exact=True)
    return ("ok" if ok else "failed"), f"{blocks} block(s): {sentence}"


def _mma(name, exact):
    def check(backend):
        from eggnog.kernels.core.registry import all_ops

        entry = all_ops()[name]
        assert entry.cases is not None  # the mma ops are tested over their cases
        results = [_agree(name, args, exact, entry.tolerance) for args in entry.cases(np.random.default_rng(0))]
        bad = [sentence for ok, sentence in results if not ok]
        return ("failed", bad[0]) if bad else ("ok", f"{len(results)} tiles: {results[-1][1]}")

    return check


ITEMS = (("gpu", _gpu), ("versions", _versions), ("numpy", _numpy), ("linker", _linker), ("ptx", _ptx),
         ("cudadevrt", _cudadevrt), ("shared", _shared), ("grid sync", _grid_sync),
         ("imma", _mma("warp_mma_s8", exact=True)), ("hmma", _mma("warp_mma_tf32", exact=False)))


def run_checks(items=ITEMS):
    """Yield an Item per check, in order, until one fails (that one included). Without a usable GPU
    (and no simulator) the first item fails with numba's reason."""
    from eggnog.kernels.core.backend import gpu_usable, select_backend

    if not gpu_usable():
        yield Item("gpu", "failed", f"no usable GPU: {_no_gpu_reason()}")
        return
    backend = select_backend("cuda")
    for name, check in items:
        try:
            status, detail = check(backend)
        except Exception as e:  # a check that cannot even run is that item failing, named
            status, detail = "failed", f"{type(e).__name__}: {' '.join(str(e).split())[:300]}"
        yield Item(name, status, detail)
        if status == "failed":
            return
