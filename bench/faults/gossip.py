"""The fault cases of gossip over TCP, each a function that runs islands on this machine
(bench/faults/gossip_cluster.py) and returns what the failure cost: steps lost, work redone, the survivors'
training time against an undisturbed run, and their final fitness against its noise.
tests/faults asserts on them; bench/faults/__main__.py tabulates them."""

import statistics

import numpy as np

from bench.faults.gossip_cluster import GossipCluster
from bench.faults.gossip_intruder import INTRUDER, describe_answer, intruder_for
from eggnog.training.gossip import tcp_wire as wire

STEPS = 60
FITNESS_DECAY = 0.995  # --gossip-fitness-decay's default, which the cases keep


def run_case(directory, data, body, steps=STEPS, **options):
    cluster = GossipCluster(directory, data, steps, **options)
    try:
        return body(cluster)
    finally:
        cluster.stop_all()


def step_seconds(records):
    """An island's mean time per step from its first step to its last (start-up and the first step's
    compiles left out), from its step records."""
    return (records[-1]["elapsed_s"] - records[0]["elapsed_s"]) / max(len(records) - 1, 1)


def outcome(name, cluster, statuses, survivors, **extra):
    records = {n: cluster.step_records(n) for n in survivors}  # each island's files read once
    events = {n: cluster.events(n) for n in survivors}
    finals = [records[n][-1]["fitness"] for n in survivors]
    lost = {n: cluster.steps - len({r["step"] for r in records[n]}) for n in survivors}
    merges = {n: sum(e["event"] == "mix_merge" for e in events[n]) for n in survivors}
    refused = sum(e["event"] == "refused" for n in survivors for e in events[n])
    tails = [r["train_bpb"] for n in survivors for r in records[n][-50:]]
    return {"case": name, "steps": cluster.steps, "status": statuses, "steps_lost": sum(lost.values()),
            "final_fitness": finals, "train_bpb_std": round(statistics.pstdev(tails), 5),
            "mean_final_fitness": round(statistics.mean(finals), 5),
            "step_s": round(statistics.mean(step_seconds(records[n]) for n in survivors), 4),
            "merges": merges, "refused": refused, **extra}


def fitness_noise(base):
    """How far an undisturbed run's mean final fitness moves by chance: the larger of twice its islands'
    spread and three standard deviations of a fitness average (the training loss's step-to-step spread
    over its last 50 steps, through the moving average: sqrt((1 - d) / (1 + d)) of it)."""
    spread = max(base["final_fitness"]) - min(base["final_fitness"])
    average = base["train_bpb_std"] * ((1 - FITNESS_DECAY) / (1 + FITNESS_DECAY)) ** 0.5
    return max(2 * spread, 3 * average)


def compared(result, base):
    """The result with its survivors' time per step set against the undisturbed run's and, for a run of
    as many steps, their mean final fitness against the undisturbed run's, within its noise."""
    result = {**result, "time_vs_undisturbed": round(result["step_s"] / base["step_s"], 2)}
    if result["steps"] != base["steps"]:
        return result
    noise = fitness_noise(base)
    gap = result["mean_final_fitness"] - base["mean_final_fitness"]
    return {**result, "fitness_gap": round(gap, 5), "fitness_noise": round(noise, 5),
            "fitness_within_noise": abs(gap) <= noise}


def undisturbed(directory, data, islands=4, steps=STEPS):
    """4 islands, nothing goes wrong: the run every case is compared with."""
    def body(cluster):
        for n in range(islands):
            cluster.start(n)
        statuses = cluster.finish(range(islands))
        return outcome("undisturbed, 4 islands", cluster, statuses, range(islands), work_redone=0)
    return run_case(directory, data, body, steps=steps)


def killed_mid_transfer(directory, data, steps=STEPS):
    """kill -9 of one island of 4 the moment its third model is on the socket (it kills itself, so the
    kill lands inside a transfer). The other three finish; every model they merged arrived whole."""
    def body(cluster):
        victim = 3
        for n in range(3):
            cluster.start(n)
        cluster.start(victim, EGGNOG_TEST_GOSSIP_DIE_IN_SEND="3")
        statuses = cluster.finish(range(4))
        survivors = [0, 1, 2]
        events = [e for n in survivors for e in cluster.events(n)]
        full = max(e["values"] for e in events if e["event"] == "mix_send")
        received = [e["values"] for e in events if e["event"] == "mix_receive"]
        from_victim = sum(e["event"] == "mix_merge" and e["peer"] == victim for e in events)
        return outcome("kill -9 of 1 of 4 in mid-transfer", cluster, statuses, survivors, work_redone=0,
                       victim_died_at=cluster.step_of(victim), partial_models_merged=sum(b != full for b in received),
                       merges_from_victim=from_victim,
                       timeouts=sum(e["event"] == "peer_lost" for e in events))
    return run_case(directory, data, body, steps=steps)


def events_after_restart(cluster, number):
    events = cluster.events(number)
    starts = [i for i, e in enumerate(events) if e["event"] == "start"]
    return events[starts[-1]:], events[starts[-1]]


def two_of_six_killed_one_restarted(directory, data, steps=200):
    """6 islands; kill -9 of islands 4 and 5 at step 20; island 4 started again with the same
    command. It continues from its own checkpoint and receives models again; 5 stays dead. (A run
    long enough that the others still train while the restarted process starts.)"""
    def body(cluster):
        for n in range(6):
            cluster.start(n)
        cluster.wait_for_step(4, 20)
        killed_at = {n: cluster.step_of(n) for n in (4, 5)}
        for n in (4, 5):
            cluster.kill(n)
        cluster.start(4)
        statuses = cluster.finish([0, 1, 2, 3, 4])
        after, start = events_after_restart(cluster, 4)
        resumed_from = start["step"]
        return outcome("2 of 6 killed, one restarted", cluster, statuses, [0, 1, 2, 3, 4],
                       work_redone=killed_at[4] - resumed_from, restarted_from=start["origin"],
                       models_received_after_restart=sum(e["event"] == "mix_receive" for e in after),
                       dead_island_steps_lost=cluster.steps - killed_at[5])
    return run_case(directory, data, body, steps=steps, peer_timeout=2.0)


def partitioned(directory, data, seconds=30.0, steps=None):
    """Island 3 of 4 drops every message, in and out, for `seconds` from step 10. The rest go on
    (they drop it after --peer-timeout) and take it back after."""
    pace = 0.05
    steps = steps or int((seconds + 6) / pace)

    def body(cluster):
        for n in range(3):
            cluster.start(n)
        cluster.start(3, EGGNOG_TEST_GOSSIP_DEAF=f"10:{seconds}")
        statuses = cluster.finish(range(4))
        events = cluster.events(3)
        heard = next(i for i, e in enumerate(events) if e["event"] == "hearing")
        deaf_step, hearing_step = next(e["step"] for e in events if e["event"] == "deaf"), events[heard]["step"]
        mixes_after = sum(e["event"] in ("mix_send", "mix_merge") for e in events[heard:])
        others_during = {n: sum(e["event"] in ("mix_send", "mix_merge") and deaf_step < e["step"] < hearing_step
                                for e in cluster.events(n)) for n in range(3)}
        return outcome(f"1 of 4 partitioned for {seconds:g} s", cluster, statuses, range(4), work_redone=0,
                       deaf_steps=[deaf_step, hearing_step], partitioned_mixes_after=mixes_after,
                       others_mixes_during=others_during)
    return run_case(directory, data, body, steps=steps, step_seconds=pace, peer_timeout=2.0)


def slow_island(directory, data):
    """Island 3 of 4 runs 10x slower. The others finish in the undisturbed time; the slow one, when
    --catch-up-steps behind, continues from the furthest island's newest checkpoint (its step and
    schedule too), and is stopped (SIGTERM) once the others are done and it has caught up (or a minute
    has passed), unless it has finished by then."""
    def body(cluster):
        for n in range(3):
            cluster.start(n)
        cluster.start(3, slowdown=10.0)
        statuses = cluster.finish(range(3))
        at_the_end = len({r["step"] for r in cluster.step_records(3)})  # steps it trained (not caught up to)
        cluster.wait_until(lambda: any(e["event"] == "catch_up" for e in cluster.events(3)), 60)
        cluster.wait_until(lambda: cluster.islands[3].poll() is not None, 30)  # caught up to the end, it finishes
        cluster.kill(3, signum=15)
        statuses[3] = cluster.islands[3].returncode
        catch_ups = [e for e in cluster.events(3) if e["event"] == "catch_up"]
        # a catch-up takes the checkpoint's step (and schedule): the island is then where its source was
        took_step = all(e["step"] == int(e["source"].split("step-")[1][:8]) for e in catch_ups)
        return outcome("1 of 4 10x slower", cluster, statuses, [0, 1, 2], work_redone=0,
                       slow_island_steps=at_the_end, slow_island_catch_ups=len(catch_ups),
                       catch_up_took_the_step=took_step)
    return run_case(directory, data, body, catch_up_steps=20)


def bad_messages(directory, data):
    """2 islands; an intruder without the token (CURVE: it never finishes the handshake), then one with
    it sending a corrupted message, another configuration's hash, an unreadable record and a model cut
    short (after an OFFER it won). Each is refused and counted; no weights are sent to the first and
    none of their bytes is merged."""
    def body(cluster):
        for n in range(2):
            cluster.start(n)
        stranger, intruder = intruder_for(cluster, 0, token="not-it"), intruder_for(cluster, 0)
        offer = intruder.offer(7)
        answers = {}
        try:
            answers["wrong token"] = stranger.ask(stranger.sealed(offer), 3)
            tag, _ = intruder.sealed(offer)
            answers["corrupted"] = intruder.ask([tag, offer[:-1] + b"x"])
            answers["another configuration"] = intruder.ask(intruder.sealed(intruder.offer(8, hash="0" * 64)))
            broken = bytearray(offer)
            broken[8 * wire.HEADER_FIELDS] = ord("[")  # the record no longer parses as JSON
            answers["unreadable record"] = intruder.ask(intruder.sealed(bytes(broken)), 1)
            answer = intruder.ask(intruder.sealed(intruder.offer(9)))  # fitness 1e9: the island asks for ours
            answers["offer"] = answer
            nonce = wire.decode(answer[1]).info["nonce"] if describe_answer(answer) == "send-me" else None
            short = intruder.model(9, np.zeros(10, np.float32), np.array([1e9, 0.0]), echo=nonce)
            intruder.socket.send_multipart(intruder.sealed(short))
            cluster.wait_until(lambda: any("not this island's" in e.get("reason", "") for e in cluster.events(0)), 20)
        finally:
            stranger.close()
            intruder.close()
        statuses = cluster.finish(range(2))
        kinds = {name: describe_answer(frames) for name, frames in answers.items()}
        merged = sum(e["event"] == "mix_merge" and e["peer"] == INTRUDER for e in cluster.events(0))
        counts = next(e for e in reversed(cluster.events(0)) if e["event"] == "gossip_counts")
        return outcome("bad messages", cluster, statuses, [0, 1], work_redone=0, answers=kinds,
                       intruder_merges=merged, refusals_counted=counts["refused"],
                       refusal_reasons=[e["reason"] for e in cluster.events(0) if e["event"] == "refused"])
    return run_case(directory, data, body, steps=120)
