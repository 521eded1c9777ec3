"""A run directory: config.json (the config's fields, and the script that started it), metrics.jsonl
(rank 0, one line per step, each also sent to the run's --log loggers: runtime/loggers.py),
checkpoints/, and the lock of the process running it."""

import json
import os
import time
from dataclasses import fields
from pathlib import Path

from eggnog.runtime.errors import BadInput
from eggnog.runtime.files import write_atomic
from eggnog.runtime.loggers import mirror_of
from eggnog.runtime.run_lock import acquire_lock
from eggnog.runtime.step_names import metrics_record

SCRIPT_KEY = "script"  # config.json: the bin/ script of the run, beside the config's fields


def create_run_dir(world, run_dir, config, resume=False, runs_root="runs", name="run", script=None):
    """Create (or, when resuming, reopen) the run directory on rank 0, take its lock and return its Path
    on all ranks. Without an explicit path, rank 0 picks runs/<name>-<timestamp> and broadcasts it. A
    reopened run loses the temporary files a kill during a write left behind."""
    error, path = None, None
    if world.is_root:
        path = Path(run_dir) if run_dir else Path(runs_root) / f"{name}-{time.strftime('%Y%m%d-%H%M%S')}"
        if path.exists() and not path.is_dir():
            error = f"run directory {str(path)!r} is a file, not a folder; choose another"
        elif resume and not (path / "config.json").is_file():
            error = f"cannot resume: {str(path)!r} is not a run directory (no config.json)"
        elif not resume and path.exists() and any(path.iterdir()):
            error = f"run directory {str(path)!r} already exists and is not empty; pass --resume or choose another"
        else:
            try:
                check_writable(path / "checkpoints")  # made here; refused before step 1, not at the first save
                acquire_lock(path)
            except BadInput as e:
                error = str(e)
            if error is None and resume:
                for stale in path.rglob(".*.tmp-*"):
                    stale.unlink(missing_ok=True)
            if error is None and not resume:
                write_config(path, config, script)
    answer = world.bcast_json({"error": error, "path": str(path) if path else None})
    if answer["error"]:
        raise BadInput(answer["error"])
    return Path(answer["path"])


def write_config(path, config, script=None):
    """RUN/config.json: the config's fields, and the script that started the run."""
    stored = {**config, **({SCRIPT_KEY: script} if script else {})}
    write_atomic(Path(path) / "config.json", (json.dumps(stored, indent=1, sort_keys=True) + "\n").encode())


def check_writable(folder):
    """BadInput unless a file can be written in `folder` (and the folder made)."""
    probe = Path(folder) / f".write-test-{os.getpid()}"
    try:
        Path(folder).mkdir(parents=True, exist_ok=True)
        probe.write_bytes(b"")
        probe.unlink()
    except OSError as e:
        raise BadInput(f"cannot write in {str(folder)!r} ({e.strerror or e}), where the run's checkpoints go") from None


# Config keys of runs written before the flags were renamed, and their names now.
RENAMED = {"epochs": "steps", "n_layer": "depth", "n_embd": "dim", "epsilon": "sigma", "rank": "perturbation_rank",
           "keep_last": "keep_checkpoints"}


def current_names(config):
    """A stored run config (config.json, or a checkpoint's) with renamed keys under their names now."""
    return {RENAMED.get(k, k): v for k, v in config.items()}


def _stored(run_dir):
    path = Path(run_dir) / "config.json"
    try:
        stored = json.loads(path.read_text())
    except (OSError, ValueError) as e:
        raise BadInput(f"cannot read run configuration {str(path)!r} ({e})") from None
    if not isinstance(stored, dict):
        raise BadInput(f"run configuration {str(path)!r} is not a JSON object")
    return stored


def read_config(run_dir):
    """The config fields of the run at `run_dir`, under their names now."""
    stored = _stored(run_dir)
    stored.pop(SCRIPT_KEY, None)
    return current_names(stored)


def check_script(run_dir, script):
    """Refuse to resume, with `script`, a run another script started (runs from before the script was
    recorded pass)."""
    started = _stored(run_dir).get(SCRIPT_KEY)
    if started and started != script:
        raise BadInput(f"{str(run_dir)!r} is a {Path(started).stem} run; resume it with bin/{started}")


def config_from(cls, stored, given):
    """A run config (dataclass `cls`) from a stored config.json (on resume) updated by the flags
    given now; stored keys the class does not know are ignored."""
    names = {f.name for f in fields(cls)}
    return cls(**{k: v for k, v in {**stored, **given}.items() if k in names})


def check_resume(stored, requested, fixed):
    """Refuse a resumed run that would change a field that must stay fixed, naming every one."""
    stored = current_names(stored)
    changed = [f"{k} ({stored.get(k)!r} -> {requested[k]!r})" for k in fixed if stored.get(k) != requested[k]]
    if changed:
        raise BadInput("cannot resume with a different " + ", ".join(changed))


class JsonLog:
    """Append-only JSON-lines log written by rank 0 only; each line is flushed as written, then sent to
    `mirror` (runtime/loggers.py: W&B, TensorBoard), where one is given."""

    def __init__(self, path, enabled=True, mirror=None):
        self.enabled, self.mirror = enabled, mirror if enabled else None
        self.file = open(path, "a", buffering=1) if enabled else None

    def write(self, **record):
        if self.enabled:
            self.file.write(json.dumps(record, sort_keys=False) + "\n")
            if self.mirror is not None:
                self.mirror.line(record)

    def close(self):
        if self.file:
            self.file.close()
            self.file = None


def metrics_log(world, run_dir):
    """The run's metrics.jsonl (rank 0), its lines also sent to the loggers the run opened."""
    return JsonLog(Path(run_dir) / "metrics.jsonl", enabled=world.is_root, mirror=mirror_of(run_dir))


def read_jsonl(path):
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip()]


def read_metrics(path):
    """The lines of a run's metrics.jsonl as logged now (older runs' converted)."""
    return [metrics_record(r) for r in read_jsonl(path)]


def resumed_metrics_log(world, run_dir, done):
    """The metrics log of a run going on after `done` steps. On rank 0 the lines of steps from `done`
    on (a resume runs them again) and a torn last line are dropped first, and lines an older run
    logged are rewritten as logged now, atomically. Returns (log, the elapsed seconds logged at step
    `done`, 0.0 for none)."""
    path, elapsed = Path(run_dir) / "metrics.jsonl", 0.0
    if world.is_root and path.exists():
        kept = []
        for line in path.read_text().splitlines():
            if len(kept) == done:
                break
            try:
                record = json.loads(line)
            except ValueError:
                break
            current = metrics_record(record)
            kept.append(line if current is record else json.dumps(current))
            elapsed = float(record.get("elapsed_s", elapsed))
        write_atomic(path, "".join(line + "\n" for line in kept).encode())
    return metrics_log(world, run_dir), elapsed
