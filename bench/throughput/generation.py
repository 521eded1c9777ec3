"""Sampling speed of the transformer's generation (models/generate.py, as bin/generate.py runs it):
tokens/s with the KV cache (each token read at the next position; the cache holds the window the
model trains on, --context, and its last half is re-read when it is full) against re-reading the
whole context for every token, at the laptop size and any other.

    python -m bench.throughput.generation [--depth 1 --dim 32 --head-dim 16 --context 32] [--tokens 2000]

The model is freshly initialised: speed does not depend on what the weights have learned.
"""

import time

import numpy as np
import typer

from bench.report import print_table, write_result
from eggnog.kernels.transformer.decode import transformer_decode
from eggnog.runtime.cli import cli_help, user_errors

app = typer.Typer(add_completion=False, pretty_exceptions_enable=False, rich_markup_mode=None)


@app.command(help=cli_help(__doc__))
@user_errors
def main(depth: int = 1, dim: int = 32, head_dim: int = 16, vocab: int = 256, context: int = 32, tokens: int = 2000,
         reread_tokens: int = 200, backend: str = "cpu", prompt_tokens: int = 16):
    import numba

    from eggnog.kernels.core.backend import Backend, select_backend
    from eggnog.kernels.core.registry import ops_for
    from eggnog.models.egg_transformer import TransformerConfig, TransformerModel
    from eggnog.models.generate import MAX_CONTEXT, generate_transformer
    from eggnog.models.sampling import Sampler
    from eggnog.runtime.errors import BadInput

    if min(tokens, reread_tokens, prompt_tokens, context) < 2:
        raise BadInput("--tokens, --reread-tokens, --prompt-tokens and --context must be at least 2")
    device_backend = select_backend("cuda") if backend == "cuda" else Backend("cpu")
    model = TransformerModel(TransformerConfig(depth, dim, head_dim, vocab), context=context)
    window = min(context, MAX_CONTEXT)
    params = model.init_params(0)
    prompt = list(np.random.default_rng(0).integers(0, vocab, prompt_tokens))
    sampler = Sampler()
    list(generate_transformer(model, params, prompt, 4, sampler, 0, device_backend))  # compile
    start = time.perf_counter()
    produced = sum(1 for _ in generate_transformer(model, params, prompt, tokens, sampler, 0, device_backend))
    cached = produced / (time.perf_counter() - start)

    ops = ops_for(device_backend.name)
    text = list(np.random.default_rng(1).integers(0, vocab, window + reread_tokens))
    device_params = device_backend.to_device(params)
    start = time.perf_counter()
    for n in range(reread_tokens):  # generation without a cache: the whole context again for every token
        keys = device_backend.zeros((depth, window, dim), np.int8)
        values = device_backend.zeros((depth, window, dim), np.int8)
        transformer_decode(ops, device_params, np.array(text[n:n + window], np.int32), keys, values, 0, model.spec)
    device_backend.synchronize()
    reread = reread_tokens / (time.perf_counter() - start)

    rows = [{"model": f"{depth}x{dim} heads of {head_dim}, vocab {vocab}", "context": window,
             "backend": device_backend.name, "kv_cache_tokens_per_s": round(cached, 1),
             "reread_context_tokens_per_s": round(reread, 1),
             "speedup": round(cached / reread, 1)}]
    print_table(rows, list(rows[0]))
    device = device_backend.device_name if device_backend.name == "cuda" else "cpu"
    path = write_result(f"generation_throughput-transformer{depth}x{dim}", device, rows,
                        {"cpu_threads": numba.get_num_threads(), "tokens": tokens, "reread_tokens": reread_tokens})
    print(f"wrote {path}")


if __name__ == "__main__":
    app()
