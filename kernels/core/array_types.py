"""The type hints of the ops' arrays. A reference and a CPU twin take NumPy arrays of the dtypes their
declarations name (core/signature.py); `float` is `FloatArray`, which a reference takes in float32 or float64
and a twin in float32. A CUDA launcher takes and returns `BackendArray` (placement.py): numba device arrays,
or anything with `__cuda_array_interface__`, which type checkers cannot name."""

from typing import Any

import numpy as np
import numpy.typing as npt

FloatArray = npt.NDArray[np.floating[Any]]
Float16Array = npt.NDArray[np.float16]
Float32Array = npt.NDArray[np.float32]
Float64Array = npt.NDArray[np.float64]
Int8Array = npt.NDArray[np.int8]
Int32Array = npt.NDArray[np.int32]
Int64Array = npt.NDArray[np.int64]
UInt8Array = npt.NDArray[np.uint8]
