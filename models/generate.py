"""Generation from a trained model's parameters, one generator per model (bin/generate.py picks by the
checkpoint), each yielding `length` sampled tokens after a prompt:
- EGG, byte by byte: the prompt is read through the recurrence, then sampled;
- MinGRU LM: the prompt in one parallel pass (every layer's scan over the whole prompt), then one byte
  at a time through the single-step scan with the carried states;
- d-eggs' transformer: the prompt (its last tokens) fills a KV cache of the window the model trained
  on (at most MAX_CONTEXT), then each sampled token is read at the next position (op
  transformer_decode); when the cache is full, its last half is re-read into an empty one. d-eggs' integer sampler
  (kernels/transformer/sampler.py) picks each token with its presence penalty over the last
  PENALTY_HISTORY tokens."""

from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING

import numpy as np
import numpy.typing as npt

from eggnog.kernels.core.backend import Backend
from eggnog.kernels.core.placement import kernels_for, to_host
from eggnog.kernels.noise.reference import bits
from eggnog.kernels.noise.scalar_math import stream_key
from eggnog.kernels.transformer.decode import transformer_decode
from eggnog.kernels.transformer.sampler import sample_token, sampler_settings
from eggnog.models.sampling import Sampler, egg_logits_to_nats

if TYPE_CHECKING:
    from eggnog.models.egg import EggModel
    from eggnog.models.egg_transformer import TransformerModel
    from eggnog.models.mingru import MinGruModel

MAX_CONTEXT = 256
PENALTY_HISTORY = 256  # d-eggs' history buffer
SAMPLE_STREAM = (1 << 31) - 7  # a tensor id of no parameter: the sampler's own noise stream


def generate_egg(model: "EggModel", flat_params: npt.ArrayLike, prompt: bytes, length: int, sampler: Sampler, seed: int,
                 backend: Backend) -> Iterator[int]:
    """Yield `length` sampled bytes after `prompt` (unperturbed model, zero initial state)."""
    ops = kernels_for(backend.name)
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


def generate_mingru(model: "MinGruModel", flat_params: npt.ArrayLike, prompt: bytes, length: int, sampler: Sampler,
                    seed: int, backend: Backend) -> Iterator[int]:
    """Yield `length` sampled bytes after `prompt` (zero initial state; logits are in nats)."""
    ops = kernels_for(backend.name)
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


def generate_transformer(model: "TransformerModel", flat_params: npt.ArrayLike, prompt: Sequence[int] | bytes,
                         length: int, sampler: Sampler, seed: int, backend: Backend) -> Iterator[int]:
    """Yield `length` sampled tokens after `prompt` (a sequence of tokens); the sampler's top-k and
    top-p are not d-eggs' and are not used (bin/generate.py refuses them)."""
    ops = kernels_for(backend.name)
    params = backend.to_device(np.asarray(flat_params, np.int8))
    temperature, floor_weight, penalty = sampler_settings(sampler.temperature, sampler.min_p,
                                                          sampler.presence_penalty)
    key = stream_key(seed, SAMPLE_STREAM, 0, 0)
    context = [int(t) for t in prompt] or [0]
    cache = min(MAX_CONTEXT, model.context or MAX_CONTEXT)
    keys = backend.zeros((model.cfg.n_layer, cache, model.cfg.dim), np.int8)
    values = backend.zeros((model.cfg.n_layer, cache, model.cfg.dim), np.int8)

    def read(tokens: Sequence[int], position: int) -> np.ndarray:
        return transformer_decode(ops, params, np.array(tokens, np.int32), keys, values, position, model.spec)

    window = context[-cache:]
    logits, position = read(window, 0), len(window)
    for step in range(length):
        counts = np.bincount(context[-PENALTY_HISTORY:], minlength=model.cfg.vocab).astype(np.int64)
        hi, lo = (int(b) for b in bits(key, 2 * step, 2))
        token = int(sample_token(ops, np.asarray(to_host(logits), np.int64), counts, temperature, floor_weight,
                                 penalty, ((hi << 32) | lo) >> 1))
        context.append(token)
        yield token
        if step + 1 == length:
            break
        if position == cache:  # the cache is full: re-read the last half of the context into it
            window = context[-max(1, cache // 2):]
            logits, position = read(window, 0), len(window)
        else:
            logits, position = read([token], position), position + 1
