"""pytest with eggnog's source digest pinned to the unmutated checkout's (EGGNOG_MUTATION_DIGEST). numba's
compile cache folder is named after that digest (kernels/core/compile_cache.py), so without the pin every
mutant would compile every kernel its tests touch afresh; with it only the mutated file's functions are
recompiled (numba checks each function's own file). The run warms the cache with the unmutated tests
first, so no cached function is ever compiled from a mutated file."""

import os
import sys

import eggnog

_PINNED = os.environ["EGGNOG_MUTATION_DIGEST"]
eggnog.source_digest = lambda: _PINNED

import pytest  # noqa: E402

if __name__ == "__main__":
    sys.exit(pytest.main(sys.argv[1:]))
