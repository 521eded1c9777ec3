"""Carry eggnog's dependencies to a GPU node with no package index, as a folder of wheels.

On a machine with network, fetch the wheels for the node's Python and platform:

    python bin/offline_wheels.py fetch --python 3.12 --platform manylinux_2_28_x86_64 --out wheels

Copy the folder and this checkout to the node. There, from the checkout, install what its image
lacks (a package it has whose version meets eggnog's pins is kept, never upgraded) and check:

    export PYTHONPATH=$PWD
    python bin/offline_wheels.py install wheels --dry-run
    python bin/offline_wheels.py install wheels
    python bin/selfcheck.py --gpu

Where the image's packages cannot be written: --target DIR, and DIR on PYTHONPATH after the checkout."""

from pathlib import Path

import typer

from eggnog.bin.wheel_folder import fetch, install, load_pyproject, this_platform
from eggnog.runtime.cli import cli_help, user_errors

PYPROJECT = Path(__file__).resolve().parent.parent / "pyproject.toml"

# plain click help: rich truncates long flag names at 80 columns
app = typer.Typer(add_completion=False, pretty_exceptions_enable=False, rich_markup_mode=None,
                  help=cli_help(__doc__))


def _listed(text):
    return [item.strip() for item in (text or "").split(",") if item.strip()]


@app.command("fetch")
@user_errors
def fetch_command(
    out: Path = typer.Option(..., "--out", help="Folder the wheels and requirements.txt go to."),
    python: str = typer.Option(None, help="The node's Python version, 3.12 or 3.12.3 (default: this one's)."),
    platform: str = typer.Option(None, help="The node's platform tag, e.g. manylinux_2_28_x86_64 (default: this "
                                            "machine's); older manylinux tags of the same arch are added."),
    extras: str = typer.Option("", help="eggnog extras to include, comma-separated (cu12, cu13, full, dev)."),
    also: list[str] = typer.Option([], "--with", help="Another requirement to fetch, e.g. mpich (repeatable)."),
):
    """Download the wheels of eggnog's dependencies for a target Python and platform (needs network)."""
    import sys

    python = python or "{}.{}".format(*sys.version_info[:2])
    pins = fetch(load_pyproject(PYPROJECT), out, python, platform or this_platform(), _listed(extras), also)
    print(f"wrote {out / 'requirements.txt'}: {len(pins)} wheels for Python {python}")


@app.command("install")
@user_errors
def install_command(
    folder: Path = typer.Argument(..., help="A folder made by `fetch`."),
    target: Path = typer.Option(None, help="Install into this folder (then put it on PYTHONPATH) instead of "
                                           "the interpreter's environment."),
    interpreter: str = typer.Option(None, help="The Python to check and install into, e.g. a venv's bin/python "
                                               "(default: the one running this)."),
    dry_run: bool = typer.Option(False, "--dry-run", help="Print what would be installed; install nothing."),
):
    """Install, with no index, the packages of the folder the node lacks or has at a version eggnog cannot use."""
    raise typer.Exit(install(load_pyproject(PYPROJECT), folder, interpreter, target, dry_run))


if __name__ == "__main__":
    app()
