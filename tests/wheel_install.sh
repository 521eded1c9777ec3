#!/usr/bin/env bash
# The installed commands, end to end: build eggnog's wheel (from a copy of the checkout, so no stale
# build/ folder leaks into it), install it (not editable) with its dependencies from the package index
# into a fresh venv, then, from a folder outside the checkout with nothing of it on the path: every
# eggnog-* command's --help, and a tiny real run: eggnog-prepare, eggnog-train-es, eggnog-evaluate,
# eggnog-train-es --resume, and resumes across `python bin/train_es.py` and `eggnog-train-es` (one program).
# Any failing command stops the run with a line naming it (tests/test_ci_scripts.py fails each in turn).
set -Eeuo pipefail
trap '_status=$?; if [ "$BASHPID" = "$$" ]; then echo "FAILED (exit $_status) at line $LINENO: $BASH_COMMAND"; fi' ERR
cd "$(dirname "$0")/.."
checkout=$PWD
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
started=$SECONDS

echo "== build the wheel"
mkdir "$work/src"
tar -C "$checkout" --exclude=./.git --exclude='./.venv*' --exclude=./build --exclude='*.egg-info' \
    --exclude=__pycache__ --exclude=./runs -cf - . | tar -C "$work/src" -xf -
python -m pip wheel -q --no-deps "$work/src" -w "$work/dist"
wheel=$(ls "$work"/dist/eggnog-*.whl)
echo "built $(basename "$wheel") ($((SECONDS - started)) s)"

echo "== install it, with its dependencies, into a fresh venv"
python -m venv "$work/venv"
"$work/venv/bin/python" -m pip install -q --no-compile "$wheel"
echo "installed ($((SECONDS - started)) s)"

echo "== run the commands from outside the checkout"
mkdir "$work/elsewhere"
cd "$work/elsewhere"
unset PYTHONPATH
export PATH="$work/venv/bin:$PATH" NUMBA_CACHE_DIR="$work/numba" EGGNOG_CACHE_DIR="$work/cache" EGGNOG_PROGRESS=0
py="$work/venv/bin/python"
# eggnog comes from the venv; every command of the installed metadata is on PATH and shows its script's help
"$py" - "$checkout" "$work/venv" <<'EOF'
import ast
import os
import subprocess
import sys
from importlib.metadata import distribution

import eggnog
import eggnog.bin

checkout, venv = sys.argv[1:]
for module in (eggnog, eggnog.bin):
    assert module.__file__.startswith(venv) and all(not p.startswith(checkout) for p in module.__path__), module
commands = {e.name: e.value for e in distribution("eggnog").entry_points if e.group == "console_scripts"}
assert len(commands) >= 11, commands
running = {name: subprocess.Popen([name, "--help"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
           for name in sorted(commands)}  # at once: each is mostly the start of a Python process
for name, target in sorted(commands.items()):
    script = os.path.join(checkout, "bin", target.split(":")[0].removeprefix("eggnog.bin.") + ".py")
    words = " ".join(ast.get_docstring(ast.parse(open(script).read())).split()[:3])
    out, err = running[name].communicate(timeout=300)
    assert running[name].returncode == 0, (name, running[name].returncode, err)
    assert f"Usage: {name} " in out and words in out, (name, words, out)
print(f"{len(commands)} commands, each with its script's help: {', '.join(sorted(commands))}")
EOF

steps() {  # the steps metrics.jsonl logged, in order
    "$py" -c 'import json, sys; print(*[json.loads(l)["step"] for l in open(sys.argv[1] + "/metrics.jsonl")])' "$1"
}
expect_steps() {
    local got
    got=$(steps "$1") || { echo "FAILED: the steps $1 logged could not be read"; exit 1; }
    [ "$got" = "$2" ] || { echo "FAILED: $1 logged steps '$got', expected '$2'"; exit 1; }
}

mkdir text
stdlib=$("$py" -c 'import sysconfig; print(sysconfig.get_paths()["stdlib"])')
cp "$stdlib"/json/*.py text/
eggnog-prepare text --out corpus.bin --val-fraction 0.3
tiny=(--backend cpu --depth 1 --dim 8 --population 8 --group-size 2 --tokens-per-update 8 --validate-every 2
      --checkpoint-every 1 --val-rows 4 --val-tokens 16 --seed 3)
eggnog-train-es --data corpus.bin --run-dir run "${tiny[@]}" --steps 2 > train.log
expect_steps run "1 2"
# the commands it prints are the installed ones
grep -q "^continue: eggnog-train-es --resume run" train.log && grep -q "^generate: eggnog-generate run" train.log \
    || { echo "FAILED: printed commands are not the installed ones:"; cat train.log; exit 1; }
# the default corpus ships in the wheel, the pinned bytes
EGGNOG_CACHE_DIR="$work/cache" "$py" -c 'from eggnog.corpus.default import SHA256, default_corpus, file_sha256
c = default_corpus(); assert file_sha256(c.path) == SHA256, c.path; print("default corpus:", c.path)'
eggnog-evaluate run --data corpus.bin --rows 4 --tokens 16 --json > evaluate.json
"$py" -c 'import json, sys; r = json.load(open(sys.argv[1])); assert r["step"] == 2 and r["loss"] > 0, r' evaluate.json
eggnog-train-es --resume run --steps 3 --backend cpu > resume.log
expect_steps run "1 2 3"
# the same program under both names: a run one started, the other continues
"$py" "$checkout/bin/train_es.py" --resume run --steps 4 --backend cpu > resume-by-script.log
expect_steps run "1 2 3 4"
"$py" "$checkout/bin/train_es.py" --data corpus.bin --run-dir by-script "${tiny[@]}" --steps 1 > by-script.log
eggnog-train-es --resume by-script --steps 2 --backend cpu > by-script-resumed.log
expect_steps by-script "1 2"
# another program still refuses the run
status=0
eggnog-train-rge --resume run --steps 5 2> refused.err || status=$?
[ "$status" = 2 ] && grep -q "is a train_es run" refused.err \
    || { echo "FAILED: eggnog-train-rge on a train_es run: exit $status, not a refusal"; cat refused.err; exit 1; }
echo "wheel install: OK ($((SECONDS - started)) s)"
