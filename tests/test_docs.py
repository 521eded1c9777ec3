"""The kernel table of docs/kernels.md stays true to the code: every registered op is named (as `op`, in
backticks) in the row of the module that defines it, every name the table gives as an op is a
registered op, and every sub-package of eggnog.kernels (each family, and core) has a row."""

import os
import pkgutil
import re

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TICKED = re.compile(r"`([^`]+)`")


def readme():
    with open(os.path.join(ROOT, "docs", "kernels.md")) as f:
        return f.read()


def bare(name):
    """`rnn/` -> rnn, `lstm.py` -> lstm."""
    name = name.strip().strip("`").rstrip("/")
    return name[:-3] if name.endswith(".py") else name


def kernel_table(text):
    """The rows of the op table of docs/kernels.md (the table whose header starts with
    `| family | module | ops |`), as (family, {module}, {op}): the backticked names of each cell."""
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.replace(" ", "").startswith("|family|module|ops|"))
    rows = []
    for line in lines[start + 2:]:  # past the header and its |---| line
        if not line.startswith("|"):
            break
        family, modules, ops = [cell.strip() for cell in line.strip().strip("|").split("|")][:3]
        rows.append((bare(family), {bare(m) for m in TICKED.findall(modules)}, set(TICKED.findall(ops))))
    return rows


def missing_ops(rows, ops):
    """The ops of `ops` ({op: its module, eggnog.kernels.<family>.<module>}) that the table does not
    name in the row of their module."""
    listed = {(family, module, name) for family, modules, names in rows for module in modules for name in names}
    missing = []
    for name, module in ops.items():
        family, module = module.split(".")[-2:]
        if (family, module, name) not in listed:
            missing.append(f"{name} ({family}/{module}.py)")
    return missing


def registered_ops():
    from eggnog.kernels.core.registry import all_ops

    return {name: entry.module for name, entry in all_ops().items()}


def kernel_subpackages():
    from eggnog import kernels

    return sorted(m.name for m in pkgutil.iter_modules(kernels.__path__) if m.ispkg)


def test_every_registered_op_is_in_the_row_of_its_module():
    missing = missing_ops(kernel_table(readme()), registered_ops())
    assert not missing, f"ops missing from the kernel table of docs/kernels.md: {', '.join(missing)}"


def test_every_op_the_table_names_is_registered():
    named = {name for _, _, names in kernel_table(readme()) for name in names}
    stale = sorted(named - set(registered_ops()))
    assert not stale, f"the kernel table of docs/kernels.md names ops that are not registered: {', '.join(stale)}"


def test_every_kernel_subpackage_has_a_row():
    families = {family for family, _, _ in kernel_table(readme())}
    absent = sorted(set(kernel_subpackages()) - families)
    assert not absent, f"kernel sub-packages missing from the kernel table of docs/kernels.md: {', '.join(absent)}"


def test_a_missing_op_is_reported():
    """The check can fail: an op the table does not name is reported, and so is an op deleted from
    its row."""
    rows = kernel_table(readme())
    assert missing_ops(rows, {"no_such_op": "eggnog.kernels.layers.elementwise"}) == [
        "no_such_op (layers/elementwise.py)"]
    assert missing_ops(rows, {"swap_leading": "eggnog.kernels.layers.elementwise"}) == []
    without = kernel_table(readme().replace("`swap_leading`", "swap_leading"))
    assert missing_ops(without, {"swap_leading": "eggnog.kernels.layers.elementwise"}) == [
        "swap_leading (layers/elementwise.py)"]
    assert missing_ops(rows, {"swap_leading": "eggnog.kernels.rnn.scan"}) == ["swap_leading (rnn/scan.py)"]
