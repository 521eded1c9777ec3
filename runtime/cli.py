"""Turn user mistakes into one sentence on stderr and exit status 2, with no traceback: BadInput, and
a write that the file system refuses (full disk, quota, read-only or forbidden output)."""

import errno
import functools
import os
import sys

from eggnog.runtime.errors import BadInput

WRITE_ERRORS = {errno.ENOSPC: "the disk is full", errno.EDQUOT: "the disk quota is exceeded",
                errno.EROFS: "the file system is read-only", errno.EACCES: "permission denied",
                errno.EPERM: "permission denied"}


def write_error(e):
    """The sentence for an OSError of a refused write, or None for any other OSError."""
    cause = WRITE_ERRORS.get(e.errno)
    if cause is None:
        return None
    where = os.path.dirname(os.path.abspath(e.filename)) if e.filename else "the output directory"
    return f"cannot write in {where!r}: {cause}; files written before are unchanged"


def user_errors(fn):
    """Decorate a typer command: BadInput and refused writes become `error: <sentence>` and exit 2."""

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        try:
            return fn(*args, **kwargs)
        except BadInput as e:
            message = str(e)
        except OSError as e:
            message = write_error(e)
            if message is None:
                raise
        print(f"error: {message}", file=sys.stderr, flush=True)
        raise SystemExit(2) from None

    return wrapper


def cli_help(doc):
    """A script's docstring as click's plain help: its indented example blocks keep their lines (click
    rewraps every other paragraph to the terminal's width)."""
    paragraphs = doc.strip("\n").split("\n\n")
    kept = ["\b\n" + p if all(line.startswith("    ") for line in p.splitlines()) else p for p in paragraphs]
    return "\n\n".join(kept)
