"""Byte generation with the MinGRU LM: the prompt in one parallel pass (every layer's scan over the
whole prompt), then one byte at a time through the single-step scan with the carried states."""

import numpy as np

from eggnog.kernels.core.backend import to_host
from eggnog.kernels.core.registry import ops_for


def generate_mingru(model, flat_params, prompt: bytes, length, sampler, seed, backend):
    """Yield `length` sampled bytes after `prompt` (zero initial state; logits are in nats)."""
    ops = ops_for(backend.name)
    params = model.views(ops.to_device(np.asarray(flat_params, np.float32)))
    rng = np.random.default_rng(seed)
    context = np.frombuffer(prompt or b"\0", np.uint8)  # an empty prompt starts a document
    seen = np.zeros(256, dtype=bool)
    seen[context] = True
    logits, states, _ = model.forward(ops, params, context[None, :])
    last = to_host(logits)[-1]
    for _ in range(length):
        nxt = sampler.sample(last, seen, rng)
        seen[nxt] = True
        yield nxt
        logits, states = model.step(ops, params, np.array([nxt], np.uint8), states)
        last = to_host(logits)[0]
