"""Generation with d-eggs' transformer: each token re-reads the context (its last MAX_CONTEXT tokens)
from an empty KV cache, then d-eggs' integer sampler (kernels/transformer/sampler.py) picks the next one
with its presence penalty over the last PENALTY_HISTORY tokens."""

import numpy as np

from eggnog.kernels.core.registry import ops_for
from eggnog.kernels.noise.reference import bits
from eggnog.kernels.noise.scalar_math import stream_key
from eggnog.kernels.transformer.sampler import sampler_settings

MAX_CONTEXT = 256
PENALTY_HISTORY = 256  # d-eggs' history buffer
SAMPLE_STREAM = (1 << 31) - 7  # a tensor id of no parameter: the sampler's own noise stream


def generate_transformer(model, flat_params, prompt, length, sampler, seed, backend):
    """Yield `length` sampled tokens after `prompt` (a sequence of tokens); the sampler's top-k and
    top-p are not d-eggs' and are not used (bin/generate.py refuses them)."""
    ops = ops_for(backend.name)
    params = backend.to_device(np.asarray(flat_params, np.int8))
    temperature, floor_weight, penalty = sampler_settings(sampler.temperature, sampler.min_p,
                                                          sampler.presence_penalty)
    key = stream_key(seed, SAMPLE_STREAM, 0, 0)
    context = [int(t) for t in prompt] or [0]
    for step in range(length):
        logits = ops.transformer_last_logits(params, np.array(context[-MAX_CONTEXT:], np.int32), model.spec)
        counts = np.bincount(context[-PENALTY_HISTORY:], minlength=model.cfg.vocab).astype(np.int64)
        hi, lo = (int(b) for b in bits(key, 2 * step, 2))
        token = ops.sample_token(np.asarray(logits, np.int64), counts, temperature, floor_weight, penalty,
                                 ((hi << 32) | lo) >> 1)
        context.append(int(token))
        yield int(token)
