"""Shared by the rebuild scripts of tests/data: save an archive, compare it with the committed one array by array.

Archives are compared by their arrays, not their bytes: `numpy.savez_compressed` stamps each member with the time
of writing, so two archives of the same arrays differ as files.
"""

import argparse
import subprocess
import sys
from pathlib import Path

import numpy as np

EXIT_USER_ERROR = 2


def refuse(sentence):
    """Stop with one sentence and exit status 2, before anything is written."""
    print(sentence, file=sys.stderr)
    raise SystemExit(EXIT_USER_ERROR)


def require_commit(source, pinned, name):
    """The checkout at `source` must be at the pinned commit: a rebuild from other code proves nothing."""
    if not (Path(source) / ".git").exists():
        refuse(f"{source} is not a git checkout of {name}; clone it and check out {pinned[:7]}.")
    head = subprocess.run(["git", "-C", str(source), "rev-parse", "HEAD"], capture_output=True, text=True).stdout
    if head.strip() != pinned:
        refuse(f"{source} is at {head.strip()[:7] or 'no commit'}, not {name}'s pinned {pinned[:7]}: "
               f"run `git -C {source} checkout {pinned[:7]}`.")


def require_version(name, found, pinned, unpinned):
    """Library versions are pinned too; --unpinned accepts another one (the rebuild then says so)."""
    if found == pinned:
        return
    if not unpinned:
        refuse(f"{name} {found} is installed, the recipe pins {pinned}; install it, or pass --unpinned to "
               f"rebuild with {found} anyway.")
    print(f"note: {name} {found}, not the pinned {pinned}")


def parser(description, source_help, library):
    """The flags every rebuild script takes: --source, --out, --check and --unpinned (for `library`)."""
    flags = argparse.ArgumentParser(description=description)
    flags.add_argument("--source", required=True, help=source_help)
    flags.add_argument("--out", required=True, help="the archive to write")
    flags.add_argument("--check", help="a committed archive to compare the rebuilt arrays with")
    flags.add_argument("--unpinned", action="store_true", help=f"accept a {library} other than the pinned one")
    return flags


def save_and_check(args, arrays, float_tolerance):
    """Write the archive to --out; with --check, exit 1 unless it agrees with the committed one."""
    np.savez_compressed(args.out, **arrays)
    print(f"wrote {args.out} ({len(arrays)} arrays)")
    if args.check and not compare(arrays, args.check, float_tolerance):
        raise SystemExit(1)


def compare(arrays, committed_path, float_tolerance):
    """Print one line per array; True when the keys match, every integer or text array is identical and every
    float array is within float_tolerance (max abs difference) of the committed one."""
    with np.load(committed_path, allow_pickle=False) as archive:
        committed = {key: archive[key] for key in archive.files}
    ok = True
    for key in sorted(set(arrays) | set(committed)):
        if key not in committed or key not in arrays:
            print(f"{key}: only in the {'rebuilt' if key in arrays else 'committed'} archive")
            ok = False
            continue
        new, old = np.asarray(arrays[key]), committed[key]
        if new.dtype != old.dtype or new.shape != old.shape:
            print(f"{key}: {new.dtype}{new.shape} rebuilt, {old.dtype}{old.shape} committed")
            ok = False
        elif np.issubdtype(old.dtype, np.floating):
            diff = float(np.max(np.abs(new - old))) if old.size else 0.0
            within = diff <= float_tolerance
            ok &= within
            print(f"{key}: max abs difference {diff:.3g}{'' if within else ' (over the tolerance)'}")
        else:
            same = new.tobytes() == old.tobytes()
            ok &= same
            print(f"{key}: {'identical' if same else 'DIFFERENT'}")
    print(f"{'agrees with' if ok else 'DISAGREES with'} {committed_path} (float tolerance {float_tolerance:g})")
    return ok
