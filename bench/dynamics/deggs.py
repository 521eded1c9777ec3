"""Learning like the original: d-eggs' own coordinator and worker, built from its checkout, beside
eggnog's `bin/train_es.py --preset d-eggs` on one GPU, on the very same input.bin, for --steps updates.

    python -m bench.dynamics.deggs --deggs EGG_C/d-eggs --prepare-only --build-dir DEGGS_BUILD  # no GPU
    python -m bench.dynamics.deggs --deggs EGG_C/d-eggs --build-dir DEGGS_BUILD --data DEGGS_BUILD/data
    python -m bench.dynamics.deggs --deggs EGG_C/d-eggs --steps 10          # builds and writes data itself

Data: d-eggs' format with its default vocabulary of 8192: every byte of the corpus (eggnog's embedded
default corpus, its train split then its validation split, or the byte corpus --data names) is one
little-endian uint32 token, and decoding.bin maps tokens 0-255 to their byte and leaves 256-8191,
which never occur, empty; so a token is a byte. --data may also name a d-eggs data folder (input.bin
and decoding.bin of 8192 tokens), used as it is. Both sides read the same folder; eggnog holds its
last 5% out for validation, d-eggs trains on all of it.

Build: the Makefile's own CFLAGS and NVCCFLAGS with -arch replaced by --arch, into --build-dir or a
temporary folder (never into the checkout), reused while the sources, --arch and nvcc are unchanged.
Two changes, neither touching d-eggs' code (bench/dynamics/deggs_build.py says why): -lcublas is left out, and
with CUDA 13 or later a header puts back what CUDA 13 removed. The worker links the CUDA runtime
statically: it needs the driver only.

Run (needs a CUDA GPU, and TCP port 12345 free, d-eggs' fixed port): the coordinator and one worker on
this machine, stopped once coordinator.log holds --steps rows; curl resolves to a no-op on their PATH,
since d-eggs' logger otherwise posts every run's config and losses to its author's tracking service.
Then eggnog's trainer with `--preset d-eggs --steps N --data <the same folder>` on the GPU backend,
arranged as d-eggs is (--eggnog-mode coordinator: `mpiexec -n 2`, rank 0 handing out the chunks, with
d-eggs' chunk mean filter and adaptive threshold) or in one process (--eggnog-mode sync).

Unit: d-eggs logs one loss per step, its integer proxy Sum / (population x 64 tokens x 16): per token
(floor(log2 sum EXP_LUT) - 18) / 2 + (max logit - target logit) / 16. The floor and the halving make it
no fixed function of bits, so there is no conversion; eggnog logs the same proxy of its own members
(train_deggs_proxy) beside its exact bits/token (here bits/byte), and the comparison is in the proxy.
Verdict: "match" when eggnog's mean proxy over the last min(5, N) steps is within --tolerance
(relative, default 5%) of d-eggs', else "eggnog better" or "d-eggs better". Writes
bench/results/dynamics_deggs-<gpu>-<date>.json and a .png beside it.
"""

import os
import re
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import typer

from bench.dynamics.deggs_build import (
    VOCAB,
    build,
    build_plan,
    check_build_dir,
    choose_build,
    corpus_bytes,
    deggs_folder,
    makefile_flags,
    prepared_data,
    sources_digest,
    write_deggs_data,
)
from bench.report import REPO, print_table, write_result
from eggnog.runtime.cli import cli_help, user_errors
from eggnog.runtime.errors import BadInput

app = typer.Typer(add_completion=False, pretty_exceptions_enable=False, rich_markup_mode=None)

PORT = 12345  # d-eggs' coordinator and worker both hard-code it
LOG_HEADER = "Step,RelTime,Loss,Updates,LR"
TAIL_STEPS = 5
DIFFERENCES = ["d-eggs scales its noise adaptively (ADAPTIVE_NOISE_MODE 1); eggnog's transformer has no adaptive noise",
               "initial weights (on [-15, 15] both) and noise come from each side's own generator (d-eggs: "
               "xorshift32 and its hash, seed 42; eggnog: its counter hash, seed 0): other draws",
               "each side picks its own 64-token windows of the file; eggnog's last 5% are its validation split"]
SYNC_DIFFERENCE = "eggnog in sync mode: fitness is the pair's sign, without d-eggs' chunk mean filter and threshold"


# ---- d-eggs' run ----------------------------------------------------------------------------------
def port_free(port=PORT):
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind(("", port))
        except OSError:
            return False
    return True


def parse_coordinator_log(text):
    """[(step, seconds since start, loss, updates, lr)] of the last run in a coordinator.log; a torn
    last line is left out."""
    lines = text.split("\n")
    if LOG_HEADER not in lines:
        return []
    rows = []
    for line in lines[len(lines) - 1 - lines[::-1].index(LOG_HEADER) + 1:-1]:
        fields = line.split(",")
        try:
            rows.append((int(fields[0]), float(fields[1]), float(fields[2]), int(fields[3]), float(fields[4])))
        except (ValueError, IndexError):
            break
    return rows


def stop(procs, grace=15):
    """SIGTERM to the process groups we started, SIGKILL to those still there after `grace` seconds."""
    for sig, wait in ((signal.SIGTERM, grace), (signal.SIGKILL, 5)):
        for proc in procs:
            if proc.poll() is None:
                try:
                    os.killpg(proc.pid, sig)
                except ProcessLookupError:
                    pass
        for proc in procs:
            try:
                proc.wait(wait)
            except subprocess.TimeoutExpired:
                pass


def last_line(path):
    lines = [line.strip() for line in Path(path).read_text(errors="replace").splitlines() if line.strip()]
    return re.sub(r"\x1b\[[0-9;]*m", "", lines[-1]) if lines else "no output"


def deggs_curve(build_dir, data_dir, run_dir, steps, timeout):
    """d-eggs' loss of each of `steps` steps from its coordinator.log, or a sentence saying why not."""
    shim = run_dir / "no-tracking"
    shim.mkdir(parents=True)
    (shim / "curl").write_text("#!/bin/sh\nexit 0\n")
    (shim / "curl").chmod(0o755)
    env = dict(os.environ, PATH=f"{shim}{os.pathsep}{os.environ.get('PATH', '')}")
    log, procs = run_dir / "coordinator.log", []
    outputs = {name: open(run_dir / f"{name}.out", "wb") for name in ("coordinator", "worker")}
    deadline = time.monotonic() + timeout
    try:
        procs.append(subprocess.Popen([str(build_dir / "coordinator"), "--save-dir", str(run_dir / "checkpoints")],
                                      cwd=run_dir, env=env, stdout=outputs["coordinator"], stderr=subprocess.STDOUT,
                                      start_new_session=True))
        while True:  # until it listens
            if procs[0].poll() is not None:
                return f"its coordinator stopped at once: {last_line(run_dir / 'coordinator.out')}"
            with socket.socket() as s:
                if s.connect_ex(("127.0.0.1", PORT)) == 0:
                    break
            if time.monotonic() > deadline:
                return f"its coordinator did not listen on port {PORT} within {timeout} s"
            time.sleep(0.2)
        procs.append(subprocess.Popen([str(build_dir / "worker"), "127.0.0.1"], cwd=data_dir, env=env,
                                      stdout=outputs["worker"], stderr=subprocess.STDOUT, start_new_session=True))
        while True:
            rows = parse_coordinator_log(log.read_text()) if log.exists() else []
            if len(rows) >= steps:
                step, seconds, proxy, updates, lr = (list(column) for column in zip(*rows[:steps]))
                return {"step": step, "seconds": seconds, "step_s": np.diff([0.0] + seconds).round(3).tolist(),
                        "proxy": proxy, "updates": updates, "lr": lr}
            for proc, name in zip(procs, outputs):
                if proc.poll() is not None:
                    return f"its {name} stopped after {len(rows)} steps: {last_line(run_dir / f'{name}.out')}"
            if time.monotonic() > deadline:
                return f"it logged {len(rows)} of {steps} steps within {timeout} s"
            time.sleep(1.0)
    finally:  # the coordinator first: its closed socket ends a worker waiting for a reply
        stop(procs)
        for f in outputs.values():
            f.close()


# ---- eggnog's run ---------------------------------------------------------------------------------
def eggnog_command(steps, data_dir, run_dir, mode):
    """coordinator: d-eggs' arrangement, two ranks (rank 0 hands out the chunks, rank 1 evaluates) and
    its chunk shaping; sync: one process, pair signs alone."""
    command = [sys.executable, str(REPO / "bin" / "train_es.py"), "--preset", "d-eggs", "--steps", str(steps),
               "--data", str(data_dir), "--run-dir", str(run_dir), "--backend", "cuda",
               "--validate-every", str(steps), "--checkpoint-every", str(steps), "--no-plots"]
    if mode == "sync":
        return command
    return [shutil.which("mpiexec") or "mpiexec", "-n", "2", *command, "--mode", "coordinator",
            "--chunk-mean-filter", "--adaptive-threshold"]


def eggnog_curve(steps, data_dir, run_dir, timeout, mode="coordinator"):
    """eggnog's proxy and bits/token of each step from metrics.jsonl, or a sentence saying why not."""
    from eggnog.runtime.rundir import read_metrics

    env = dict(os.environ, NUMBA_ENABLE_CUDASIM="0", EGGNOG_PROGRESS="0",
               PYTHONPATH=str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    run_dir.parent.mkdir(parents=True, exist_ok=True)
    out = run_dir.parent / "eggnog.out"
    with open(out, "wb") as f:
        proc = subprocess.Popen(eggnog_command(steps, data_dir, run_dir, mode), cwd=REPO, env=env, stdout=f,
                                stderr=subprocess.STDOUT, start_new_session=True)
        try:
            code = proc.wait(timeout)
        except subprocess.TimeoutExpired:
            return f"it did not finish {steps} steps within {timeout} s"
        finally:
            stop([proc])
    if code:
        return f"it failed (exit {code}): {last_line(out)}"
    records = [r for r in read_metrics(run_dir / "metrics.jsonl") if "train_deggs_proxy" in r]
    return {"step": [r["step"] - 1 for r in records], "seconds": [r["elapsed_s"] for r in records],
            "step_s": [r["step_s"] for r in records], "proxy": [r["train_deggs_proxy"] for r in records],
            "bits_per_token": [r["train_bpb"] for r in records],
            "val_bits_per_token": next((r["val_bpb"] for r in reversed(records) if "val_bpb" in r), None)}


# ---- report ---------------------------------------------------------------------------------------
def tail_mean(values):
    return round(float(np.mean(values[-TAIL_STEPS:])), 4)


def verdict(ours, theirs, tolerance):
    """Compare the tail means of the proxy (lower is better), `tolerance` relative to d-eggs'."""
    if ours is None or theirs is None:
        return "not compared"
    if abs(ours - theirs) <= tolerance * abs(theirs):
        return "match"
    return "eggnog better" if ours < theirs else "d-eggs better"


def result_row(steps, theirs, ours, tolerance):
    """The one result row: tail means, verdict, speed, and each curve or why it is missing."""
    got = {name: curve if isinstance(curve, dict) else None for name, curve in (("deggs", theirs), ("eggnog", ours))}
    d = tail_mean(got["deggs"]["proxy"]) if got["deggs"] else None
    e = tail_mean(got["eggnog"]["proxy"]) if got["eggnog"] else None
    row = {"steps": steps, "deggs_proxy": d, "eggnog_proxy": e,
           "difference": None if None in (d, e) else round(e - d, 4), "verdict": verdict(e, d, tolerance),
           "eggnog_bits_per_token": tail_mean(got["eggnog"]["bits_per_token"]) if got["eggnog"] else None}
    for name, curve in (("deggs", theirs), ("eggnog", ours)):
        row[f"{name}_s_per_step"] = round(float(np.median(curve["step_s"])), 2) if got[name] else None
        if not got[name]:
            row[f"{name}_why_not"] = curve
    row["curves"] = got
    return row


def draw(row, path):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (by_step, by_time) = plt.subplots(1, 2, figsize=(12, 4))
    labels = {"deggs": "d-eggs (its coordinator's Loss)", "eggnog": "eggnog (train_deggs_proxy)"}
    for name, color in (("deggs", "tab:orange"), ("eggnog", "tab:blue")):
        curve = row["curves"][name]
        if curve:
            by_step.plot(curve["step"], curve["proxy"], "o-", ms=3, color=color, label=labels[name])
            by_time.plot(curve["seconds"], curve["proxy"], "o-", ms=3, color=color, label=labels[name])
    by_step.set(xlabel="updates before the step", ylabel="d-eggs' loss proxy",
                title=f"d-eggs' transformer at its defaults, {row['steps']} steps: {row['verdict']}")
    by_time.set(xlabel="seconds", ylabel="d-eggs' loss proxy", title="the same against time")
    for ax in (by_step, by_time):
        ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def gpu_name():
    from bench.gpu.run import probe_gpu

    found = probe_gpu()
    return None if found is None else found["name"]


# ---- the command ----------------------------------------------------------------------------------
def gpu_command(deggs, steps, arch, kept, data):
    command = ["python", "-m", "bench.dynamics.deggs", "--deggs", deggs, "--steps", str(steps)]
    command += [] if arch == "sm_90" else ["--arch", arch]
    command += ["--build-dir", str(kept)] if kept else []
    return shlex.join(command + (["--data", str(data)] if data else []))


@app.command(help=cli_help(__doc__))
@user_errors
def main(deggs: str = typer.Option(..., help="A d-eggs checkout (the egg.c repository or its d-eggs folder)."),
         steps: int = typer.Option(10, help="Updates each side runs."),
         arch: str = typer.Option("sm_90", help="GPU architecture of the worker (nvcc -arch)."),
         data: str = typer.Option(None, help="A byte corpus (.bin/.h5/.zarr) or a d-eggs data folder "
                                             "(default: eggnog's embedded corpus)."),
         build_dir: str = typer.Option(None, help="Keep the build (and, with --prepare-only, the data) here and "
                                                  "reuse it (default: a temporary folder)."),
         nvcc: str = typer.Option(None, help="The nvcc to use (default: PATH, CUDA_HOME, /usr/local/cuda)."),
         prepare_only: bool = typer.Option(False, help="Write the data and build d-eggs; needs no GPU."),
         eggnog_mode: str = typer.Option("coordinator", help="coordinator (2 ranks under mpiexec, d-eggs' chunk "
                                                              "shaping) or sync (one process, pair signs)."),
         tolerance: float = typer.Option(0.05, help="Relative gap of the final proxies within which sides match."),
         timeout: int = typer.Option(1800, help="Seconds each side may train.")):
    # every check before anything is written
    if steps < 1 or timeout < 1 or tolerance < 0:
        raise BadInput("--steps and --timeout must be positive and --tolerance not negative")
    if eggnog_mode not in ("coordinator", "sync"):
        raise BadInput(f"--eggnog-mode {eggnog_mode!r} is not coordinator or sync")
    if not re.fullmatch(r"sm_\d+[a-z]?", arch):
        raise BadInput(f"--arch {arch!r} is not a GPU architecture like sm_90")
    folder = deggs_folder(deggs)
    makefile_flags(folder)
    if data is not None and not Path(data).exists():
        raise BadInput(f"--data {data!r} does not exist")
    given = prepared_data(data) if data is not None else None
    kept = check_build_dir(build_dir, folder)
    digest, files = sources_digest(folder)
    old, compiler, release, stamp = choose_build(kept, arch, digest, nvcc)
    stream, corpus_name = (None, None) if given else corpus_bytes(data)
    device = None if prepare_only else gpu_name()
    if not prepare_only and device is None:
        raise BadInput("no CUDA GPU is usable here, and the comparison trains both sides on one; --prepare-only "
                       "writes the data and builds d-eggs without one")
    if not prepare_only and eggnog_mode == "coordinator" and shutil.which("mpiexec") is None:
        raise BadInput("mpiexec is not on PATH, and eggnog's coordinator mode runs 2 ranks; load an MPI, or "
                       "--eggnog-mode sync runs eggnog in one process without d-eggs' chunk shaping")
    if not prepare_only and not port_free():
        raise BadInput(f"TCP port {PORT}, which d-eggs' coordinator and worker always use, is taken here")

    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="eggnog-deggs-") as tmp:
        work = Path(tmp)
        build_at = kept or work / "build"
        if old is None:
            record = build(folder, build_at, build_plan(folder, arch, release), stamp, compiler)
            print(f"built d-eggs ({files} source files) for {arch} with nvcc {stamp['nvcc']}: coordinator "
                  f"{record['seconds']['coordinator']} s, worker {record['seconds']['worker']} s")
        else:
            record = old
            print(f"reusing the build of d-eggs for {arch} in {build_at}")
        if given:
            data_dir, data_info = given
        else:
            data_dir = kept / "data" if kept and prepare_only else work / "data"
            data_info = dict(write_deggs_data(stream, data_dir), corpus=corpus_name)
        print(f"data: {data_info['tokens']:,} tokens of vocabulary {VOCAB} in {data_dir}")
        if prepare_only:
            print(f"kept in {kept}" if kept else "removed with its temporary folder (--build-dir keeps them)")
            same_data = data_dir if given or kept else data
            print("on a GPU node, from the checkout:\n  " + gpu_command(deggs, steps, arch, kept, same_data))
            return
        theirs = deggs_curve(build_at, data_dir, work / "deggs", steps, timeout)
        ours = eggnog_curve(steps, data_dir, work / "eggnog" / "run", timeout, eggnog_mode)
    row = result_row(steps, theirs, ours, tolerance)
    print_table([row], ["steps", "deggs_proxy", "eggnog_proxy", "difference", "verdict", "eggnog_bits_per_token",
                        "deggs_s_per_step", "eggnog_s_per_step"])
    extra = {"settings": {"preset": "d-eggs", "population": 327680, "chunk": 40960, "tokens_per_member": 64,
                          "vocab": VOCAB, "tolerance_relative": tolerance, "tail_steps": TAIL_STEPS,
                          "eggnog_val_fraction": 0.05, "deggs_workers": 1, "eggnog_mode": eggnog_mode, "arch": arch,
                          "differences": DIFFERENCES + ([] if eggnog_mode == "coordinator" else [SYNC_DIFFERENCE])},
             "data": data_info, "build": {k: record.get(k) for k in ("nvcc", "sources_sha256", "commands", "seconds")},
             "wall_seconds": round(time.perf_counter() - started, 1)}
    path = write_result("dynamics_deggs", device, [row], extra)
    draw(row, path.with_suffix(".png"))
    print(f"wrote {path} and {path.with_suffix('.png').name}")
    failed = [f"{name} did not finish: {row[key]}" for name, key in (("d-eggs", "deggs_why_not"),
                                                                     ("eggnog", "eggnog_why_not")) if key in row]
    if failed:
        print("\n".join(failed))
        raise SystemExit(1)


if __name__ == "__main__":
    app()
