"""The roofline workloads the report estimates and the static model predicts, and the model's code of the
kernels they launch: what the report (__main__.py), the calibration's walk (keep.py) and the goals
(goals.py) share, kept here so that none of them imports another's command."""

from collections import Counter, defaultdict

from bench.static_report import parse
from bench.static_report.measurements import changed_since, newest_measurement
from bench.static_report.roofline import BUILT_IN, module_workloads
from bench.static_report.tools import assemble, find_tools


def assembled(tools, only=None, names=None):
    """(compile_all's row, its KernelSpec, signature number, PTX, ptxas log, SASS) per registered kernel
    signature: of the kernels whose name contains `only`, or is in `names`."""
    from eggnog.kernels.checks.ptx_compile import compile_all
    from eggnog.kernels.core.cuda_api import KERNELS

    seen = Counter()
    for compiled in compile_all(with_ptx=True, only=only):
        spec = next(s for s in KERNELS if s.name == compiled["name"])
        seen[spec.name] += 1
        if names is not None and spec.name not in names:
            continue
        ptx = compiled.pop("ptx")
        log, sass = assemble(ptx, tools)
        yield compiled, spec, seen[spec.name], ptx, log, sass


def kernel_code(spec, number, ptx, resources, sass):
    """What the static model needs of one compiled signature: the kernel's own function of the listing
    (a kernel linked with cudadevrt lists the 64-bit division helpers before it)."""
    functions = parse.parse_sass(sass)
    instructions = next((ins for name, ins in functions.items() if spec.pyfunc.__name__ in name),
                        next(iter(functions.values())))
    return spec.signatures[number - 1], instructions, ptx, resources["registers"], resources["smem"]


def compiled_code(launching, tools=None):
    """The static model's code of the kernels the workloads `launching` launch, compiling only those."""
    names = {launch["kernel"] for w in launching for launch in w["launches"]}
    code = defaultdict(list)
    for _, spec, number, ptx, log, sass in assembled(tools or find_tools(), names=names):
        code[spec.name].append(kernel_code(spec, number, ptx, parse.parse_ptxas(log), sass))
    return code


def workloads():
    """Every roofline workload: the built-in ones and those of the registered kernels' modules."""
    from eggnog.kernels.core.cuda_api import KERNELS
    from eggnog.kernels.core.registry import import_families

    import_families()
    return [make() for make in BUILT_IN] + module_workloads(spec.pyfunc.__module__ for spec in KERNELS)


def measured_workloads(current_only=True):
    """(workload, newest measurement) of the workloads with launches that bench/results has measured (with
    `current_only`, not those whose kernels changed since)."""
    found = []
    for w in workloads():
        measured = newest_measurement(w["measured"], w["units"]) if "measured" in w else None
        if "launches" in w and measured and not (current_only and stale(w, measured)):
            found.append((w, measured))
    return found


def stale(workload, measured):
    """Whether the workload's kernels changed since its measurement's commit (measurements.changed_since)."""
    return changed_since(measured["commit"], [launch["kernel"] for launch in workload["launches"]])
