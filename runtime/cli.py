"""Turn user mistakes into one sentence on stderr and exit status 2, with no traceback."""

import functools
import sys

from eggnog.runtime.errors import BadInput


def user_errors(fn):
    """Decorate a typer command: BadInput becomes `error: <sentence>` and exit status 2."""

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        try:
            return fn(*args, **kwargs)
        except BadInput as e:
            print(f"error: {e}", file=sys.stderr, flush=True)
            raise SystemExit(2) from None

    return wrapper
