"""The TCP coordinator's own cost per message, measured on one core: a real coordinator (its queue,
bookkeeping and ZeroMQ link with tag checks) serves in-process fake workers, DEALER sockets that
send requests and return pre-computed fitness with the states they were sent. Only the
coordinator's `serve()` calls are timed; the fake workers' sends and receives fall outside them."""

import json
import tempfile
import time
from dataclasses import replace
from pathlib import Path
from statistics import median

import numpy as np
import zmq

from bench.faults.coordinator_cluster import free_port
from eggnog import code_version
from eggnog.evolution.coordinator import wire
from eggnog.evolution.coordinator.coordinator import Coordinator
from eggnog.evolution.coordinator.messages import run_shape
from eggnog.evolution.coordinator.tcp import UP, bind
from eggnog.evolution.coordinator.trainer import tcp_link
from eggnog.evolution.fitness import pack_ternary
from eggnog.runtime.auth import token_key
from eggnog.runtime.rundir import JsonLog
from eggnog.runtime.secure_socket import client_socket, derive_keys, message_key, seal
from eggnog.runtime.world import World


class FakeWorker:
    def __init__(self, address, keys, index):
        self.keys, self.name = keys, f"fake-worker-{index}".encode()
        self.key = message_key(keys, b"", UP)  # admission's; the run's once WELCOME names it
        self.socket = client_socket(zmq.Context.instance(), zmq.DEALER, keys, 1 << 26)
        self.socket.setsockopt(zmq.ROUTING_ID, self.name)
        self.socket.connect(f"tcp://{address}")

    def send(self, message):
        body = np.ascontiguousarray(message).tobytes()
        self.socket.send_multipart([seal(self.key, self.name, body), body])

    def receive(self):
        return np.frombuffer(self.socket.recv_multipart()[-1], np.uint8)


def coordinator_for(cfg, corpus, address, keys, directory):
    """A TCP coordinator of `cfg` over its real link, ready to serve (no run loop, no checkpoints)."""
    cfg = replace(cfg, transport="tcp", listen=address)
    model = cfg.build_model()
    link = tcp_link(cfg, corpus, bind(address, keys, run_shape(cfg, model).max_message_bytes()), keys, directory)
    states = np.zeros((cfg.population, *model.state_dims), np.int8)
    c = Coordinator(cfg, World(None, 0, 1, 0, 1), link, 0, states, {}, None, (1, 1))
    c.log, c.started = JsonLog(Path(directory) / "metrics.jsonl"), time.perf_counter()
    c.begin_step()
    return c, link


def admit(c, workers, cfg_hash):
    for w in workers:
        hello = json.dumps({"worker": w.name.decode(), "version": code_version()})
        w.send(wire.encode([wire.HELLO], np.frombuffer(hello.encode(), np.uint8)))
        timed_serve(c)
        run_id = bytes.fromhex(json.loads(bytes(w.receive()[8:]).decode())["run_id"])
        w.key = message_key(w.keys, run_id, UP)
        ready = json.dumps({"worker": w.name.decode(), "version": code_version(), "config_hash": cfg_hash})
        w.send(wire.encode([wire.READY], np.frombuffer(ready.encode(), np.uint8)))
        timed_serve(c)
        w.receive()


def timed_serve(c):
    """Seconds of one `serve()` that handles a message, the wait for its arrival left out."""
    while not c.link.socket.poll(1000):
        pass
    started = time.perf_counter()
    c.serve(None)
    return time.perf_counter() - started


def measure(cfg, corpus, workers=8, steps=3):
    """Median seconds the coordinator spends on one request (answered with a job) and on one result,
    and per step on its closing work, for `cfg`'s chunk size."""
    from eggnog.runtime.auth import config_hash

    keys = derive_keys(token_key(environ={"EGGNOG_TOKEN": "scale-model"}))
    address = f"127.0.0.1:{free_port()}"
    with tempfile.TemporaryDirectory() as directory:
        c, link = coordinator_for(cfg, corpus, address, keys, directory)
        fakes = [FakeWorker(address, keys, i) for i in range(workers)]
        try:
            admit(c, fakes, config_hash(c.cfg, corpus))
            signs = pack_ternary(np.resize(np.array([1, -1, 0], np.int8), cfg.population_chunk // 2))
            requests, results, closing = [], [], []
            for step in range(steps):
                pending = list(range(c.n_chunks))
                while pending:
                    busy = []
                    for w in fakes[:len(pending)]:
                        w.send(wire.encode([wire.REQUEST, step, 0]))
                        requests.append(timed_serve(c))
                        busy.append((w, w.receive()))
                    for w, job in busy:
                        _, _, chunk = wire.header(job, 3)
                        pending.remove(chunk)
                        w.send(wire.encode([wire.RESULT, step, chunk, -1000, 0, signs.size], signs,
                                           wire.payload(job, 3)))
                        seconds = timed_serve(c)
                        (closing if c.step > step else results).append(seconds)
            assert c.step == steps, "the fake workers did not complete every step"
        finally:
            for w in fakes:
                w.socket.close()
            link.close()
            c.log.close()
    state_bytes = cfg.population_chunk * int(np.prod(c.model.state_dims))
    return {"request_s": median(requests), "result_s": median(results), "last_result_s": median(closing),
            "job_bytes": state_bytes, "result_bytes": state_bytes + signs.size}
