"""The fault cases of the TCP coordinator, each a function that runs it on this machine and returns
what was lost: steps missing from the log, work redone, time against an undisturbed run where that
is the question, and whether the final parameters equal the synchronous trainer's bit for bit.
tests/faults asserts on them; bench/faults/__main__.py tabulates them."""

import json
import time
from statistics import median

import numpy as np

from bench.faults.coordinator_cluster import TOKEN, Cluster, reference_params
from bench.faults.hostile_client import TokenHolder
from eggnog import code_version
from eggnog.evolution.coordinator import wire
from eggnog.runtime.secure_socket import seal

STEPS = 24
VICTIM_JOB_SECONDS = 1.0  # a worker to be killed computes nearly all the time, so it dies holding a chunk
SLOW_CASE_JOB_SECONDS = 0.02  # jobs well above the coordinator's per-message cost, so speed is what differs


def outcome(name, cluster, reference, **extra):
    """The common columns: steps logged once each, chunks handed out again, final parameters."""
    steps = [r["step"] for r in cluster.metrics()]
    redone = sum(r.get("requeued", 0) for r in cluster.metrics())
    return {"case": name, "steps_lost": STEPS - len(set(steps)), "steps_logged_twice": len(steps) - len(set(steps)),
            "chunks_redone": redone, "params_equal": bool(np.array_equal(cluster.final_params(), reference)),
            "wall_s": round(cluster.wall_s, 2), **extra}


def run_case(directory, data, body, **cluster_options):
    cluster = Cluster(directory, data, STEPS, **cluster_options)
    try:
        return body(cluster)
    finally:
        cluster.stop_all()


def undisturbed(directory, data, reference):
    """3 workers, nothing goes wrong: the time every case is compared with."""
    def body(cluster):
        cluster.start_coordinator()
        for _ in range(3):
            cluster.start_worker()
        status, workers = cluster.finish()
        return outcome("undisturbed, 3 workers", cluster, reference, status=status, workers=workers)
    return run_case(directory, data, body)


def one_of_three_killed(directory, data, reference):
    """kill -9 of one of 3 workers mid-step. Lost: that worker's chunk in progress, redone by another
    after the heartbeat timeout (backup copies are off here, so only the heartbeat can recover it)."""
    def body(cluster):
        cluster.start_coordinator()
        victim = cluster.start_worker(job_seconds=VICTIM_JOB_SECONDS)
        for _ in range(2):
            cluster.start_worker()
        cluster.wait_for_step(3)
        time.sleep(VICTIM_JOB_SECONDS / 3)  # a step ends with the victim's result: let it take its next chunk
        cluster.kill(victim)
        status, workers = cluster.finish()
        return outcome("one of 3 workers killed", cluster, reference, status=status, workers=workers)
    return run_case(directory, data, body, straggler_factor=0)


def two_killed_two_joined(directory, data, reference):
    """kill -9 of 2 of 4 workers, 2 new ones started later. Lost: their chunks in progress, redone after
    the heartbeat timeout (no backup copies); the new workers catch up from the fitness history."""
    def body(cluster):
        cluster.start_coordinator()
        victims = [cluster.start_worker(job_seconds=VICTIM_JOB_SECONDS) for _ in range(2)]
        for _ in range(2):
            cluster.start_worker()
        cluster.wait_for_step(3)
        time.sleep(VICTIM_JOB_SECONDS / 3)
        for victim in victims:
            cluster.kill(victim)
        cluster.wait_for_step(8)
        for _ in range(2):
            cluster.start_worker()
        status, workers = cluster.finish()
        return outcome("2 of 4 workers killed, 2 joined later", cluster, reference, status=status, workers=workers)
    return run_case(directory, data, body, straggler_factor=0)


def step_seconds(cluster, after=4):
    """Median seconds per step, past the first steps (workers joining, compiling)."""
    return median(r["step_s"] for r in cluster.metrics() if r["step"] > after)


def slow_worker(directory, data, reference):
    """One of 4 workers 10x slower than the others, against the same 4 at equal speed. Lost: the
    slow worker's copies of the chunks that others redid."""
    times = {}

    def timed(slowdowns):
        def body(cluster):
            cluster.start_coordinator()
            for slowdown in slowdowns:
                cluster.start_worker(slowdown)
            status, workers = cluster.finish()
            times[len(times)] = step_seconds(cluster)
            return outcome("a worker 10x slower", cluster, reference, status=status, workers=workers)
        return body

    run_case(directory / "undisturbed", data, timed([1, 1, 1, 1]), job_seconds=SLOW_CASE_JOB_SECONDS)
    result = run_case(directory / "slow", data, timed([10, 1, 1, 1]), job_seconds=SLOW_CASE_JOB_SECONDS)
    return {**result, "step_s": round(times[1], 4), "undisturbed_step_s": round(times[0], 4),
            "time_ratio": round(times[1] / times[0], 3)}


def coordinator_killed(directory, data, reference):
    """kill -9 of the coordinator, then --resume of its run directory; the workers reconnect by
    themselves. Lost: the steps since the last checkpoint, done again."""
    def body(cluster):
        cluster.start_coordinator()
        for _ in range(3):
            cluster.start_worker()
        cluster.wait_for_step(11)  # a checkpoint at step 8
        done = cluster.steps_done()
        cluster.kill(cluster.coordinator)
        time.sleep(0.5)
        cluster.start_coordinator(resume=True)
        status, workers = cluster.finish()
        return outcome("coordinator killed, resumed", cluster, reference, status=status, workers=workers,
                       steps_redone=done - 8)
    return run_case(directory, data, body)


def intruders(address):
    """Messages a stray or broken process could send, each on a connection of its own: a wrong token (its
    handshake fails: nothing is read, nothing answered), a corrupted message, a truncated one, a header cut
    short, a HELLO of another code version, a result before admission."""
    wrong = TokenHolder(address, "not-the-token")
    holder = TokenHolder(address, TOKEN)
    hello = json.dumps({"worker": "intruder", "version": code_version()}).encode()
    old = json.dumps({"worker": "old", "version": "0.0.1+0000"}).encode()
    hello_message = wire.encode([wire.HELLO], np.frombuffer(hello, np.uint8))
    result = wire.encode([wire.RESULT, 0, 0, 0, 0, 1], np.zeros(40, np.uint8))

    def frames(who, name, message, run_id=b""):
        body = np.ascontiguousarray(message).tobytes()
        return [seal(who.key(run_id), name, body), body]

    answers = {}
    for name, who, sends in [
            ("wrong token", wrong, lambda n: [frames(wrong, n, hello_message)]),
            ("corrupted", holder, lambda n: [[f[0], f[1][:-1] + b"?"] for f in [frames(holder, n, hello_message)]]),
            ("truncated", holder, lambda n: [frames(holder, n, hello_message)[:1]]),
            ("short header", holder, lambda n: [frames(holder, n, np.zeros(3, np.uint8))]),
            ("other version", holder, lambda n: [frames(holder, n, wire.encode([wire.HELLO],
                                                                                np.frombuffer(old, np.uint8)))]),
            ("result before admission", holder, lambda n: [frames(holder, n, hello_message),
                                                           frames(holder, n, result)])]:
        session = f"intruder-{len(answers)}".encode()
        s = who.connect(session)
        got = []
        for message in sends(session):
            s.send_multipart(message)
            kind = who.answer(s, 3.0)
            if kind is not None:
                got.append(kind)
        answers[name] = got
    wrong.close()
    holder.close()
    return answers


def bad_messages(directory, data, reference, other_corpus):
    """Wrong token, corrupted and truncated messages, another code version, a result before
    admission, a worker with another corpus: each refused and logged. Lost: nothing."""
    def body(cluster):
        cluster.start_coordinator()
        other = cluster.start_worker(data=other_corpus)  # first: its READY comes while the short run goes on
        for _ in range(2):
            cluster.start_worker()
        cluster.wait_for_step(3)
        answers = intruders(cluster.address)
        other_status = other.wait(60)
        cluster.workers.remove(other)
        status, workers = cluster.finish()
        refusals = cluster.log("coordinator").count(" refused: ")
        return outcome("bad messages and workers", cluster, reference, status=status, workers=workers,
                       answers=answers, refusals=refusals, other_corpus_status=other_status,
                       other_corpus_log=cluster.log("worker0"))
    return run_case(directory, data, body)


def reference_for(directory, data):
    return reference_params(directory, data, STEPS)
