"""A run mirrored in Weights & Biases or TensorBoard (`--log wandb`, `--log tensorboard`, or both:
`--log wandb,tensorboard`) beside metrics.jsonl, which stays the record: every metrics line (rank 0;
a gossip island its own), the resolved config, and the plots (RUN/plots/*.png) at the end. Both
packages are optional extras, imported only when asked for. A missing package, or a logger that
raises (starting or in any call), costs one line on stderr and that logger, never the run.

TensorBoard: event files in RUN/tb/ (a gossip island's in RUN/tb/rank-NN/), numbers as scalars
against `step` (a gossip run's population summaries: `round`), the config as text, plots as images.
W&B: one run per run directory, its id kept in RUN/wandb_id so that a resumed run goes on in the
same W&B run (`resume="allow"`), its files in RUN/wandb/ (with WANDB_MODE=offline,
RUN/wandb/offline-run-<time>-<id>, uploaded later by `wandb sync`); every run is in a group named
after the run directory, and a gossip island is a run of that group of its own (RUN/rank-NN/wandb_id,
RUN/rank-NN/wandb/)."""

import json
import numbers
import os
import secrets
import string
import struct
import time
from pathlib import Path

from eggnog.runtime import optional
from eggnog.runtime.errors import BadInput
from eggnog.runtime.files import write_atomic

LOGGERS = ("wandb", "tensorboard")
NONE = "none"
INSTEAD = {"wandb": "--log wandb is off; metrics.jsonl has every line (pip install 'eggnog[wandb]')",
           "tensorboard": "--log tensorboard is off; metrics.jsonl has every line (pip install 'eggnog[tensorboard]')"}
ID_FILE = "wandb_id"


def chosen_loggers(value):
    """The loggers a --log value names: wandb, tensorboard, both comma-separated, or none."""
    names = [n.strip().lower() for n in (value or NONE).split(",") if n.strip()]
    unknown = [n for n in names if n not in LOGGERS + (NONE,)]
    if unknown:
        raise BadInput(f"--log: unknown logger {unknown[0]!r}; choose wandb, tensorboard, wandb,tensorboard or none")
    return tuple(dict.fromkeys(n for n in names if n != NONE))


def numbers_of(record):
    """The numbers of a metrics line by key (text, null and lists left out)."""
    return {k: float(v) for k, v in record.items() if isinstance(v, numbers.Real)}


def x_key(record):
    """The key a line is plotted against: `step`, or a gossip population summary's `round`."""
    return "step" if "step" in record else "round"


class _Missing(Exception):
    """The logger's package is not installed (optional_import said so)."""


def _package(name):
    module = optional.optional_import(name, INSTEAD[name])
    if module is None:
        raise _Missing(name)
    return module


def failed(name, doing, error):
    """The one line a failing logger costs."""
    optional.say_once(f"log-{name}", f"warning: {name} failed {doing} ({type(error).__name__}: {error}); the run "
                                     "goes on without it (metrics.jsonl has every line)")


class TensorBoardLog:
    name = "tensorboard"

    def __init__(self, directory):
        _package("tensorboard")
        from tensorboard.compat.proto import event_pb2, summary_pb2
        from tensorboard.summary.writer.event_file_writer import EventFileWriter

        self.event, self.summary = event_pb2.Event, summary_pb2.Summary
        Path(directory).mkdir(parents=True, exist_ok=True)
        self.writer = EventFileWriter(str(directory), flush_secs=10)

    def _add(self, step, values):
        self.writer.add_event(self.event(wall_time=time.time(), step=int(step), summary=self.summary(value=values)))

    def config(self, config):
        from tensorboard.plugins.text.summary_v2 import text_pb

        text = json.dumps(config, indent=1, sort_keys=True, default=str)
        self._add(0, text_pb("config", "    " + text.replace("\n", "\n    ")).value)  # indented: markdown code

    def line(self, x_name, x, values):
        self._add(x, [self.summary.Value(tag=k, simple_value=v) for k, v in values.items() if k != x_name])

    def images(self, x, paths):
        values = []
        for path in paths:
            png = Path(path).read_bytes()
            width, height = struct.unpack(">II", png[16:24])  # the PNG header's IHDR chunk
            values.append(self.summary.Value(tag=f"plots/{Path(path).stem}", image=self.summary.Image(
                height=height, width=width, colorspace=4, encoded_image_string=png)))
        self._add(x, values)
        self.writer.flush()

    def close(self):
        self.writer.close()


class WandbLog:
    name = "wandb"

    def __init__(self, home, run_name, group, job_type):
        wandb = _package("wandb")
        id_file = Path(home) / ID_FILE
        run_id = id_file.read_text().strip() if id_file.is_file() else ""
        if not run_id:
            run_id = "".join(secrets.choice(string.ascii_lowercase + string.digits) for _ in range(8))
            write_atomic(id_file, (run_id + "\n").encode())
        self.wandb, self.x_name = wandb, None
        self.run = wandb.init(project=os.environ.get("WANDB_PROJECT") or "eggnog", dir=str(home), id=run_id,
                              resume="allow", name=run_name, group=group, job_type=job_type, reinit="create_new",
                              settings=wandb.Settings(console="off", silent=True))

    def config(self, config):
        self.run.config.update(config, allow_val_change=True)

    def line(self, x_name, x, values):
        if self.x_name is None:
            self.x_name = x_name
            self.run.define_metric(x_name)
            self.run.define_metric("*", step_metric=x_name)
        self.run.log({**values, self.x_name: x})

    def images(self, x, paths):
        self.run.log({**{f"plots/{Path(p).stem}": self.wandb.Image(str(p)) for p in paths}, self.x_name or "step": x})

    def close(self):
        self.run.finish()


class Mirror:
    """The loggers opened for one metrics log. Each call goes to every logger; one that raises is
    dropped after one line on stderr."""

    def __init__(self, loggers):
        self.loggers, self.x, self.opened = list(loggers), 0, time.time()

    def _each(self, doing, call):
        for logger in list(self.loggers):
            try:
                call(logger)
            except Exception as e:  # a logger's failure never stops the run
                self.loggers.remove(logger)
                failed(logger.name, doing, e)

    def config(self, config):
        self._each("logging the config", lambda logger: logger.config(config))

    def line(self, record):
        if not self.loggers:
            return
        name = x_key(record)
        values = numbers_of(record)
        self.x = int(values.get(name, self.x + 1))
        self._each("logging a metrics line", lambda logger: logger.line(name, self.x, values))

    def images(self, paths):
        if paths:
            self._each("logging the plots", lambda logger: logger.images(self.x, paths))

    def close(self):
        self._each("closing", lambda logger: logger.close())
        self.loggers = []


def open_mirror(config, tb_dir, wandb_home, run_name, group, job_type=None):
    """A Mirror of the loggers `config["log"]` names, the config logged to each."""
    loggers = []
    for name in chosen_loggers(config.get("log")):
        try:
            loggers.append(TensorBoardLog(tb_dir) if name == "tensorboard"
                           else WandbLog(wandb_home, run_name, group, job_type))
        except _Missing:
            pass
        except Exception as e:
            failed(name, "starting", e)
    mirror = Mirror(loggers)
    mirror.config(config)
    return mirror


_runs = {}  # run directory (resolved) -> the Mirror of its metrics.jsonl (rank 0)


def _key(run_dir):
    return str(Path(run_dir).resolve())


def open_run(world, run_dir, config):
    """Rank 0: open the loggers of the run at `run_dir`; its metrics log (runtime/rundir.py) sends them
    its lines until close_run."""
    if world.is_root and chosen_loggers(config.get("log")):
        run_dir = Path(run_dir)
        _runs[_key(run_dir)] = open_mirror(config, run_dir / "tb", run_dir, run_dir.name, run_dir.name)


def mirror_of(run_dir):
    """The Mirror of the run at `run_dir` in this process, or None."""
    return _runs.get(_key(run_dir))


def close_run(run_dir):
    """Send the plots drawn since the loggers opened (RUN/plots/*.png) and close them."""
    mirror = _runs.pop(_key(run_dir), None)
    if mirror is None:
        return
    plots = Path(run_dir) / "plots"
    mirror.images(sorted(p for p in plots.glob("*.png") if p.stat().st_mtime >= mirror.opened - 1))
    mirror.close()


def open_island(run_dir, home, config):
    """The Mirror of a gossip island's metrics (its own lines, in RUN/tb/rank-NN and its own W&B run
    in the run directory's group)."""
    run_dir, home = Path(run_dir), Path(home)
    return open_mirror(config, run_dir / "tb" / home.name, home, f"{run_dir.name}/{home.name}", run_dir.name,
                       "island")
