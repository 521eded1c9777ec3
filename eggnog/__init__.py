"""eggnog: Numba-CUDA kernels and thin MPI scripts for training recurrent byte-level language models
without backpropagation. Its parts install as `eggnog.kernels`, `eggnog.models`, `eggnog.training`,
`eggnog.evolution`, `eggnog.zorn`, `eggnog.corpus`, `eggnog.runtime` and `eggnog.interop`.

Importing eggnog does no work and changes nothing outside this package: the source hash behind
`code_version()` is computed when first asked for, and numba's compile cache is pointed at eggnog's
folder when `eggnog.kernels` is imported (kernels/core/compile_cache.py)."""

import functools
import os

__version__ = "0.1.0"
PARTS = ("kernels", "models", "training", "evolution", "zorn", "corpus", "runtime", "interop")

# From a source checkout on PYTHONPATH (no install), the parts are the folders beside this one: the
# package's own search path says so, as a namespace package's would.
_checkout = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if os.path.isfile(os.path.join(_checkout, "pyproject.toml")) and os.path.isfile(
        os.path.join(_checkout, "kernels", "__init__.py")) and _checkout not in __path__:
    __path__.append(_checkout)


@functools.cache
def source_digest():
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


def code_version():
    """What a coordinator's workers and a gossip island's peers must match: the release and the exact
    sources."""
    return f"{__version__}+{source_digest()[:16]}"
