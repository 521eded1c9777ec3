"""Rebuild tests/data/egg_nano_egg_L1_D16.npz with nano-egg's own run.py (commit a04bab2), JAX on the CPU.

nano-egg's run.py is imported as a module (its `__main__` block, which downloads minipile and trains, does not
run) and its own functions make everything: `EGG.rand_init` the parameters, `QEggRoll.init_noiser` the division
table of its layer norm, `EGG.forward` each step, `get_int_ll` each log-likelihood, and its `generate_thread`
(the scan that training runs) cross-checks the total and the final state. Only the noise matrix, which an
unperturbed forward never reads, is drawn small (see init_noiser_without_noise). About 3.6 GB of memory (the log2
table alone is 1 GiB) and a minute on two cores.

    git clone https://github.com/ESHyperscale/nano-egg && git -C nano-egg checkout a04bab2
    python -m venv egg-env && . egg-env/bin/activate
    pip install jax==0.10.2 jaxlib==0.10.2 datasets tyro tqdm wandb scipy huggingface_hub
    JAX_PLATFORMS=cpu python tests/data/make/egg_nano_egg.py --source nano-egg --out egg_nano_egg_L1_D16.npz \\
        --check tests/data/egg_nano_egg_L1_D16.npz
"""

import importlib.util
import os
import sys
from functools import partial
from pathlib import Path

import numpy as np
from golden_compare import parser, refuse, require_commit, require_version, save_and_check

COMMIT = "a04bab2d6515967f3e9c54949e95de1f00a67c4c"
JAX_VERSION = "0.10.2"
SEED, VOCAB, N_LAYER, N_EMBD = 0, 256, 1, 16
PREFIX = f"L{N_LAYER}_D{N_EMBD}__"
PHRASE = b"Zero-order training of recurrent networks: "
N_BYTES, SEPARATOR_AT = 300, 150


def input_bytes():
    """300 bytes of a repeated phrase with a document separator (byte 0) inserted at position 150."""
    text = PHRASE * (N_BYTES // len(PHRASE) + 1)
    return np.frombuffer(text[:SEPARATOR_AT] + b"\0" + text[SEPARATOR_AT:N_BYTES - 1], dtype=np.uint8).copy()


def import_run_py(source):
    # run.py parses its flags with tyro at import time: give it this model's size and a one-pair population.
    sys.argv = ["run.py", "--seed", str(SEED), "--n_layer", str(N_LAYER), "--n_embd", str(N_EMBD),
                "--vocab_size", str(VOCAB), "--dtype", "int8", "--parallel_generations_per_gpu", "2",
                "--validation_batch_size", "1"]
    spec = importlib.util.spec_from_file_location("nano_egg_run", Path(source) / "run.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def log2_table(fbit):
    """run_evolution's LOG2TABLE (log2((i + 1) / 2**FBIT) * 2**FBIT, i < 2**28), built in slices to spare memory;
    each entry depends on its index alone, so the slices give the same table."""
    size, step = 2**28, 2**24
    table = np.empty(size, dtype=np.int32)
    for start in range(0, size, step):
        table[start:start + step] = (np.log2((np.arange(start, start + step) + 1) / (2**fbit)) * (2**fbit)).astype(
            np.int32)
    return table


def init_noiser_without_noise(egg, params):
    """nano-egg's init_noiser (its layer norm reads the DIVISION table it builds), with the 2**30-entry noise
    matrix that an unperturbed forward never reads drawn as one entry: the full draw needs about 19 GB."""
    jax = egg.jax
    normal = jax.random.normal

    def small_noise(key, shape, *rest, **kwargs):
        return normal(key, (1,) if shape == 2**30 else shape, *rest, **kwargs)

    jax.random.normal = small_noise
    try:
        return egg.NOISER.init_noiser(params, 4, 0, dtype="int8", noise_seed=SEED)
    finally:
        jax.random.normal = normal


def flat_names(tree, prefix=""):
    """nano-egg's nested parameter dicts as dotted names, in the order jax flattens them (sorted keys)."""
    if isinstance(tree, dict):
        out = {}
        for key in sorted(tree):
            out.update(flat_names(tree[key], f"{prefix}{key}."))
        return out
    return {prefix[:-1]: np.asarray(tree)}


def rebuild(source):
    egg = import_run_py(source)
    jax, jnp = egg.jax, egg.jnp
    master_key = jax.random.key(SEED)
    # run_evolution's keys: model from fold_in(master, 0), es tree from fold_in(master, 1)
    frozen_params, params, scan_map, _ = egg.EGG.rand_init(jax.random.fold_in(master_key, 0), VOCAB, N_LAYER,
                                                           N_EMBD, "int8")
    es_tree_key = egg.simple_es_tree_key(params, jax.random.fold_in(master_key, 1), scan_map)
    frozen_noiser, noiser = init_noiser_without_noise(egg, params)
    table = jnp.asarray(log2_table(egg.FBIT))

    tokens = input_bytes()
    targets = np.append(tokens[1:], 0)  # the last step has no next byte; its log-likelihood is dropped

    def step(carry, inputs):
        state, table = carry
        token, target = inputs
        state = jax.lax.select(token == 0, jnp.zeros_like(state), state)  # as generate_thread's inner_scan
        logits, state = egg.EGG.forward(egg.NOISER, frozen_noiser, noiser, frozen_params, params, es_tree_key,
                                        None, token, state)
        index = jnp.sum(egg.EXP2TABLE[logits.astype(jnp.int32) + 128]) - 1  # the entry get_int_ll reads
        return (state, table), (logits, state, egg.get_int_ll(table, logits, target), index)

    zero = egg.EGG.default_state(params, frozen_params)
    _, (logits, states, ll, index) = jax.jit(lambda c, x: jax.lax.scan(step, c, x))(
        (zero, table), (jnp.asarray(tokens), jnp.asarray(targets)))
    logits, states, ll, index = (np.asarray(a) for a in (logits, states, ll, index))
    ll, index = ll[:-1].astype(np.int32), index[:-1].astype(np.int32)
    value = np.asarray(table)[index]

    # the original's own scan over the same bytes must give the same total and final state
    scan = jax.jit(partial(egg.generate_thread, frozen_noiser, frozen_params, es_tree_key))
    total, final = scan(table, noiser, params, jnp.asarray(tokens[:-1]), jnp.asarray(tokens[1:]), zero, 0, None)
    if int(total) != int(ll.sum()) or not np.array_equal(np.asarray(final), states[-2]):
        raise RuntimeError("nano-egg's generate_thread disagrees with the step-by-step forward")
    if not np.array_equal(ll, logits[np.arange(len(ll)), tokens[1:]].astype(np.int32) + 128 - value):
        raise RuntimeError("the recorded log2-table entries do not explain get_int_ll's values")

    total = np.int32(ll.sum())
    bits_per_byte = -float(total) / (len(ll) * 2**egg.FBIT)
    arrays = {
        "input_bytes": tokens, "targets": tokens[1:].copy(), "exp2_table": np.asarray(egg.EXP2TABLE),
        PREFIX + "n_layer": np.int32(N_LAYER), PREFIX + "n_embd": np.int32(N_EMBD),
        PREFIX + "vocab_size": np.int32(VOCAB), PREFIX + "seed": np.int32(SEED),
        PREFIX + "variant": np.array("original_init"),
    }
    arrays.update({PREFIX + "param__" + name: a for name, a in flat_names(params).items()})
    arrays.update({
        PREFIX + "logits": logits, PREFIX + "ll": ll, PREFIX + "states": states, PREFIX + "ll_total": total,
        PREFIX + "bits_per_byte_f32": np.float32(bits_per_byte),
        PREFIX + "bits_per_byte_f64": np.float64(bits_per_byte),
        PREFIX + "log2_index": index, PREFIX + "log2_value": value,
    })
    return arrays


def main():
    flags = parser(__doc__.splitlines()[0], "a git checkout of nano-egg at a04bab2", "JAX")
    args = flags.parse_args()
    require_commit(args.source, COMMIT, "nano-egg")
    if os.environ.get("JAX_PLATFORMS") != "cpu":
        refuse("set JAX_PLATFORMS=cpu: the committed outputs are nano-egg's on the CPU.")
    import jax

    require_version("jax", jax.__version__, JAX_VERSION, args.unpinned)
    arrays = rebuild(args.source)
    save_and_check(args, arrays, 0.0)


if __name__ == "__main__":
    main()
