"""Trains nano-egg's EGG with its own `run_evolution` (run.py, unchanged) on byte files given here, and
prints what it logs as JSON lines; run by bench/dynamics/nano_egg.py with the Python of an environment
where nano-egg runs (jax, tyro, numpy, scipy, tqdm), never inside eggnog's: it imports nothing of eggnog.

    PYTHON nano_egg_train.py --nano-egg DIR --data-dir D --depth 1 --dim 64 --population 512 --epochs 1000

D holds `minipile_train.npy` and `minipile_valid.npy` (uint8, the names run.py reads). run.py's other
settings keep its defaults (sigma shift 4, alpha 4, group size 2, 100 tokens per update, CLT votes);
`--validation-batch-size` and `--validate-every` are passed through. run.py logs through wandb when
`--track` is on: here a stand-in `wandb` takes each epoch's stats and prints them as one JSON line
(`{"epoch": e, ...}`) on stdout, so nothing leaves the machine; `datasets`, used only to download
run.py's own corpus, stands in empty where missing. run.py's prints go to stderr.
"""

import argparse
import contextlib
import json
import os
import sys
import tempfile
import types

from nano_egg_driver import import_nano_egg, stand_in


def recording_wandb(out):
    """A `wandb` whose runs print each `log(stats)` as one JSON line on `out`, numbered by epoch."""
    module = types.ModuleType("wandb")

    class Run:
        epoch = 0

        def log(self, stats):
            line = {"epoch": self.epoch + 1}
            line.update({k: float(v) for k, v in stats.items()})
            print(json.dumps(line), file=out, flush=True)
            self.epoch += 1

    module.init = lambda **_: Run()
    return module


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="Print the versions of what run.py needs, and stop.")
    parser.add_argument("--nano-egg", help="Folder holding nano-egg's run.py.")
    parser.add_argument("--data-dir", help="Folder with minipile_train.npy and minipile_valid.npy.")
    parser.add_argument("--depth", type=int)
    parser.add_argument("--dim", type=int)
    parser.add_argument("--population", type=int)
    parser.add_argument("--epochs", type=int)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--validation-batch-size", type=int, default=64)
    parser.add_argument("--validate-every", type=int, default=10)
    opts = parser.parse_args()
    if opts.check:
        import jax
        import scipy  # noqa: F401  (run.py's z-test thresholds)
        import tqdm  # noqa: F401
        import tyro  # noqa: F401

        print(json.dumps({"jax": jax.__version__, "python": sys.version.split()[0]}))
        return
    if None in (opts.nano_egg, opts.data_dir, opts.depth, opts.dim, opts.population, opts.epochs):
        parser.error("--nano-egg, --data-dir, --depth, --dim, --population and --epochs are required")
    os.environ.setdefault("JAX_PLATFORMS", "cpu")
    cache = tempfile.TemporaryDirectory()
    os.environ["HF_HOME"] = cache.name  # run.py puts JAX's persistent compilation cache there: keep it private
    out = sys.stdout
    sys.modules["wandb"] = recording_wandb(out)
    stand_in("datasets")
    extra = ["--num-epochs", str(opts.epochs), "--dir-path", os.path.abspath(opts.data_dir), "--regenerate-model",
             "--track", "--validation-batch-size", str(opts.validation_batch_size),
             "--validate-every", str(opts.validate_every)]
    with contextlib.redirect_stdout(sys.stderr):
        nano = import_nano_egg(os.path.abspath(opts.nano_egg), opts, extra)
        nano.run_evolution()
    cache.cleanup()


if __name__ == "__main__":
    main()
