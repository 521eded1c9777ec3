"""Commands printed for the user (continue, generate, evaluate, plot) in the form this process was
started with: `python <folder>/generate.py` beside a script run by its path, `eggnog-generate` under
an installed console command (pyproject.toml's [project.scripts]), so that they work from a wheel too."""

import sys
from pathlib import Path

CONSOLE = {"train_es.py": "eggnog-train-es", "train_bptt.py": "eggnog-train-bptt", "train_rge.py": "eggnog-train-rge",
           "train_gossip.py": "eggnog-gossip", "es_worker.py": "eggnog-es-worker", "prepare_data.py": "eggnog-prepare",
           "evaluate.py": "eggnog-evaluate", "generate.py": "eggnog-generate", "plot.py": "eggnog-plot",
           "print_arch.py": "eggnog-print-arch", "selfcheck.py": "eggnog-selfcheck"}


def started_as(argv0=None):
    """The program this process was started as (sys.argv[0] unless given)."""
    return Path(argv0 if argv0 is not None else (sys.argv[0] if sys.argv else ""))


def command(script, argv0=None):
    """How to run bin/`script` (e.g. "generate.py") the way this process was run."""
    started = started_as(argv0)
    if started.name in CONSOLE.values():
        return CONSOLE[script]
    if started.suffix == ".py" and (started.parent / script).is_file():
        return f"python {started.parent / script}"
    return f"python bin/{script}"


def this_program(argv0=None):
    """How to run this process's own program again."""
    started = started_as(argv0)
    return started.name if started.name in CONSOLE.values() else f"python {started}"
