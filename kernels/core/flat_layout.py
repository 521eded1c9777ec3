"""Tensors laid end to end in one flat parameter buffer, the form every model's layout takes."""

import numpy as np


def with_offsets(specs):
    """(name, shape, kind, offset) of each (name, shape, kind) in `specs`, laid end to end in order."""
    out, offset = [], 0
    for name, shape, kind in specs:
        out.append((name, shape, kind, offset))
        offset += int(np.prod(shape))
    return out
