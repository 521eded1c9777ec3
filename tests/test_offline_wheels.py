"""bin/offline_wheels.py without network: eggnog's requirements from pyproject.toml, the manylinux tags
asked for, the listing a fetch writes (pip replaced by a stand-in), the present-or-install decision,
`install` on a folder of fake wheels, and bad input."""

import subprocess
import sys
import sysconfig
import venv
import zipfile
from pathlib import Path

import numpy as np
import pytest

from eggnog.bin import wheel_folder as wheels
from eggnog.bin.wheel_folder import SpecifierSet
from eggnog.runtime.errors import BadInput
from tests.helpers import ROOT, assert_user_error, run_script

PROJECT = wheels.load_pyproject(Path(ROOT, "pyproject.toml"))
OPTIONAL = {"zarr", "platformdirs", "threadpoolctl"}


def names(requirements):
    return {wheels.canonicalize_name(wheels.Requirement(r).name) for r in requirements}


def fake_wheel(folder, name, version, requires=()):
    """A minimal pure-Python wheel that pip installs offline."""
    module, dist = name.replace("-", "_"), f"{name.replace('-', '_')}-{version}.dist-info"
    path = Path(folder, f"{name.replace('-', '_')}-{version}-py3-none-any.whl")
    with zipfile.ZipFile(path, "w") as z:
        z.writestr(f"{module}/__init__.py", "")
        z.writestr(f"{dist}/METADATA", f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n"
                   + "".join(f"Requires-Dist: {r}\n" for r in requires))
        z.writestr(f"{dist}/WHEEL", "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n")
        z.writestr(f"{dist}/RECORD", "")
    return path


@pytest.fixture
def folder(tmp_path):
    """numpy at a version no node has (the node's own numpy meets eggnog's pin) and a package no node has."""
    folder = tmp_path / "wheels"
    folder.mkdir()
    (folder / "requirements.txt").write_text("# made by a test\nnumpy==0.0.1\nnot-a-real-package==1.0\n")
    fake_wheel(folder, "numpy", "0.0.1")
    fake_wheel(folder, "not-a-real-package", "1.0")
    return folder


def test_minimal_requirements_leave_out_the_optional_packages():
    minimal = names(wheels.eggnog_requirements(PROJECT))
    assert {"numpy", "numba", "numba-cuda", "mpi4py", "h5py", "typer", "tqdm", "matplotlib"} <= minimal
    assert not minimal & OPTIONAL
    assert names(wheels.eggnog_requirements(PROJECT, ["full"])) == minimal | OPTIONAL


def test_dev_extra_names_full_through_eggnog_itself():
    dev = names(wheels.eggnog_requirements(PROJECT, ["dev"]))
    assert OPTIONAL <= dev and {"pytest", "mpich"} <= dev and "eggnog" not in dev


def test_unknown_extra_is_bad_input():
    with pytest.raises(BadInput, match="unknown extra 'cu14'"):
        wheels.eggnog_requirements(PROJECT, ["cu14"])


def test_pins_are_eggnogs_own():
    pins = wheels.eggnog_pins(PROJECT)
    assert "2.5.2" in pins["numpy"] and "2.6.0" not in pins["numpy"] and "1.26.4" not in pins["numpy"]
    assert "0.30.4" in pins["numba-cuda"] and "0.31.0" not in pins["numba-cuda"]
    assert "eggnog" not in pins


def test_manylinux_tags_go_down_to_older_glibc():
    tags = wheels.platform_tags("manylinux_2_28_x86_64")
    assert tags[0] == "manylinux_2_28_x86_64"
    assert {"manylinux_2_27_x86_64", "manylinux_2_17_x86_64", "manylinux2014_x86_64", "manylinux1_x86_64"} <= set(tags)
    assert "manylinux_2_29_x86_64" not in tags
    assert "manylinux_2_17_aarch64" in wheels.platform_tags("manylinux2014_aarch64")
    assert wheels.platform_tags("macosx_14_0_arm64") == ["macosx_14_0_arm64"]


@pytest.mark.parametrize("version, ok", [("3.12", True), ("3.12.3", True), ("3.10", True), ("312", False),
                                         ("3.x", False), ("python3.12", False), ("3.12.3.1", False)])
def test_python_version_format(version, ok):
    if ok:
        assert wheels.check_python(version) == version
    else:
        with pytest.raises(BadInput, match="not a Python version"):
            wheels.check_python(version)


def test_fetch_lists_exactly_the_wheels_pip_saved(tmp_path, monkeypatch):
    out = tmp_path / "wheels"
    out.mkdir()
    fake_wheel(out, "numpy", "1.0")  # left from an older fetch: not listed
    commands = []

    def pip(command, **kwargs):
        commands.append(command)
        dest = command[command.index("--dest") + 1]
        fake_wheel(dest, "numpy", "2.5.2")
        fake_wheel(dest, "typing-extensions", "4.16.0")
        return subprocess.CompletedProcess(command, 0, stderr="")

    monkeypatch.setattr(wheels.subprocess, "run", pip)
    pins = wheels.fetch(PROJECT, out, "3.12", "manylinux_2_28_x86_64", also=["mpich"])
    assert pins == ["numpy==2.5.2", "typing-extensions==4.16.0"]
    listing = [line for line in (out / "requirements.txt").read_text().splitlines() if not line.startswith("#")]
    assert listing == pins
    assert (out / "typing_extensions-4.16.0-py3-none-any.whl").exists() and not list(out.glob(".fetching-*"))
    command = " ".join(commands[0])
    assert "download --only-binary=:all: --python-version 3.12 --implementation cp" in command
    assert "--platform manylinux_2_28_x86_64" in command and "--platform manylinux2014_x86_64" in command
    assert "numpy>=2.0,<2.6" in commands[0] and "mpich" in commands[0] and "zarr>=3.1" not in commands[0]


def test_failed_download_is_one_sentence(tmp_path, monkeypatch):
    monkeypatch.setattr(wheels.subprocess, "run", lambda command, **kwargs: subprocess.CompletedProcess(
        command, 1, stderr="ERROR: Could not find a version that satisfies the requirement numpy\n"))
    with pytest.raises(BadInput, match="pip could not fetch .*Could not find a version"):
        wheels.fetch(PROJECT, tmp_path / "w", "3.12", "manylinux_2_28_x86_64")
    assert not (tmp_path / "w").exists()


def test_node_numpy_meeting_the_pin_is_present(folder):
    installed = wheels.installed_versions(sys.executable)
    assert installed["numpy"] == np.__version__ and "not-a-real-package" not in installed
    decisions = wheels.plan(wheels.read_listing(folder), installed, wheels.eggnog_pins(PROJECT), lambda name: [])
    assert decisions["numpy"] == (np.__version__, wheels.eggnog_pins(PROJECT)["numpy"], False)
    assert decisions["not-a-real-package"][0] is None and decisions["not-a-real-package"][2]


def test_node_version_outside_the_pin_is_replaced():
    decisions = wheels.plan({"numpy": "2.5.5"}, {"numpy": "2.6.0"}, wheels.eggnog_pins(PROJECT), lambda name: [])
    assert decisions["numpy"][2]


def test_what_an_installed_wheel_needs_decides_its_dependencies():
    wanted = {"numba": "0.68.1", "llvmlite": "0.50.0"}
    requires = {"numba": [wheels.Requirement("llvmlite>=0.50.0,<0.51")], "llvmlite": []}.get
    kept = wheels.plan(wanted, {"numba": "0.62.1", "llvmlite": "0.45.0"}, {}, requires)
    assert not kept["numba"][2] and not kept["llvmlite"][2]  # the image's pair stays together
    new = wheels.plan(wanted, {"llvmlite": "0.45.0"}, {}, requires)
    assert new["numba"][2] and new["llvmlite"][2] and new["llvmlite"][1] == SpecifierSet("<0.51,>=0.50.0")


def test_target_folder_counts_as_installed(folder, tmp_path):
    target = tmp_path / "target"
    (target / "not_a_real_package-1.0.dist-info").mkdir(parents=True)
    (target / "not_a_real_package-1.0.dist-info" / "METADATA").write_text(
        "Metadata-Version: 2.1\nName: not-a-real-package\nVersion: 1.0\n")
    assert wheels.installed_versions(sys.executable, target)["not-a-real-package"] == "1.0"


@pytest.fixture
def node(tmp_path):
    """A venv that sees this interpreter's packages (pip and numpy among them) but installs into its own
    folder: a broken --target or --dry-run cannot write into the environment running the tests."""
    venv.create(tmp_path / "node", with_pip=False)
    site = next((tmp_path / "node" / "lib").glob("python*/site-packages"))
    (site / "parent.pth").write_text(sysconfig.get_paths()["purelib"] + "\n" + sysconfig.get_paths()["platlib"] + "\n")
    return tmp_path / "node" / "bin" / "python"


def test_install_dry_run_names_only_the_missing_package(folder, node):
    result = run_script("offline_wheels.py", "install", folder, "--dry-run", "--interpreter", node)
    assert result.returncode == 0, result.stderr
    rows = {line.split()[0]: line.split() for line in result.stdout.splitlines() if line.split()}
    assert rows["numpy"][1:] == ["0.0.1", np.__version__, "present"]
    assert rows["not-a-real-package"][1:] == ["1.0", "-", "installing"]
    assert "would install 1 package(s):" in result.stdout
    assert "-m pip install --no-index --no-deps --find-links" in result.stdout
    assert result.stdout.rstrip().endswith("not-a-real-package==1.0")


def test_install_into_a_target_folder(folder, tmp_path, node):
    target = tmp_path / "target"
    result = run_script("offline_wheels.py", "install", folder, "--target", target, "--interpreter", node)
    assert result.returncode == 0, result.stdout + result.stderr
    assert (target / "not_a_real_package" / "__init__.py").exists()
    assert f"--target {target} --upgrade not-a-real-package==1.0" in result.stdout  # replaces inside the folder
    assert not (target / "numpy").exists()  # the node's numpy is kept
    again = run_script("offline_wheels.py", "install", folder, "--target", target, "--interpreter", node)
    assert "nothing to install" in again.stdout, again.stdout + again.stderr


def test_packaging_falls_back_to_pips_copy():
    code = ("import sys; sys.modules['packaging'] = None\n"
            "from eggnog.bin import wheel_folder as wheels; print(wheels.Requirement.__module__)")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=60)
    assert result.stdout.strip() == "pip._vendor.packaging.requirements", result.stderr


def test_python_3_10_without_tomli_is_bad_input(monkeypatch):
    monkeypatch.setitem(sys.modules, "tomllib", None)
    monkeypatch.setitem(sys.modules, "tomli", None)
    with pytest.raises(BadInput, match="needs the tomli package"):
        wheels.load_pyproject(Path(ROOT, "pyproject.toml"))


def bad_cases(tmp):
    (tmp / "empty").mkdir()
    (tmp / "garbled").mkdir()
    (tmp / "garbled" / "requirements.txt").write_text("numpy>=2\n")
    for name in ("unstocked", "stocked"):
        (tmp / name).mkdir()
        (tmp / name / "requirements.txt").write_text("not-a-real-package==1.0\n")
    fake_wheel(tmp / "stocked", "not-a-real-package", "1.0")
    return {
        "missing folder": (["install", tmp / "missing"], "does not exist"),
        "no listing": (["install", tmp / "empty"], "has no requirements.txt"),
        "not pinned": (["install", tmp / "garbled"], "not name==version"),
        "no wheel": (["install", tmp / "unstocked", "--dry-run"], "holds no wheel of it"),
        "bad interpreter": (["install", tmp / "stocked", "--interpreter", tmp / "no-python"],
                            "cannot list the packages"),
        "python version": (["fetch", "--python", "3.twelve", "--out", tmp / "out"], "not a Python version"),
        "platform": (["fetch", "--platform", "many linux", "--out", tmp / "out"], "not a platform tag"),
        "extra": (["fetch", "--extras", "cu13,cu99", "--out", tmp / "out"], "unknown extra 'cu99'"),
        "requirement": (["fetch", "--with", "mpich>>4", "--out", tmp / "out"], "is not a requirement"),
    }


@pytest.mark.parametrize("case", ["missing folder", "no listing", "not pinned", "no wheel", "bad interpreter",
                                  "python version", "platform", "extra", "requirement"])
def test_bad_input_is_one_sentence(tmp_path, case):
    args, fragment = bad_cases(tmp_path)[case]
    assert_user_error(run_script("offline_wheels.py", *args), fragment)
    assert not (tmp_path / "out").exists()
