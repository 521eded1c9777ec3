"""ptxas, cuobjdump and nvdisasm for the static report: found in the NVIDIA wheels of the dev extra
(nvidia-cuda-nvcc, nvidia-cuda-cuobjdump, nvidia-cuda-nvdisasm), else on PATH. None of them needs a
GPU or a driver; cuobjdump calls nvdisasm to print SASS."""

import importlib.metadata
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

from eggnog.runtime.errors import BadInput

WHEELS = {"ptxas": "nvidia-cuda-nvcc", "cuobjdump": "nvidia-cuda-cuobjdump", "nvdisasm": "nvidia-cuda-nvdisasm"}
ARCH = "sm_90"


def find_tool(name):
    """Path of an executable from its wheel, falling back to PATH; None when neither has it."""
    try:
        files = importlib.metadata.files(WHEELS[name]) or []
    except importlib.metadata.PackageNotFoundError:
        files = []
    for entry in files:
        if entry.name == name and entry.parent.name == "bin":
            path = Path(entry.locate())
            if path.is_file() and os.access(path, os.X_OK):
                return str(path)
    return shutil.which(name)


def find_tools():
    """{name: path} of the three tools; BadInput naming what is missing."""
    found = {name: find_tool(name) for name in WHEELS}
    missing = [name for name, path in found.items() if path is None]
    if missing:
        wheels = ", ".join(WHEELS[name] for name in missing)
        raise BadInput(f"{', '.join(missing)} not found (install the dev extra, which brings {wheels})")
    return found


def tool_version(path):
    """The release line of `<tool> --version`, e.g. 'Cuda compilation tools, release 13.5, V13.5.37'."""
    out = subprocess.run([path, "--version"], capture_output=True, text=True, timeout=60).stdout
    lines = [line for line in out.splitlines() if "release" in line]
    return lines[0].strip() if lines else out.strip().splitlines()[-1]


def assemble(ptx, tools, arch=ARCH):
    """(ptxas -v log, SASS text) of one PTX module, through a temporary directory."""
    with tempfile.TemporaryDirectory() as tmp:
        source, cubin = Path(tmp, "kernel.ptx"), Path(tmp, "kernel.cubin")
        source.write_text(ptx)
        # a module calling device-runtime functions (a grid sync's cudaCGGetIntrinsicHandle) is linked
        # with cudadevrt at load time: assemble it relocatable, its externs left unresolved
        relocatable = ["-c"] if ".extern .func" in ptx else []
        ptxas = subprocess.run([tools["ptxas"], f"-arch={arch}", "-O3", "-v", *relocatable, str(source), "-o",
                                str(cubin)], capture_output=True, text=True, timeout=600)
        if ptxas.returncode:
            raise RuntimeError(f"ptxas failed:\n{ptxas.stderr[-4000:]}")
        disasm_dir = str(Path(tools["nvdisasm"]).parent)
        env = dict(os.environ, NVDISASM_PATH=disasm_dir, PATH=disasm_dir + os.pathsep + os.environ.get("PATH", ""))
        dump = subprocess.run([tools["cuobjdump"], "-sass", str(cubin)], capture_output=True, text=True, env=env,
                              timeout=600)
        if dump.returncode:
            raise RuntimeError(f"cuobjdump failed:\n{dump.stderr[-4000:]}")
        return ptxas.stdout + ptxas.stderr, dump.stdout
