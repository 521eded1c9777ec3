"""Names numba-cuda still uses that numpy has removed, put back before numba-cuda compiles anything.

numba-cuda 0.30 registers an overload for `np.row_stack` when it loads its array typing, on the first
compile; numpy 2.5 removed that alias of `np.vstack` (deprecated since 2.0), so every compile would
fail with an AttributeError. Each name is defined only where numpy lacks it, as the function numpy
documented it to be, so a numpy that still has it, or a numba-cuda that no longer asks, is untouched.
"""

import numpy as np

REMOVED_ALIASES = {"row_stack": "vstack"}
RESTORED: list[str] = []  # the aliases this process defined


def restore_removed_aliases():
    """Define each removed alias numpy lacks; returns the names it defined."""
    added = [alias for alias in REMOVED_ALIASES if not hasattr(np, alias)]
    for alias in added:
        setattr(np, alias, getattr(np, REMOVED_ALIASES[alias]))
    RESTORED.extend(added)
    return added
