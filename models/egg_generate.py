"""Byte-by-byte generation with an EGG: the prompt is read through the recurrence, then sampled."""

import numpy as np

from eggnog.kernels.core.backend import to_host
from eggnog.kernels.core.registry import ops_for
from eggnog.models.sampling import egg_logits_to_nats


def generate_egg(model, flat_params, prompt: bytes, length, sampler, seed, backend):
    """Yield `length` sampled bytes after `prompt` (unperturbed model, zero initial state)."""
    ops = ops_for(backend.name)
    params = model.views(backend.to_device(flat_params))
    prefixes = model.prefixes(0, 0)  # unused without perturbation
    vectors = model.member_vectors(ops, params, prefixes, 0, 1, 0, False)
    states = [backend.zeros((1, model.cfg.n_embd), np.int8) for _ in range(model.cfg.n_layer)]
    rng = np.random.default_rng(seed)
    seen = np.zeros(256, dtype=bool)
    context = list(prompt) or [0]  # an empty prompt starts a document
    logits = None
    for byte in context:
        seen[byte] = True
        logits = model.step(ops, params, vectors, backend.to_device(np.array([byte], np.uint8)), states, prefixes,
                            0, 0, False)
    for _ in range(length):
        nxt = sampler.sample(egg_logits_to_nats(to_host(logits)[0]), seen, rng)
        seen[nxt] = True
        yield nxt
        logits = model.step(ops, params, vectors, backend.to_device(np.array([nxt], np.uint8)), states, prefixes,
                            0, 0, False)
