"""eggnog: Numba-CUDA kernels and thin MPI scripts for training recurrent byte-level language models
without backpropagation. Its parts install as `eggnog.kernels`, `eggnog.models`, `eggnog.training`,
`eggnog.evolution`, `eggnog.zorn`, `eggnog.corpus` and `eggnog.runtime`."""

import os

__version__ = "0.1.0"

# From a source checkout on PYTHONPATH (no install), the parts are the folders beside this one.
_checkout = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if os.path.isfile(os.path.join(_checkout, "pyproject.toml")) and os.path.isfile(
        os.path.join(_checkout, "kernels", "__init__.py")) and _checkout not in __path__:
    __path__.append(_checkout)
