"""Parallel CPU loops that run serially when the work is small.

Entering a numba parallel region wakes the OpenMP pool: about 60 us with the passive wait policy that
keeps its threads from spinning against BLAS and the next loop (kernels/__init__.py), against 0.2 us
for a serial loop over 64 elements. The float twins of a small model (a DNC step is some twenty ops
on arrays of a few hundred elements) spent most of their time there. `parallel_jit` compiles a
function twice, with and without `parallel=True` (prange is range in the serial copy, so both compute
the same thing in the same order within an iteration), and calls the serial copy while the arrays it
is given hold fewer than SERIAL_BELOW elements in all.

Only for functions called from Python: the returned object is a plain Python callable.
"""

import functools
import types

import numba
import numpy as np

SERIAL_BELOW = 1 << 15  # elements over all array arguments; about 30 us of serial element work


def parallel_jit(fn=None, **options):
    """`@parallel_jit` or `@parallel_jit(error_model="numpy")`: numba.njit options besides parallel."""
    if fn is None:
        return lambda f: parallel_jit(f, **options)
    parallel = numba.njit(parallel=True, cache=True, **options)(fn)
    copy = types.FunctionType(fn.__code__, fn.__globals__, fn.__name__, fn.__defaults__, fn.__closure__)
    copy.__qualname__ = fn.__qualname__ + "_serial"  # its own cache file: numba keys caches by qualname
    serial = numba.njit(cache=True, **options)(copy)

    @functools.wraps(fn)
    def run(*args):
        work = sum(a.size for a in args if isinstance(a, np.ndarray))
        return (serial if work < SERIAL_BELOW else parallel)(*args)

    run.parallel, run.serial = parallel, serial  # type: ignore[attr-defined]
    return run
