"""numba's on-disk cache of compiled kernels, in a folder named after a hash of eggnog's sources:
numba checks only the changed file of a cached function, not the files of the functions it calls, so
a source edit anywhere starts a fresh folder instead of reusing stale code. NUMBA_CACHE_DIR (or
~/.cache/eggnog-numba) is the folder's parent.

numba fixes a function's cache folder when it is decorated, so `use_compile_cache()` runs before the
first kernel module is imported: `eggnog.kernels` calls it."""

import os


def compile_cache_folder():
    from eggnog import source_digest

    parent = os.environ.get("NUMBA_CACHE_DIR") or os.path.join(os.path.expanduser("~"), ".cache", "eggnog-numba")
    key = source_digest()[:16]
    return parent if os.path.basename(parent) == key else os.path.join(parent, key)


def use_compile_cache():
    """Point numba's CPU and CUDA caches at `compile_cache_folder()`; the environment is left as it is."""
    import numba
    from numba.cuda.core import config as cuda_config

    folder = compile_cache_folder()
    numba.config.CACHE_DIR = folder
    cuda_config.CACHE_DIR = folder
