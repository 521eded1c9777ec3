"""The launches of one training step, traced on numba's simulator without running a kernel
(kernels/core/device_counts.py: tracing(run=False)), at full size, after one warm-up step:

    NUMBA_ENABLE_CUDASIM=1 python -m bench.static_report.steps mingru 1024x8:8x2048:fp32
    NUMBA_ENABLE_CUDASIM=1 python -m bench.static_report.steps table1 10M:cdrge96

mingru DIMxDEPTH:BATCHxSEQ:PRECISION is the MinGRU BPTT step of bench/throughput/mingru_side_by_side.py; table1
SIZE:METHOD a Table 1 cell's step in series (bench/zorn_paper/table1_grid.py, batch 1024), with its probes in passes
and its LSTM kernels chosen as on an H100. Prints one JSON object: "launches", the distinct launches as
the static model takes them (model.py), "sequence", the step as indices into them and -1 for each host
wait, and "counts", the step's device counts. goals.py runs it in a process of its own: the report's
compiles for the real target, this needs the simulator."""

import json
import sys

from eggnog.runtime.errors import BadInput


def mingru_step(spec):
    from bench.throughput.mingru_side_by_side import bptt_step
    from eggnog.kernels.core.backend import Backend
    from eggnog.kernels.core.placement import PRECISIONS

    try:
        shape, window, precision = spec.split(":")
        (dim, depth), (batch, seq) = ([int(n) for n in part.split("x")] for part in (shape, window))
    except ValueError:
        raise BadInput(f"cannot read the MinGRU step {spec!r}: DIMxDEPTH:BATCHxSEQ:PRECISION, "
                       "as 1024x8:8x2048:fp32") from None
    if precision not in PRECISIONS:
        raise BadInput(f"unknown precision {precision!r}: one of {', '.join(PRECISIONS)}")
    _, step = bptt_step(Backend("cuda", simulated=True), dim, depth, batch, seq, precision)
    return step


def table1_step(spec):
    from bench.zorn_paper.table1_grid import METHODS, SIZES, cell_config
    from eggnog.kernels.core.backend import Backend
    from eggnog.runtime.world import init_world
    from eggnog.zorn.rge.run import RgeRun, open_task_corpus

    size, _, method = spec.partition(":")
    if size not in SIZES or method not in METHODS:
        raise BadInput(f"cannot read the Table 1 cell {spec!r}: SIZE:METHOD, SIZE one of {', '.join(SIZES)} "
                       f"and METHOD one of {', '.join(METHODS)}")
    cfg = cell_config(size, method, "series", 1024, "char_lm", 2)
    world = init_world()
    run = RgeRun(cfg, world, Backend("cuda", simulated=True), open_task_corpus(cfg, world))
    batches = iter(range(2))

    def step():
        run.train_step(run.task.batch(next(batches), cfg.batch_size))
        run.step += 1

    return step


STEPS = {"mingru": mingru_step, "table1": table1_step}


def traced(kind, spec):
    """{"launches", "sequence", "counts"} of the second step of `kind` at `spec`, planned as on an H100:
    the simulated device is given its SMs, which the LSTM's plans count (a cooperative grid holds a block
    an SM; the simulator's holds one)."""
    from bench.static_report.limits import SM_COUNT
    from eggnog.kernels.core import device_counts
    from eggnog.kernels.core.cuda_api import cuda

    if kind not in STEPS:
        raise BadInput(f"unknown step {kind!r}: one of {', '.join(STEPS)}")
    device = cuda.get_current_device()
    device.MULTIPROCESSOR_COUNT = SM_COUNT
    try:  # the simulator's own count again afterwards: its cooperative grids hold one block
        step = STEPS[kind](spec)
        with device_counts.tracing(run=False):
            step()
        with device_counts.counting() as counts, device_counts.tracing(run=False) as events:
            step()
    finally:
        del device.MULTIPROCESSOR_COUNT
    launches, sequence = {}, []
    for event in events:
        key = json.dumps(event, sort_keys=True)
        sequence.append(-1 if "wait" in event else launches.setdefault(key, len(launches)))
    return {"launches": [json.loads(k) for k in launches], "sequence": sequence,
            "counts": {k: v for k, v in counts.as_dict().items() if k != "by_kernel"}}


def main(argv):
    try:
        if len(argv) != 2:
            raise BadInput("two arguments: the step (mingru or table1) and its sizes (module docstring)")
        json.dump(traced(*argv), sys.stdout)
    except BadInput as error:
        print(error, file=sys.stderr)
        sys.exit(2)


if __name__ == "__main__":
    main(sys.argv[1:])
