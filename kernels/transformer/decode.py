"""Generation's step: the unperturbed transformer reads new tokens after a context whose keys and
values are already in a KV cache, so each generated token costs one position.

    transformer_decode(params, tokens, keys, values, position, spec) -> int64 (vocab,)

- tokens: int32 (n,), read at positions position .. position + n - 1;
- keys, values: int8 (n_layer, positions, dim), filled below `position`; the new positions are
  written in place (the same values transformer_epoch's cache holds);
- returns the int8 logits (as int64) after the last token: those of transformer_epoch's last
  position for the whole context read from an empty cache.
"""

import numpy as np

from eggnog.kernels.core.cuda_api import on_device, require
from eggnog.kernels.core.registry import op, registered
from eggnog.kernels.transformer import decode_cuda, epoch_cpu
from eggnog.kernels.transformer.epoch import _cases, _forward
from eggnog.kernels.transformer.layout import tensor_table


def _check(tokens, keys, values, position, spec):
    n_layer, dim = int(spec[0]), int(spec[1])
    require(keys.shape == values.shape and len(keys.shape) == 3 and keys.shape[0] == n_layer
            and keys.shape[2] == dim, f"the KV cache must be (n_layer, positions, dim) = ({n_layer}, ., {dim})")
    require(0 <= position and position + tokens.shape[0] <= keys.shape[1],
            f"positions {position}..{position + tokens.shape[0] - 1} do not fit a cache of {keys.shape[1]}")


def _decode_cases(rng):
    """From an empty cache, and after a cache filled with random rows below position 2."""
    for params, windows, _, _, spec, _ in _cases(rng):
        n_layer, dim = int(spec[0]), int(spec[1])
        for position in (0, 2):
            tokens = windows[0, :-1].copy()
            keys = np.zeros((n_layer, position + tokens.size + 1, dim), np.int8)
            values = np.zeros_like(keys)
            keys[:, :position] = rng.integers(-127, 128, (n_layer, position, dim))
            values[:, :position] = rng.integers(-127, 128, (n_layer, position, dim))
            yield params, tokens, keys, values, position, spec


@op(cases=_decode_cases)
def reference_transformer_decode(params, tokens, keys, values, position, spec):
    _check(tokens, keys, values, position, spec)
    k, v = keys.astype(np.int64)[:, None], values.astype(np.int64)[:, None]
    window = np.append(np.asarray(tokens, np.int64), 0)[None, :]  # the token after the last is never scored
    _, logits = _forward(params, window, np.zeros(len(tensor_table(spec)), np.int64), 0, spec, False, k, v, position)
    keys[:], values[:] = k[:, 0], v[:, 0]
    return logits[0]


@op
def cpu_transformer_decode(params, tokens, keys, values, position, spec):
    _check(tokens, keys, values, position, spec)
    return epoch_cpu.run_decode(params, tokens, keys, values, position, spec)


@op
def cuda_transformer_decode(params, tokens, keys, values, position, spec):
    _check(tokens, keys, values, position, spec)
    return decode_cuda.run_decode(on_device(params), on_device(tokens, np.int32), keys, values, position,
                                  spec).copy_to_host()

# the ops of this module by name, for callers: transformer_decode(kernels, ...)
transformer_decode = registered("transformer_decode")
