"""What a run holds in memory, estimated from its configuration before anything is allocated or
written, and the refusal of a run that cannot fit: without it `--depth 1e9` builds a layout for minutes
and `--population 1e9` grows until the kernel kills the process. Each run config gives
`host_memory(ranks)`, {what: bytes} of one rank's largest host arrays, for `check_host_fits`; MinGRU
BPTT plans its own step instead (`bptt_memory`, `check_fits`), the GPU's memory included.

Every other trainer gives `device_memory`-style {what: bytes} of what one rank places on the GPU,
counted from the arrays its code allocates, for `check_device_fits` (the header prints `device_line`).

More in docs/internals.md (training/memory_plan.py)."""

from eggnog.runtime.errors import BadInput

WORD = 4
OPTIMIZER_STATE = {"sf-adamw": 2, "adamw": 2, "sgd": 1}
HEADROOM = 0.9  # of the available memory that a run may plan to use


def bptt_memory(model_cfg, n_params, tokens, optimizer, recompute, ranks=1):
    """Bytes by holder: {"host": {...}, "backend": {...}} for `tokens` = rows x chunk_size per forward."""
    d, e, f, depth = model_cfg.dim, model_cfg.dim_inner, model_cfg.ff_inner, model_cfg.depth
    layer = 4 * d + 3 * e + 2 * f + 2
    kept = depth * d + layer if recompute else depth * layer
    activations = tokens * (kept + 512 + 2 * d + 1 + 8 * d + 3 * e + 2 * f)
    return {
        "host": {"allreduce buffers": WORD * 2 * n_params} if ranks > 1 else {},
        "backend": {"parameters and optimiser state": WORD * n_params * (1 + OPTIMIZER_STATE[optimizer]),
                    "gradients": WORD * 3 * n_params, "activations": WORD * activations},
    }


def describe(plan, recompute):
    gib = lambda b: f"{b / 2**30:.2f} GiB"  # noqa: E731
    parts = [f"{name} {gib(b)}" for holder in ("backend", "host") for name, b in plan[holder].items()]
    return (f"memory estimate ({'with' if recompute else 'without'} --recompute): " + ", ".join(parts)
            + f"; backend {gib(sum(plan['backend'].values()))}, host {gib(sum(plan['host'].values()))}")


def host_available():
    """MemAvailable of /proc/meminfo in bytes; None where it cannot be read."""
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        return None
    return None


def check_fits(plan, host_free, device_free, recompute):
    """Refuse a plan that needs more than HEADROOM of what is free. device_free: the GPU's free bytes, or
    None when the backend's memory is the host's (then the two needs add up)."""
    backend, host = sum(plan["backend"].values()), sum(plan["host"].values())
    if device_free is None:
        checks = [(backend + host, host_free, "host memory", "available")]
    else:
        checks = [(backend, device_free, "GPU memory", "free"), (host, host_free, "host memory", "available")]
    hint = "" if recompute else "; --recompute keeps one layer's activations instead of all"
    for need, free, where, state in checks:
        if free is not None and need > HEADROOM * free:
            raise BadInput(f"this run needs about {need / 2**30:.1f} GiB of {where} ({describe(plan, recompute)}) "
                           f"but {free / 2**30:.1f} GiB are {state}{hint}; a smaller --chunk-size, --batch-size or "
                           "model needs less")


def linear_in_depth(count, depth):
    """count(depth) of a model whose size grows by the same amount with every block, from depths 1 and 2
    (so a huge --depth is never laid out)."""
    one = count(1)
    return one + (depth - 1) * (count(2) - one)


def gib(n):
    return f"{n / 2**30:,.2f} GiB"


def parts_text(needs):
    return ", ".join(f"{what} {gib(n)}" for what, n in needs.items() if n)


def check_host_fits(needs):
    """Refuse `needs` ({what: bytes}) above HEADROOM of the available host memory."""
    available = host_available()
    total = sum(needs.values())
    if available is not None and total > HEADROOM * available:
        raise BadInput(f"this run needs about {gib(total)} of host memory per rank ({parts_text(needs)}) but "
                       f"{gib(available)} are available; a smaller model, population, batch or sequence needs less")


def check_device_fits(needs, free, advice):
    """Refuse `needs` ({what: bytes} one rank places on the GPU) above HEADROOM of `free`, the GPU's free
    bytes (None: the CPU backend, whose arrays the host check covers); `advice` ends the sentence with
    the flags that need less."""
    total = sum(needs.values())
    if free is not None and total > HEADROOM * free:
        raise BadInput(f"this run needs about {gib(total)} of GPU memory per rank ({parts_text(needs)}) but "
                       f"{gib(free)} are free; {advice}")


def device_line(needs, free):
    """The header line of a GPU run's memory; None on the CPU backend."""
    if free is None:
        return None
    return f"GPU memory per rank: about {gib(sum(needs.values()))} ({parts_text(needs)}) of {gib(free)} free"


def most_that_fit(total_of, free, upper):
    """The largest count c <= upper whose total_of(c) (bytes, growing with c) fits HEADROOM of `free`; 0 if none."""
    low, high = 0, upper
    while low < high:
        mid = (low + high + 1) // 2
        low, high = (mid, high) if total_of(mid) <= HEADROOM * free else (low, mid - 1)
    return low


def peak(persistent, phases):
    """{what: bytes} at the peak: the arrays held throughout plus the largest of the phases (each a
    {what: bytes} of arrays that live only during it)."""
    largest = max(phases, key=lambda phase: sum(phase.values()), default={})
    return {**persistent, **largest}


def mingru_forward_words(model_cfg, perturbed=True):
    """float32 words per token that a MinGRU forward without a cache holds at its peak: the last
    layer's activations (its dict lives until the forward returns: x, n1, k, u, h, x1, n2, the FF's a
    and GELU(a), its output, two norms) beside a layer's product in flight or the head's norm and logits
    (twice when perturbed: the plain product stays until the perturbed one is made); then the loss's
    logits and their gradient."""
    d, e, f = model_cfg.dim, model_cfg.dim_inner, model_cfg.ff_inner
    head = (2 if perturbed else 1) * 256 + 2 * d + 1
    return max(6 * d + 3 * e + 2 * f + 2 + max(f + d, head), 2 * 256 + 1)
