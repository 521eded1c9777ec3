"""Hostile and broken peers of a TCP coordinator (processes on this machine), each case a function that runs
a coordinator with real workers, attacks it and returns what the attack got: refused or survived, steps
lost, and whether the final parameters equal the synchronous trainer's bit for bit (tcp.py's
columns) with figures of its own. tests/faults asserts on them; bench/faults/__main__.py tabulates them."""

import json
import os
import socket as pysocket
import time
from statistics import median

import numpy as np

from bench.faults.coordinator_cluster import TOKEN, Cluster
from bench.faults.hostile_client import CaptureProxy, TokenHolder, raw_huge_frame, replay
from bench.faults.tcp import STEPS, outcome, run_case
from eggnog import code_version
from eggnog.evolution.coordinator import wire
from eggnog.evolution.coordinator.tcp import DOWN, UP

HUGE_BYTES = 200 << 20


def events(cluster, kind=None):
    path = cluster.run_dir / "events.jsonl"
    rows = [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []
    return [r for r in rows if kind is None or r["event"] == kind]


def wait_for(condition, timeout):
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


def captured_replays(directory, data, reference):
    """An attacker on the path, no token, records every connection of a real worker (HELLO, READY and its
    requests, its heartbeats: ciphertext) and replays each from a new connection; then kills the worker and
    keeps replaying its heartbeat connection. Figures: workers admitted by a replay, the most bytes a replay
    got back (the handshake's), seconds until the killed worker is declared lost (timeout 5 s)."""
    def body(cluster):
        cluster.start_coordinator()
        # the proxy closes a connection it cannot forward, which the worker reads as a refused handshake (a
        # wrong token looks the same to it): the victim connects once the coordinator listens
        wait_for(lambda: listening(cluster.port), 120)
        proxy = CaptureProxy(cluster.port)
        victim = cluster.start_worker(address=f"127.0.0.1:{proxy.port}")
        wait_for(lambda: events(cluster, "joined"), 120)
        name = events(cluster, "joined")[0]["worker"]
        for _ in range(2):
            cluster.start_worker()
        cluster.wait_for_step(4)
        captured = [bytes(c) for c in proxy.captures]
        answered = [len(replay(cluster.port, c)) for c in captured]
        cluster.kill(victim)
        killed_at = time.time()
        while not any(e["worker"] == name for e in events(cluster, "lost")) and time.time() - killed_at < 30:
            answered += [len(replay(cluster.port, c, read_s=0.05)) for c in captured]
        lost = [e["time"] for e in events(cluster, "lost") if e["worker"] == name]
        proxy.close()
        status, workers = cluster.finish()
        return outcome("captured connections replayed, no token", cluster, reference, status=status,
                       workers=workers, connections_captured=len(captured), replays=len(answered),
                       admitted_by_replay=len(events(cluster, "joined")) - 3, most_bytes_back=max(answered),
                       victim_lost_after_s=round(lost[0] - killed_at, 2) if lost else None)
    return run_case(directory, data, body)


def listening(port):
    try:
        pysocket.create_connection(("127.0.0.1", port), timeout=1).close()
        return True
    except OSError:
        return False


def config_hash_of(welcome, data):
    from eggnog.evolution.coordinator.tcp_worker import config_of
    from eggnog.runtime.auth import config_hash
    from eggnog.runtime.world import world_without_mpi
    from eggnog.training.launch import open_run_corpus

    cfg = config_of(welcome, data)
    return cfg, config_hash(cfg, open_run_corpus(cfg, world_without_mpi()))


def result_message(cfg, step, chunk, packed_byte=0):
    pairs, layers_width = cfg.population_chunk // 2, cfg.build_model().state_dims
    packed = np.full(-(-pairs // 5), packed_byte, np.uint8)
    states = np.zeros(cfg.population_chunk * layers_width[0] * layers_width[1], np.uint8)
    return wire.encode([wire.RESULT, step, chunk, -1000, 0, packed.size], packed, states)


def json_message(kind, value):
    return wire.encode([kind], np.frombuffer(json.dumps(value).encode(), np.uint8))


def malformed(cfg, step):
    """(name, message) a broken peer with the token might send once admitted."""
    chunk_states = result_message(cfg, step, 0)
    return [("RESULT packed byte 255", result_message(cfg, step, 1, packed_byte=255)),
            ("RESULT chunk 9999", result_message(cfg, step, 9999)),
            ("RESULT one byte short", chunk_states[:-1]),
            ("RESULT log-likelihood 2^62", wire.encode([wire.RESULT, step, 2, 2**62, 0, 1], chunk_states[48:])),
            ("RESULT step -1", result_message(cfg, -1, 3)),
            ("REQUEST signal 999", wire.encode([wire.REQUEST, step, 999])),
            ("REQUEST step 2^40", wire.encode([wire.REQUEST, 2**40, 0])),
            ("SNAPSHOT_RESULT wrong size", wire.encode([wire.SNAPSHOT_RESULT, 8, 1, -10], np.zeros(7, np.uint8))),
            ("unknown kind 99", wire.encode([99])),
            ("3-byte message", np.zeros(3, np.uint8)),
            ("HELLO with null fields", json_message(wire.HELLO, {"worker": None, "version": None})),
            ("READY with a bad hash", json_message(wire.READY, {"worker": "x", "version": code_version(),
                                                                "config_hash": "zz"})),
            ("LEAVE with a payload", wire.encode([wire.LEAVE, 1])),
            ("HEARTBEAT of 500 bytes", wire.encode([wire.HEARTBEAT], np.zeros(500, np.uint8)))]


def sealed_elsewhere_and_malformed(directory, data, reference):
    """A peer with the token sends the run's results sealed for another run (run A's results in run B),
    for the other direction and for another connection, and, admitted each time on a fresh connection, a
    malformed message of every kind. Figures: answers (REFUSE expected; none for a heartbeat), refusals
    logged."""
    def body(cluster):
        cluster.start_coordinator()
        for _ in range(2):
            cluster.start_worker()
        cluster.wait_for_step(3)
        holder = TokenHolder(cluster.address, TOKEN)
        welcome = holder.welcome()
        run_b, run_a = bytes.fromhex(welcome["run_id"]), os.urandom(16)
        cfg, digest = config_hash_of(welcome, cluster.data)
        step = cluster.steps_done()
        answers, n = {}, 0

        def admitted():
            nonlocal n
            n += 1
            name = f"hostile-{n}".encode()
            return name, holder.admitted(name, run_b, digest)

        chunks = range(cfg.population // cfg.population_chunk)
        for attack, run, direction in [("results of another run", run_a, UP),
                                       ("results of the other direction", run_b, DOWN),
                                       ("results of another connection", run_b, UP)]:
            got = []
            for chunk in chunks[:8]:
                name, s = admitted()
                session = b"another-connection" if attack.endswith("connection") else name
                holder.send(s, session, result_message(cfg, step + 1, chunk), run, direction)
                got.append(holder.answer(s))
            answers[attack] = got
        for attack, message in malformed(cfg, step + 1):
            name, s = admitted()
            holder.send(s, name, message, b"" if attack.startswith("HELLO") else run_b)  # HELLO: admission's seal
            answers[attack] = [holder.answer(s, 1.0)]
        holder.close()
        status, workers = cluster.finish()
        refused = sum(a == [wire.REFUSE] * len(a) for a in answers.values())
        return outcome("sealed for another run, direction or connection; malformed fields", cluster, reference,
                       status=status, workers=workers, answers=answers, attacks=len(answers),
                       attacks_refused=refused, refusals_logged=len(events(cluster, "refused")))
    return run_case(directory, data, body)


def peak_rss_mb(pid):
    for line in open(f"/proc/{pid}/status"):
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) // 1024
    return None


def huge_frames(directory, data, reference):
    """Five 200 MB frames without the token (a raw connection: greeting, then the frame) and one 200 MB
    frame from a token holder: none is read. Figures: the coordinator's peak memory before and after, the
    slowest step during the attack against the median step, workers lost."""
    def body(cluster):
        cluster.start_coordinator()
        for _ in range(2):
            cluster.start_worker()
        cluster.wait_for_step(3)
        before, first = peak_rss_mb(cluster.coordinator.pid), cluster.steps_done()
        sent = [raw_huge_frame(cluster.port, HUGE_BYTES) for _ in range(5)]
        holder = TokenHolder(cluster.address, TOKEN)
        s = holder.connect(b"huge")
        s.send_multipart([b"\0" * 32, bytes(HUGE_BYTES)])
        answer = holder.answer(s, 2.0)
        holder.close()
        after, last = peak_rss_mb(cluster.coordinator.pid), cluster.steps_done()
        status, workers = cluster.finish()
        during = [r["step_s"] for r in cluster.metrics() if first < r["step"] <= last + 1]
        others = [r["step_s"] for r in cluster.metrics() if r["step"] > 2 and not first < r["step"] <= last + 1]
        return outcome("200 MB frames, without and with the token", cluster, reference, status=status,
                       workers=workers, peak_rss_mb_before=before, peak_rss_mb_after=after,
                       bytes_sent_without_token=sum(sent), answer_to_token_holder=answer,
                       slowest_step_during_s=max(during, default=None), median_step_s=round(median(others), 4),
                       workers_lost=len(events(cluster, "lost")))
    return run_case(directory, data, body)


def leftover_worker(directory, data, reference):
    """A worker of an earlier run (same port, token and configuration), ahead at step 10 or more when its
    coordinator died, meets a new run started on the port. Figures: the new run's outcome; the leftover
    starts a fresh replica (from the new run's initial parameters) and is stopped with the run."""
    first = Cluster(directory / "earlier", data, STEPS)
    try:
        first.start_coordinator()
        leftover = first.start_worker()
        first.wait_for_step(10)
        ahead = first.steps_done()
        first.kill(first.coordinator)

        def body(cluster):
            cluster.start_coordinator()
            cluster.start_worker()
            status, workers = cluster.finish()
            leftover_status = leftover.wait(60)
            log = first.log("worker0")
            return outcome("a leftover worker of an earlier run, ahead", cluster, reference, status=status,
                           workers=workers, leftover_was_at=ahead, leftover_status=leftover_status,
                           leftover_restarted="another run" in log)
        return run_case(directory / "new", data, body, port=first.port)
    finally:
        first.stop_all()
