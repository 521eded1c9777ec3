"""The simulator refuses what the real CUDA target refuses, where the two differ in a way the code could
rely on by accident.

numba's simulator allocates through `np.ndarray`, which takes a NumPy integer as a shape; the real
target's `device_array` (and `pinned_array`, `mapped_array`, `managed_array`) runs the shape through
`numba.cuda.api_util.prepare_shape_strides_dtype`, which raises TypeError for one (`'numpy.int64' object
is not iterable`). Installed once, under the simulator only, by `cuda_api`: every allocation first passes
the real target's own check, so a test on the simulator fails where the GPU would.
"""

import functools

import numpy as np

ALLOCATORS = ("device_array", "pinned_array", "mapped_array", "managed_array")


def real_target_shape_check(shape):
    """Raise the real target's TypeError for a shape it would refuse (a NumPy integer, a float)."""
    from numba.cuda.api_util import prepare_shape_strides_dtype

    prepare_shape_strides_dtype(shape, None, np.int8, "C")


def _checked(allocate):
    @functools.wraps(allocate)
    def allocate_checked(shape, *args, **kwargs):
        real_target_shape_check(shape)
        return allocate(shape, *args, **kwargs)

    allocate_checked.shape_checked = True  # type: ignore[attr-defined]  # a mark install() reads
    return allocate_checked


def install(cuda):
    """Wrap the simulator's allocators in `cuda` (the simulated numba.cuda module); idempotent."""
    for name in ALLOCATORS:
        allocate = getattr(cuda, name, None)
        if allocate is not None and not getattr(allocate, "shape_checked", False):
            setattr(cuda, name, _checked(allocate))
