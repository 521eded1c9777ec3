"""One process tree per run directory: rank 0 holds `RUN/lock` (its host and pid) while it runs. A
second run of the same directory is refused; a lock left by a dead process on this host (kill -9)
is taken over, and says so."""

import json
import os
import socket
from pathlib import Path

from eggnog.runtime.errors import BadInput
from eggnog.runtime.files import write_atomic

LOCK_NAME = "lock"


def _alive(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's live process
        return True
    return True


def _me():
    return {"host": socket.gethostname(), "pid": os.getpid()}


def acquire_lock(run_dir):
    """Take the run directory's lock, or raise BadInput naming its holder."""
    path, me = Path(run_dir) / LOCK_NAME, _me()
    try:
        fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
    except FileExistsError:
        try:
            owner = json.loads(path.read_text())
            host, pid = str(owner["host"]), int(owner["pid"])
        except (OSError, ValueError, KeyError, TypeError):
            host, pid = None, None
        if owner_is(host, pid, me):
            return
        if host is not None and host != me["host"]:
            raise BadInput(f"run {str(run_dir)!r} is in use by process {pid} on {host} (lock file {str(path)!r}); "
                           "wait for it to end, or remove the lock file if that process is gone") from None
        if pid is not None and _alive(pid):
            raise BadInput(f"run {str(run_dir)!r} is in use by process {pid} on this host; "
                           "wait for it to end") from None
        print(f"taking over the lock of {str(run_dir)!r} from process {pid}, which is no longer running",
              flush=True)
        write_atomic(path, json.dumps(me).encode())
        return
    with os.fdopen(fd, "w") as f:
        json.dump(me, f)


def owner_is(host, pid, me):
    return host == me["host"] and pid == me["pid"]


def release_lock(run_dir):
    """Remove the lock if this process holds it."""
    path = Path(run_dir) / LOCK_NAME
    try:
        owner = json.loads(path.read_text())
    except (OSError, ValueError):
        return
    if isinstance(owner, dict) and owner_is(owner.get("host"), owner.get("pid"), _me()):
        path.unlink(missing_ok=True)
