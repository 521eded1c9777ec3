"""eggnog: Numba-CUDA kernels and thin MPI scripts for training recurrent byte-level language models
without backpropagation. Its parts install as `eggnog.kernels`, `eggnog.models`, `eggnog.training`,
`eggnog.evolution`, `eggnog.zorn`, `eggnog.corpus` and `eggnog.runtime`."""

import os

__version__ = "0.1.0"
PARTS = ("kernels", "models", "training", "evolution", "zorn", "corpus", "runtime")

# From a source checkout on PYTHONPATH (no install), the parts are the folders beside this one.
_checkout = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if os.path.isfile(os.path.join(_checkout, "pyproject.toml")) and os.path.isfile(
        os.path.join(_checkout, "kernels", "__init__.py")) and _checkout not in __path__:
    __path__.append(_checkout)


def _source_digest():
    """SHA-256 of this package's sources (file names and contents, in a fixed order)."""
    import hashlib

    root = os.path.dirname(os.path.abspath(__file__))
    folders = [root] + [os.path.join(base, part) for base in (root, _checkout) for part in PARTS]
    digest = hashlib.sha256()
    for folder in filter(os.path.isdir, folders):
        for base, dirs, names in os.walk(folder):
            dirs[:] = sorted(d for d in dirs if d != "__pycache__")
            for name in sorted(n for n in names if n.endswith(".py")):
                path = os.path.join(base, name)
                with open(path, "rb") as f:
                    digest.update(os.path.relpath(path, folder).encode() + f.read())
    return digest.hexdigest()


SOURCE_DIGEST = _source_digest()
# What a coordinator's workers must match: the release and the exact sources.
CODE_VERSION = f"{__version__}+{SOURCE_DIGEST[:16]}"


def _compile_cache():
    """Numba's on-disk cache of compiled kernels, in a folder named after a hash of this package's
    sources: numba checks only the changed file of a cached function, not the files of the functions
    it calls, so a source edit anywhere starts a fresh folder instead of reusing stale code.
    NUMBA_CACHE_DIR (or ~/.cache) is the folder's parent. Set before numba is first imported."""
    import sys

    parent = os.environ.get("NUMBA_CACHE_DIR") or os.path.join(os.path.expanduser("~"), ".cache", "eggnog-numba")
    key = SOURCE_DIGEST[:16]
    path = parent if os.path.basename(parent) == key else os.path.join(parent, key)  # a child process
    if "numba" in sys.modules:
        import numba

        numba.config.CACHE_DIR = path
    else:
        os.environ["NUMBA_CACHE_DIR"] = path


_compile_cache()
