"""Block-wide reductions shared by the row kernels (norms, softmax, cross-entropy, L1 norm): device
functions over a shared array with one slot per thread, a power of two long."""

import math

import numpy as np

from eggnog.kernels.core.cuda_api import cuda, device_function


@device_function
def block_sum(partial, t):
    """Tree sum of `partial` by every thread of the block; returns the total to all of them."""
    cuda.syncthreads()
    step = partial.shape[0] // 2
    while step > 0:
        if t < step:
            partial[t] += partial[t + step]
        cuda.syncthreads()
        step //= 2
    return partial[0]


@device_function
def block_max(partial, t):
    """Tree maximum of `partial` by every thread of the block; returns it to all of them."""
    cuda.syncthreads()
    step = partial.shape[0] // 2
    while step > 0:
        if t < step:
            partial[t] = max(partial[t], partial[t + step])
        cuda.syncthreads()
        step //= 2
    return partial[0]


@device_function
def block_total(acc, partial, t):
    """Sum of every thread's `acc` over the block, returned to all of them; `partial` (one slot per
    thread) is free for the next reduction when it returns."""
    partial[t] = acc
    total = block_sum(partial, t)
    cuda.syncthreads()  # every thread has read the total before the slots are reused
    return total


@device_function
def row_max_and_exp_sum(x, i, partial, t):
    """(max, sum of exp(x - max)) over row i of x, by the threads of one block sharing `partial`:
    the two reductions of a softmax or a log-sum-exp."""
    threads = partial.shape[0]
    top = x[i, 0]
    for j in range(t, x.shape[1], threads):
        top = max(top, x[i, j])
    partial[t] = top
    top = block_max(partial, t)
    cuda.syncthreads()  # every thread has read the maximum before the slots are reused
    acc = np.float32(0.0)
    for j in range(t, x.shape[1], threads):
        acc += math.exp(x[i, j] - top)
    partial[t] = acc
    return top, block_sum(partial, t)
