"""Times nano-egg's own JAX evaluation of an EGGROLL population; run by bench/throughput/nano_egg_side_by_side.py
with the Python of an environment where nano-egg runs (jax, tyro, numpy, scipy, tqdm, huggingface_hub),
never inside eggnog's: it imports nothing of eggnog.

    PYTHON nano_egg_driver.py --nano-egg DIR --depth 1 --dim 64 --population 512 --tokens 100

It imports nano-egg's run.py as a module (its command line parsed from the options given here) and
wires its own functions as its `run_evolution` does: `EGG.rand_init`, `simple_es_tree_key`,
`QEggRoll.init_noiser`, `get_hidden_states_shardmap`, and `jax.jit(shard_map(vmap(generate_thread)))`
with the same specs and state donation, compiled ahead of time. Timed: one call of that compiled
function (all members, all bytes, log-likelihood sums and new states) until `block_until_ready`, on
byte windows and states already on the device; the state it returns feeds the next call, as in
training. Not timed: compilation, a warm-up call, the fitness conversion and the update (which in
nano-egg's epoch also copies its 1 GiB noise table). Perturbed: epoch number given (noise from the
table), as in an epoch; plain: epoch None, as in its validation. Prints one JSON line on stdout.

`datasets` and `wandb` are imported by run.py only to download its corpus and to log; where they are
not installed, empty modules stand in for them (nothing of the evaluation touches them).
"""

import argparse
import contextlib
import hashlib
import importlib.util
import json
import os
import sys
import tempfile
import time
import types


def stand_in(name):
    """An empty module for an import used only outside the evaluation; fails loudly if used."""
    try:
        __import__(name)
    except ImportError:
        module = types.ModuleType(name)

        def unavailable(*_, **__):
            raise RuntimeError(f"{name} is not installed; the evaluation benchmark does not use it")

        module.load_dataset = module.init = unavailable
        sys.modules[name] = module
        return True
    return False


def loadavg():
    try:
        with open("/proc/loadavg") as f:
            return [float(x) for x in f.read().split()[:3]]
    except OSError:
        return None


def import_nano_egg(directory, opts, extra=()):
    """nano-egg's run.py as a module: it parses sys.argv (the configuration in opts, then `extra`) with
    tyro when imported."""
    sys.argv = ["run.py", "--seed", str(opts.seed), "--n-layer", str(opts.depth), "--n-embd", str(opts.dim),
                "--parallel-generations-per-gpu", str(opts.population)]
    if getattr(opts, "tokens", None):
        sys.argv += ["--tokens-per-update", str(opts.tokens)]
    sys.argv += list(extra)
    spec = importlib.util.spec_from_file_location("run", os.path.join(directory, "run.py"))
    run = importlib.util.module_from_spec(spec)
    sys.modules["run"] = run  # its dataclasses look their module up while it executes
    spec.loader.exec_module(run)
    return run


def build(nano):
    """The model, noiser and thread ids at the configuration, as nano-egg's run_evolution makes them."""
    import jax
    import jax.numpy as jnp
    import numpy as np
    from jax.sharding import NamedSharding
    from jax.sharding import PartitionSpec as P

    args = nano.args
    master_key = jax.random.key(args.seed)
    frozen_params, params, scan_map, _ = nano.EGG.rand_init(jax.random.fold_in(master_key, 0), args.vocab_size,
                                                            args.n_layer, args.n_embd, args.dtype)
    params = jax.tree.map(nano.replicate_matrix, params)
    es_tree_key = nano.simple_es_tree_key(params, jax.random.fold_in(master_key, 1), scan_map)
    # the z-test threshold is read only by the update, which is not timed
    frozen_noiser_params, noiser_params = nano.NOISER.init_noiser(
        params, args.sigma_shift, np.int32(0), dtype=args.dtype, noise_seed=args.seed, noise_reuse=args.noise_reuse,
        use_clt=args.use_clt, fast_fitness=args.fast_fitness)
    thread_ids = jax.device_put(nano.replicate_matrix(np.arange(args.total_parallel_generations)),
                                NamedSharding(nano.mesh, P("data")))
    # run_evolution's log2 table (2^28 entries), which generate_thread takes as an argument
    log2_table = nano.replicate_matrix(jnp.array(
        (np.log2((np.arange(2**28) + 1) / (2**nano.FBIT)) * (2**nano.FBIT)).astype(np.int32)))
    jax.block_until_ready((params, noiser_params, log2_table))  # dispatch is asynchronous: finish the build here
    return dict(frozen_params=frozen_params, params=params, es_tree_key=es_tree_key,
                frozen_noiser_params=frozen_noiser_params, noiser_params=noiser_params, thread_ids=thread_ids,
                log2_table=log2_table)


def compiled_generate(nano, m, inputs, states, epoch):
    """run_evolution's v_generate_thread (epoch an int) or validate_model (epoch None), compiled."""
    from functools import partial

    import jax
    from jax.sharding import PartitionSpec as P

    data = P("data")
    fn = jax.jit(nano.shard_map(
        jax.vmap(partial(nano.generate_thread, m["frozen_noiser_params"], m["frozen_params"], m["es_tree_key"]),
                 in_axes=(None, None, None, 0, 0, 0, 0, None)),
        mesh=nano.mesh, in_specs=(P(), P(), P(), data, data, data, data, P()), out_specs=(data, data)),
        donate_argnums=5)
    return fn.lower(m["log2_table"], m["noiser_params"], m["params"], inputs, inputs, states, m["thread_ids"],
                    epoch).compile()


def time_mode(nano, m, inputs, targets, perturbed, repeat):
    import jax

    states = nano.get_hidden_states_shardmap(m["params"], m["frozen_params"], m["thread_ids"])
    start = time.perf_counter()
    generate = compiled_generate(nano, m, inputs, states, 0 if perturbed else None)
    compile_s = time.perf_counter() - start
    times, load_before = [], loadavg()
    for epoch in range(repeat + 1):  # call 0 is the warm-up
        start = time.perf_counter()
        scores, states = generate(m["log2_table"], m["noiser_params"], m["params"], inputs, targets, states,
                                  m["thread_ids"], epoch if perturbed else None)
        jax.block_until_ready((scores, states))
        times.append(time.perf_counter() - start)
    return {"seconds": times[1:], "warmup_s": times[0], "compile_s": compile_s,
            "loadavg": {"before": load_before, "after": loadavg()},
            "score_sum": int(jax.device_get(scores).astype("int64").sum())}


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--nano-egg", required=True, help="Folder holding nano-egg's run.py.")
    parser.add_argument("--depth", type=int, required=True)
    parser.add_argument("--dim", type=int, required=True)
    parser.add_argument("--population", type=int, required=True)
    parser.add_argument("--tokens", type=int, required=True)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--modes", default="perturbed,plain")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--platform", default=None, help="JAX's platform: cpu (default) or cuda.")
    opts = parser.parse_args()
    os.environ["JAX_PLATFORMS"] = opts.platform or os.environ.get("JAX_PLATFORMS", "cpu")
    cache = tempfile.TemporaryDirectory()
    os.environ["HF_HOME"] = cache.name  # run.py puts JAX's persistent compilation cache there: keep it private
    stood_in = [name for name in ("datasets", "wandb") if stand_in(name)]
    with contextlib.redirect_stdout(sys.stderr):  # run.py prints; stdout carries only the result line
        nano = import_nano_egg(os.path.abspath(opts.nano_egg), opts)
        import jax
        import numpy as np
        from jax.sharding import NamedSharding
        from jax.sharding import PartitionSpec as P

        start = time.perf_counter()
        m = build(nano)
        build_s = time.perf_counter() - start
        # bytes 1..255: byte 0 resets a member's state in nano-egg (and in eggnog)
        window = np.random.default_rng(opts.seed).integers(1, 256, (opts.population, opts.tokens + 1), dtype=np.uint8)
        sharding = NamedSharding(nano.mesh, P("data"))
        inputs, targets = (jax.device_put(a, sharding) for a in (window[:, :-1], window[:, 1:]))
        results = {mode: time_mode(nano, m, inputs, targets, mode == "perturbed", opts.repeat)
                   for mode in opts.modes.split(",")}
    with open(os.path.join(opts.nano_egg, "run.py"), "rb") as f:
        run_sha = hashlib.sha256(f.read()).hexdigest()
    print(json.dumps({"modes": results, "build_s": build_s, "run_py_sha256": run_sha, "jax": jax.__version__,
                      "devices": [str(d) for d in jax.devices()], "stood_in": stood_in,
                      "python": sys.version.split()[0]}))
    cache.cleanup()


if __name__ == "__main__":
    main()
