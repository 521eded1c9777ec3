"""Stands in for every external command the CI scripts call, for tests/test_ci_scripts.py: python and
pip (of PATH, of a venv, of pyenv), ruff, pyenv, mpiexec, and the eggnog-* commands a wheel installs.
Each call appends one line, "<name> <args>", to $STUB_LOG; the call that is the $STUB_FAIL_NTH (default 1)
whose line matches the glob $STUB_FAIL exits with $STUB_FAIL_EXIT (default 3) instead of running; with
$STUB_POLICY_LOG, each call also appends its line and scheduling policy there.
Otherwise it does the least that lets the script go on: `-m venv` makes a venv of stubs, `pip wheel`
writes a wheel file, installing a wheel puts the eggnog-* commands in the venv, the train commands log
steps to metrics.jsonl, and a `-c` or stdin snippet that imports only the standard library (a version,
a stdlib path, a JSON read) runs on the real interpreter. Snippets importing anything else succeed
without running. The test copies this file under a first line naming its interpreter."""

import fnmatch
import os
import sys

# ast and json are imported where used: every stub call is a process start, and most need neither

ENTRY_POINTS = ("eggnog-prepare", "eggnog-train-es", "eggnog-evaluate", "eggnog-train-rge", "eggnog-generate")


def invocation():
    """The logged name: a stub on PATH by its name, one in a venv or pyenv by its last three path parts
    (".venv312/bin/pip"), `stub-as NAME ...` (the hook of a replaced script or of `activate`) as NAME."""
    path, args = sys.argv[0], sys.argv[1:]
    if os.path.basename(path) == "stub-as":
        return args[0], args[1:]
    if os.path.dirname(os.path.abspath(path)) == os.environ["STUB_DIR"]:
        return os.path.basename(path), args
    return "/".join(path.split("/")[-3:]), args


def log_and_maybe_fail(line):
    with open(os.environ["STUB_LOG"], "a") as log:
        log.write(line + "\n")
    if "STUB_POLICY_LOG" in os.environ:  # the scheduling policy each call ran under (tests/run.sh's idle layer)
        with open(os.environ["STUB_POLICY_LOG"], "a") as log:
            log.write(f"{line}\t{os.sched_getscheduler(0)}\n")
    pattern = os.environ.get("STUB_FAIL")
    if pattern and fnmatch.fnmatchcase(line, pattern):
        with open(os.environ["STUB_LOG"]) as log:
            seen = sum(fnmatch.fnmatchcase(previous.rstrip("\n"), pattern) for previous in log)
        if seen == int(os.environ.get("STUB_FAIL_NTH", "1")):
            print(f"stub: failing {line}", file=sys.stderr)
            sys.exit(int(os.environ.get("STUB_FAIL_EXIT", "3")))


def link_stub(folder, name):
    os.makedirs(folder, exist_ok=True)
    target = os.path.join(folder, name)
    if not os.path.lexists(target):
        os.symlink(os.path.realpath(sys.argv[0]), target)


def make_venv(folder):
    bin_dir = os.path.join(os.path.abspath(folder), "bin")
    for name in ("python", "python3", "pip"):
        link_stub(bin_dir, name)
    with open(os.path.join(bin_dir, "activate"), "w") as activate:
        activate.write(f'"$STUB_DIR/stub-as" activate {os.path.basename(folder)} || return $?\n'
                       f'_stub_old_path=$PATH\nPATH="{bin_dir}:$PATH"\nVIRTUAL_ENV="{os.path.dirname(bin_dir)}"\n'
                       "export PATH VIRTUAL_ENV\n"
                       'deactivate() { PATH=$_stub_old_path; unset VIRTUAL_ENV; unset -f deactivate; }\n')


def pip(args, bin_dir):
    if "wheel" in args:
        out = args[args.index("-w") + 1]
        os.makedirs(out, exist_ok=True)
        open(os.path.join(out, "eggnog-0.1.0-py3-none-any.whl"), "w").close()
    elif "install" in args and any(a.endswith(".whl") for a in args):
        for name in ENTRY_POINTS:
            link_stub(bin_dir, name)


def option(args, name):
    return args[args.index(name) + 1] if name in args else None


def logged_steps(run):
    import json

    path = os.path.join(run, "metrics.jsonl")
    return [json.loads(line)["step"] for line in open(path)] if os.path.exists(path) else []


def train(args):
    """A run that logs steps up to --steps, after those already logged (a resume)."""
    import json

    run = option(args, "--run-dir") or option(args, "--resume")
    os.makedirs(run, exist_ok=True)
    done = logged_steps(run)
    with open(os.path.join(run, "metrics.jsonl"), "a") as metrics:
        for step in range((done[-1] if done else 0) + 1, int(option(args, "--steps")) + 1):
            metrics.write(json.dumps({"step": step, "loss": 1.0}) + "\n")
    print(f"continue: eggnog-train-es --resume {run}\ngenerate: eggnog-generate {run}")


def standard_library_only(code):
    import ast

    tree = ast.parse(code)
    names = {alias.name for node in ast.walk(tree) if isinstance(node, ast.Import) for alias in node.names}
    names |= {node.module for node in ast.walk(tree) if isinstance(node, ast.ImportFrom) and node.module}
    return {name.split(".")[0] for name in names} <= sys.stdlib_module_names


def python(args, bin_dir):
    if args[:2] == ["-m", "venv"]:
        make_venv(args[2])
    elif args[:2] == ["-m", "pip"]:
        pip(args[2:], bin_dir)
    elif args[:1] in (["-c"], ["-"]):
        code = args[1] if args[0] == "-c" else sys.stdin.read()
        rest = args[2:] if args[0] == "-c" else args[1:]
        if standard_library_only(code):
            os.execv(sys.executable, [sys.executable, "-I", "-S", "-c", code, *rest])
    elif args and args[0].endswith("train_es.py"):
        train(args[1:])


def main():
    name, args = invocation()
    log_and_maybe_fail(" ".join([name, *args]).replace("\n", " "))
    command, bin_dir = os.path.basename(name), os.path.dirname(os.path.abspath(sys.argv[0]))
    if command.startswith("python"):
        python(args, bin_dir)
    elif command == "pip":
        pip(args, bin_dir)
    elif command == "pyenv" and args == ["root"]:
        print(os.environ["STUB_PYENV_ROOT"])
    elif command == "eggnog-train-es":
        train(args)
    elif command == "eggnog-evaluate" and "--json" in args:
        import json

        print(json.dumps({"step": logged_steps(args[0])[-1], "loss": 1.0}))
    elif command == "eggnog-train-rge":
        print(f"{option(args, '--resume')} is a train_es run, not a train_rge run", file=sys.stderr)
        sys.exit(2)


if __name__ == "__main__":
    main()
