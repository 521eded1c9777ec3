"""The host memory of a run's largest arrays, estimated from its config before anything is allocated
or written, and the refusal of a run that cannot fit: without it `--depth 1e9` builds a layout for
minutes and `--population 1e9` grows until the kernel kills the process. Each run config gives
`host_memory(ranks)`, {what: bytes} of one rank (MinGRU BPTT checks its own, training/memory_plan.py,
which also covers the GPU)."""

from eggnog.runtime.errors import BadInput
from eggnog.training.memory_plan import HEADROOM, host_available


def linear_in_depth(count, depth):
    """count(depth) of a model whose size grows by the same amount with every block, from depths 1 and 2
    (so a huge --depth is never laid out)."""
    one = count(1)
    return one + (depth - 1) * (count(2) - one)


def gib(n):
    return f"{n / 2**30:,.2f} GiB"


def check_host_fits(needs):
    """Refuse `needs` ({what: bytes}) above HEADROOM of the available host memory."""
    available = host_available()
    total = sum(needs.values())
    if available is not None and total > HEADROOM * available:
        parts = ", ".join(f"{what} {gib(n)}" for what, n in needs.items() if n)
        raise BadInput(f"this run needs about {gib(total)} of host memory per rank ({parts}) but {gib(available)} "
                       "are available; a smaller model, population, batch or sequence needs less")
