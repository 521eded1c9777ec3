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

from eggnog.kernels.core.array_types import Int8Array, Int32Array, Int64Array, UInt8Array
from eggnog.kernels.core.cuda_api import on_device, require
from eggnog.kernels.core.placement import BackendArray
from eggnog.kernels.core.registry import op, registered
from eggnog.kernels.transformer import decode_cuda, epoch_cpu
from eggnog.kernels.transformer.epoch import SPEC, _cases, _forward
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


# params' length and the cache's n_layer and dim follow spec's values, checked by _check
@op(cases=_decode_cases, args={"params": "int8[n_params]", "tokens": "uint8/int32[n]",
                               "keys": "int8[n_layer, positions, dim]", "values": "int8[n_layer, positions, dim]",
                               "position": "int", "spec": SPEC})
def reference_transformer_decode(params: Int8Array, tokens: UInt8Array | Int32Array, keys: Int8Array, values: Int8Array,
                                 position: int, spec: Int64Array) -> Int64Array:
    """int64 (vocab,): the clipped logits of the unperturbed model after reading `tokens` at positions
    position .. position + n - 1, attending to the KV cache below `position`; the keys and values of the
    new positions are written into the cache in place (as transformer_epoch computes them).

    params: the model's flat int8 buffer (`layout.transformer_layout`). tokens: the new tokens.
    keys, values: the KV cache of every layer, filled below `position` by earlier calls (models/generate.py
    re-reads half the context from position 0 when it is full). position: where tokens[0] is read.
    spec: `layout.make_spec`, the model's sizes and shifts (layout.SPEC_FIELDS)."""
    _check(tokens, keys, values, position, spec)
    k, v = keys.astype(np.int64)[:, None], values.astype(np.int64)[:, None]
    window = np.append(np.asarray(tokens, np.int64), 0)[None, :]  # the token after the last is never scored
    _, logits = _forward(params, window, np.zeros(len(tensor_table(spec)), np.int64), 0, spec, False, k, v, position)
    keys[:], values[:] = k[:, 0], v[:, 0]
    return logits[0]


@op
def cpu_transformer_decode(params: Int8Array, tokens: UInt8Array | Int32Array, keys: Int8Array, values: Int8Array,
                           position: int, spec: Int64Array) -> Int64Array:
    _check(tokens, keys, values, position, spec)
    return epoch_cpu.run_decode(params, tokens, keys, values, position, spec)


@op
def cuda_transformer_decode(params: BackendArray, tokens: BackendArray, keys: BackendArray, values: BackendArray,
                            position: int, spec: BackendArray) -> BackendArray:
    _check(tokens, keys, values, position, spec)
    return decode_cuda.run_decode(on_device(params), on_device(tokens, np.int32), keys, values, position,
                                  spec).copy_to_host()

# the ops of this module by name, for callers: transformer_decode(kernels, ...)
transformer_decode = registered(reference_transformer_decode)
