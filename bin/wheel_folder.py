"""Wheels for a GPU node with no package index (bin/offline_wheels.py).

`fetch` runs on a machine with network: pip downloads the wheels of eggnog's dependencies, for the
node's Python version and platform, into one folder, and `requirements.txt` there lists the exact
name==version of each. `install` runs on the node and installs only what it lacks. A package the
node has already is kept whenever its version meets every requirement known on it (eggnog's own pin,
and the requirements of the wheels that will be installed), even when the folder holds another
version: a CUDA image's numpy, numba and numba-cuda are built to work together, and replacing one
of them can break the others.
"""

import email.parser
import json
import os
import re
import shlex
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

from eggnog.runtime.errors import BadInput
from eggnog.runtime.optional import importable

try:  # CUDA images have packaging; pip carries a copy of it otherwise
    from packaging.requirements import InvalidRequirement, Requirement
    from packaging.specifiers import SpecifierSet
    from packaging.utils import canonicalize_name, parse_wheel_filename
except ImportError:
    from pip._vendor.packaging.requirements import InvalidRequirement, Requirement
    from pip._vendor.packaging.specifiers import SpecifierSet
    from pip._vendor.packaging.utils import canonicalize_name, parse_wheel_filename

LISTING = "requirements.txt"
PROJECT = "eggnog"
# glibc of the manylinux tags named by year (PEP 599), which newer glibc versions also run
LEGACY_MANYLINUX = {"manylinux2014": 17, "manylinux2010": 12, "manylinux1": 5}


def load_pyproject(path):
    try:
        import tomllib
    except ImportError:  # Python 3.10
        tomllib = importable("tomli")
        if tomllib is None:
            raise BadInput("reading pyproject.toml on Python 3.10 needs the tomli package "
                           "(pip install tomli), or run this with Python 3.11 or newer") from None
    with open(path, "rb") as f:
        return tomllib.load(f)["project"]


def _requirement(text, where):
    try:
        return Requirement(text)
    except InvalidRequirement as e:
        raise BadInput(f"{text!r} in {where} is not a requirement ({str(e).splitlines()[0]})") from None


def eggnog_requirements(project, extras=()):
    """The requirement strings of eggnog's dependencies and of `extras`, eggnog[...] ones expanded."""
    known = project.get("optional-dependencies", {})
    found, pending, seen = [], list(project["dependencies"]), set()
    for extra in extras:
        if extra not in known:
            raise BadInput(f"unknown extra {extra!r}: choose from {', '.join(sorted(known))}")
        pending += known[extra]
    while pending:
        text = pending.pop(0)
        req = _requirement(text, "pyproject.toml")
        if canonicalize_name(req.name) != PROJECT:
            found.append(text)
            continue
        for extra in sorted(req.extras - seen):  # one extra naming another (dev names full)
            seen.add(extra)
            pending += known.get(extra, [])
    return found


def eggnog_pins(project):
    """{package: SpecifierSet} of everything pyproject.toml names, extras included, for this machine."""
    pins = {}
    for text in project["dependencies"] + sum(project.get("optional-dependencies", {}).values(), []):
        req = _requirement(text, "pyproject.toml")
        name = canonicalize_name(req.name)
        if name != PROJECT and (req.marker is None or req.marker.evaluate({"extra": ""})):
            pins[name] = pins.get(name, SpecifierSet()) & req.specifier
    return pins


def check_python(text):
    if not re.fullmatch(r"3\.\d{1,2}(\.\d{1,2})?", text):
        raise BadInput(f"--python {text!r} is not a Python version: give it as 3.12 or 3.12.3")
    return text


def this_platform():
    """The manylinux tag of this machine's glibc and architecture."""
    import platform

    libc, version = platform.libc_ver()
    if libc != "glibc":
        raise BadInput("this machine has no glibc to name a manylinux platform after: give --platform, "
                       "for example manylinux_2_28_x86_64")
    major, minor = version.split(".")[:2]
    return f"manylinux_{major}_{minor}_{platform.machine()}"


def platform_tags(platform):
    """`platform` and the older manylinux tags a node of that glibc also runs (pip does not add them)."""
    pep600 = re.fullmatch(r"manylinux_2_(\d+)_(\w+)", platform)
    legacy = re.fullmatch(r"(manylinux\d+)_(\w+)", platform)
    if pep600:
        glibc, arch = int(pep600.group(1)), pep600.group(2)
    elif legacy and legacy.group(1) in LEGACY_MANYLINUX:
        glibc, arch = LEGACY_MANYLINUX[legacy.group(1)], legacy.group(2)
    elif re.fullmatch(r"[a-z][a-z0-9_]*", platform):
        return [platform]  # macOS, Windows, musllinux: as given
    else:
        raise BadInput(f"--platform {platform!r} is not a platform tag such as manylinux_2_28_x86_64")
    return [f"manylinux_2_{n}_{arch}" for n in range(glibc, 4, -1)] + [
        f"{name}_{arch}" for name, n in LEGACY_MANYLINUX.items() if n <= glibc]


def fetch(project, out, python, platform, extras=(), also=()):
    """Download the wheels into `out` and list them in out/requirements.txt; returns the listed pins."""
    check_python(python)
    requirements = eggnog_requirements(project, extras)
    requirements += [str(_requirement(text, "--with")) for text in also]
    tags = platform_tags(platform)
    out = Path(out)
    made = not out.exists()
    out.mkdir(parents=True, exist_ok=True)
    # into an empty folder first, so the listing is what this fetch chose, not older wheels beside it
    with tempfile.TemporaryDirectory(dir=out, prefix=".fetching-") as fresh:
        command = [sys.executable, "-m", "pip", "download", "--only-binary=:all:", "--python-version",
                   python, "--implementation", "cp", *sum((["--platform", t] for t in tags), []),
                   "--dest", fresh, *requirements]
        print("$ " + shlex.join(command), flush=True)
        result = subprocess.run(command, stderr=subprocess.PIPE, text=True)
        saved = sorted(wheel.name for wheel in Path(fresh).glob("*.whl")) if result.returncode == 0 else []
        for name in saved:
            os.replace(Path(fresh, name), out / name)
    if result.returncode:
        if made:
            out.rmdir()
        errors = [line for line in result.stderr.splitlines() if line.startswith("ERROR")] or ["(no message)"]
        raise BadInput(f"pip could not fetch the wheels for Python {python} on {platform}: {errors[-1]}")
    sys.stderr.write(result.stderr)  # pip's warnings
    pins = ["{}=={}".format(*parse_wheel_filename(name)[:2]) for name in saved]
    header = (f"# eggnog's dependencies (extras: {', '.join(extras) or 'none'}; also: {', '.join(also) or 'none'}) "
              f"for Python {python} on {platform}, from bin/offline_wheels.py fetch\n")
    (out / LISTING).write_text(header + "".join(p + "\n" for p in pins))
    return pins


def read_listing(folder):
    """{package: version} of folder/requirements.txt, each line name==version."""
    folder = Path(folder)
    if not folder.is_dir():
        raise BadInput(f"wheel folder {str(folder)!r} does not exist")
    listing = folder / LISTING
    if not listing.is_file():
        raise BadInput(f"{str(folder)!r} has no {LISTING}: make the folder with `bin/offline_wheels.py fetch`")
    wanted = {}
    for number, line in enumerate(listing.read_text().splitlines(), 1):
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        pinned = re.fullmatch(r"([A-Za-z0-9][A-Za-z0-9._-]*)\s*==\s*([^\s;]+)", line)
        if not pinned:
            raise BadInput(f"line {number} of {str(listing)!r} is {line!r}, not name==version")
        wanted[canonicalize_name(pinned.group(1))] = pinned.group(2)
    return wanted


def _wheels(folder):
    """{(package, version): wheel path} of the wheels in `folder`."""
    found = {}
    for wheel in Path(folder).glob("*.whl"):
        name, version, _, _ = parse_wheel_filename(wheel.name)
        found[(canonicalize_name(name), str(version))] = wheel
    return found


def wheel_requires(wheel):
    """The Requires-Dist of a wheel that apply here without extras."""
    with zipfile.ZipFile(wheel) as z:
        meta = next(n for n in z.namelist() if re.fullmatch(r"[^/]+\.dist-info/METADATA", n))
        text = z.read(meta).decode("utf-8", "replace")
    headers = email.parser.Parser().parsestr(text, headersonly=True)
    requires = [Requirement(r) for r in headers.get_all("Requires-Dist", [])]
    return [r for r in requires if r.marker is None or r.marker.evaluate({"extra": ""})]


# Run in the interpreter being installed into: what it would import, first on its path first.
_INSTALLED = ("import importlib.metadata as m, json, sys\n"
              "print(json.dumps([[d.metadata['Name'], d.version] for d in m.distributions(path=sys.argv[1:] + sys.path)"
              " if d.metadata['Name']]))")


def installed_versions(python, target=None):
    """{package: version} that `python` has (and the --target folder, which goes before its path)."""
    command = [python, "-c", _INSTALLED] + ([str(target)] if target else [])
    try:
        result = subprocess.run(command, capture_output=True, text=True, check=True)
    except (OSError, subprocess.CalledProcessError) as e:
        raise BadInput(f"cannot list the packages of the interpreter {python!r} ({e})") from None
    found = {}
    for name, version in json.loads(result.stdout):
        found.setdefault(canonicalize_name(name), version)
    return found


def _meets(version, specifier):
    try:
        return specifier.contains(version, prereleases=True)
    except Exception:  # a version packaging cannot read: keep the node's package rather than guess
        return True


def plan(wanted, installed, pins, requires):
    """{package: (node version or None, needs: SpecifierSet, install: bool)} for each wanted package.
    `requires(package)` lists the requirements of the folder's wheel of it. Installing a package adds
    its requirements, which may rule out a version the node has, so this repeats until nothing changes."""
    installing = {name for name in wanted if name not in installed}
    while True:
        needs = {name: pins.get(name, SpecifierSet()) for name in wanted}
        for name in installing:
            for req in requires(name):
                other = canonicalize_name(req.name)
                if other in needs:
                    needs[other] &= req.specifier
        more = {name for name in wanted if name not in installing and not _meets(installed[name], needs[name])}
        if not more:
            return {name: (installed.get(name), needs[name], name in installing) for name in sorted(wanted)}
        installing |= more


def install(project, folder, python=None, target=None, dry_run=False):
    """Install from `folder` what the interpreter `python` (default: this one) lacks; returns pip's
    exit status (0 when nothing was missing)."""
    wanted = read_listing(folder)
    python = python or sys.executable
    wheels = _wheels(folder)
    missing = [f"{name}=={version}" for name, version in wanted.items() if (name, version) not in wheels]
    if missing:
        raise BadInput(f"{str(folder)!r} lists {missing[0]} but holds no wheel of it: fetch the folder again")
    decisions = plan(wanted, installed_versions(python, target), eggnog_pins(project),
                     lambda name: wheel_requires(wheels[(name, wanted[name])]))
    print(f"{'package':<28} {'folder':<14} {'node':<14} decision")
    for name, (have, needs, installing) in decisions.items():
        if not installing:
            decision = "present"
        elif have is None:
            decision = "installing"
        else:
            decision = f"replacing: {needs} is needed"
        print(f"{name:<28} {wanted[name]:<14} {have or '-':<14} {decision}")
    chosen = [f"{name}=={wanted[name]}" for name, (_, _, installing) in decisions.items() if installing]
    if not chosen:
        print("nothing to install: the node has every package")
        return 0
    command = [python, "-m", "pip", "install", "--no-index", "--no-deps", "--find-links", str(folder)]
    # pip leaves a package already in a --target folder as it is unless told to replace it
    command += (["--target", str(target), "--upgrade"] if target else []) + chosen
    if dry_run:
        print(f"would install {len(chosen)} package(s): " + shlex.join(command))
        return 0
    print("$ " + shlex.join(command), flush=True)
    return subprocess.run(command).returncode
