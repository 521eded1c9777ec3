"""Hostile peers against gossip islands over TCP (bench/faults/gossip_intruder.py's intruder and relay), each
case a run of islands on this machine that returns what it cost (bench/faults/gossip.py's
outcome: steps lost, final fitness against an undisturbed run) and how each attack was answered.
tests/faults asserts on them; bench/faults/__main__.py tabulates them."""

import json
import time

import numpy as np

from bench.faults import gossip_intruder as peers
from bench.faults.gossip import outcome, run_case
from bench.faults.gossip_intruder import DROP, INTRUDER, describe_answer, intruder_for, model_layout
from eggnog.training.gossip import tcp_wire as wire

STEPS = 150  # of 50 ms: long enough for every attack to land while the islands train
NO_ANSWER_S = 0.5  # how long to wait for an answer that should not come


def refusals(cluster, number):
    return [e for e in cluster.events(number) if e["event"] == "refused"]


def bad_fields(directory, data, steps=STEPS):
    """2 islands; a peer holding the token sends island 0 offers with fields missing, null or out of
    range, offers replayed on another connection, sealed in the wrong direction or for another run (a
    leftover island), and after offers it wins: a NaN model claiming fitness 0.0, a model of the wrong
    size and a model that does not echo the island's nonce. Each is refused and logged; none is merged."""
    def body(cluster):
        for n in range(2):
            cluster.start(n)
        values, scalars = model_layout(cluster, range(2))
        intruder, other = intruder_for(cluster, 0), intruder_for(cluster, 0)
        answers = {}
        try:
            for name, offer in [("offer without merge", intruder.offer(1, merge=DROP)),
                                ("offer with fitness null", intruder.offer(2, fitness=None)),
                                ("offer an hour old", intruder.offer(3, time=time.time() - 3600))]:
                answers[name] = intruder.ask(intruder.sealed(offer), NO_ANSWER_S)
            captured = intruder.sealed(intruder.offer(4))
            answers["offer replayed on another connection"] = other.ask(captured)
            answers["offer sealed in the wrong direction"] = intruder.ask(
                intruder.sealed(intruder.offer(5), direction=peers.WRONG_DIRECTION))
            answers["offer of another run (a leftover island)"] = intruder.ask(
                intruder.sealed(intruder.offer(6), run_id="ef" * 16))
            models = {"NaN model claiming fitness 0.0": lambda x, nonce: intruder.model(
                          x, np.full(values, np.nan), [0.0] * scalars, fitness=0.0, echo=nonce),
                      "model of the wrong size": lambda x, nonce: intruder.model(
                          x, np.zeros(values + 1), [1e9] + [0.0] * (scalars - 1), echo=nonce),
                      "model not echoing the nonce (a replay)": lambda x, nonce: intruder.model(
                          x, np.zeros(values), [1e9] + [0.0] * (scalars - 1), echo=None)}
            for exchange, (name, model) in enumerate(models.items(), start=10):
                answer = intruder.ask(intruder.sealed(intruder.offer(exchange)))  # fitness 1e9: it asks for ours
                answers[f"offer before the {name}"] = answer
                nonce = wire.decode(answer[1]).info["nonce"] if describe_answer(answer) == "send-me" else None
                intruder.socket.send_multipart(intruder.sealed(model(exchange, nonce)))
            cluster.wait_until(lambda: len(refusals(cluster, 0)) >= len(answers), 20)  # sent before closing
        finally:
            intruder.close()
            other.close()
        statuses = cluster.finish(range(2))
        reasons = [e["reason"] for e in refusals(cluster, 0)]
        merged = sum(e["event"] == "mix_merge" and e["peer"] == INTRUDER for e in cluster.events(0))
        return outcome("a token holder's bad fields, replays, wrong direction or run, NaN and wrong-size models",
                       cluster, statuses, [0, 1], work_redone=0,
                       answers={k: describe_answer(v) for k, v in answers.items()}, intruder_merges=merged,
                       refusals_counted=len(reasons), refusal_reasons=reasons)
    return run_case(directory, data, body, steps=steps)


def relay_and_replay(directory, data, steps=STEPS):
    """2 islands; a rendezvous file (island-07.json) points at a relay that forwards to island 1 and
    records every byte. An island that offers through it is refused by island 1 (the offer is addressed
    to the relay) and drops the relay for good. Then every connection's captured bytes are replayed raw (no token) into
    island 1: CURVE's handshake fails, and nothing reaches it."""
    def body(cluster):
        for n in range(2):
            cluster.start(n)
        relay = peers.Relay(cluster.address(1))
        (cluster.run_dir / "peers" / "island-07.json").write_text(json.dumps({"island": 7, "address": relay.address}))
        try:
            cluster.wait_until(lambda: any(e["event"] == "refused_by_peer" for e in cluster.events(0)), 120)
            replay_answered = [peers.replay_raw(cluster.address(1), data) for data in relay.captured if data]
            time.sleep(1.0)
        finally:
            relay.close()
        statuses = cluster.finish(range(2))
        captured = b"".join(bytes(c) for c in relay.captured)
        dropped = [e for e in cluster.events(0) if e["event"] == "refused_by_peer" and e["address"] == relay.address]
        return outcome("a rendezvous file pointing at a relay; its capture replayed without the token", cluster,
                       statuses, [0, 1], work_redone=0, relayed_connections=len(relay.captured),
                       relayed_bytes=len(captured), plaintext_seen=b"fitness" in captured or b"island" in captured,
                       relay_refusals=sum("a relay" in e["reason"] for e in refusals(cluster, 1)),
                       relay_dropped=bool(dropped), replays=len(replay_answered),
                       other_refusals=[e["reason"] for e in refusals(cluster, 1) if relay.address not in e["reason"]],
                       replay_merges=sum(e["event"] == "mix_merge" and e["peer"] == 7 for e in cluster.events(1)))
    return run_case(directory, data, body, steps=steps)


def huge_frames(directory, data, steps=STEPS, megabytes=200, count=5):
    """2 islands; five connections without the token each push a 200 MB frame at island 0, then a token
    holder sends a frame over the run's largest message. Each connection is closed before the frame is
    read: the island's memory and pace hold."""
    def body(cluster):
        for n in range(2):
            cluster.start(n)
        values, scalars = model_layout(cluster, range(2))
        pid = cluster.islands[0].pid
        before = peers.rss_mb(pid)
        taken = peers.junk_frames(cluster.address(0), megabytes, count)
        intruder = intruder_for(cluster, 0)
        try:
            big = intruder.model(1, np.zeros(values * 4), [0.0] * scalars)
            holder_answer = intruder.ask(intruder.sealed(big), NO_ANSWER_S)
        finally:
            intruder.close()
        after = peers.rss_mb(pid)
        statuses = cluster.finish(range(2))
        return outcome(f"{count} frames of {megabytes} MB without the token, one oversize with it", cluster,
                       statuses, [0, 1], work_redone=0, junk_bytes_taken=taken, rss_mb_before=before,
                       rss_mb_after=after, holder_answer=describe_answer(holder_answer),
                       refusals_counted=len(refusals(cluster, 0)))
    return run_case(directory, data, body, steps=steps)


def bad_files(directory, data, steps=STEPS):
    """2 islands; while they run: peers/island-07.json with the address "foo", peers/island-08.json
    naming island 9, rank-05/status.json dated a day ahead with a 2-value record, rank-06/status.json
    dated a day ahead, and a damaged population.json. Each is ignored with one log line per island."""
    def body(cluster):
        for n in range(2):
            cluster.start(n)
        cluster.address(0)
        run, now = cluster.run_dir, time.time()
        (run / "peers" / "island-07.json").write_text(json.dumps({"island": 7, "address": "foo"}))
        (run / "peers" / "island-08.json").write_text(json.dumps({"island": 9, "address": "127.0.0.1:1"}))
        for number, record in ((5, [1.0, 2.0]), (6, [0.0] * 11)):
            (run / f"rank-{number:02d}").mkdir(exist_ok=True)
            (run / f"rank-{number:02d}" / "status.json").write_text(json.dumps(
                {"island": number, "time": now + 86400, "record": record}))
        (run / "population.json").write_text('{"point": "x"}')
        statuses = cluster.finish(range(2))
        warned = {n: [e["reason"] for e in cluster.events(n) if e["event"] == "bad_shared_file"] for n in range(2)}
        return outcome("bad rendezvous and status files", cluster, statuses, [0, 1], work_redone=0,
                       bad_files_logged=warned)
    return run_case(directory, data, body, steps=steps)
