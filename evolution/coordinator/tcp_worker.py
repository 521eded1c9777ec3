"""`bin/es_worker.py`: a coordinator's worker over TCP, on any node, started at any time.

It is admitted with the token, its code version and the hash of the configuration it builds from
the coordinator's WELCOME (its corpus included: `--data` may name another copy of the same file). It
keeps its replica across a lost coordinator: when the connection goes quiet it asks to be admitted
again, for up to --reconnect-timeout seconds, and catches up from wherever the coordinator (resumed
from a checkpoint) is. A coordinator of another run (another run id) gets a fresh replica, from the
run's initial parameters."""

import math
import typing
from dataclasses import fields

from eggnog.evolution.coordinator import wire
from eggnog.evolution.coordinator.messages import run_shape
from eggnog.evolution.coordinator.tcp_worker_link import LinkLost, RunOver, TcpWorkerLink
from eggnog.evolution.coordinator.worker import Worker
from eggnog.evolution.es_trainer import EsRunConfig, val_sample
from eggnog.evolution.transformer_es_config import TransformerEsRunConfig
from eggnog.kernels.core.backend import device_free_bytes, select_backend
from eggnog.runtime.auth import config_hash, token_key
from eggnog.runtime.errors import BadInput
from eggnog.runtime.rundir import config_from
from eggnog.runtime.threads import set_threads
from eggnog.runtime.world import world_without_mpi
from eggnog.training.launch import open_run_corpus

CONFIGS = {cls.model_name: cls for cls in (EsRunConfig, TransformerEsRunConfig)}
JOIN_WAIT_S = 10.0  # for an answer to HELLO, before the run's own --heartbeat-timeout is known


def config_of(welcome, data):
    """The run configuration the coordinator's WELCOME names, each field of the type its flag takes and
    the whole checked as the coordinator checked it; BadInput otherwise."""
    cls = CONFIGS.get(welcome.get("model"))
    if cls is None:
        raise BadInput(f"the coordinator runs a {welcome.get('model')!r} model, which this worker cannot")
    stored, hints = welcome["config"], typing.get_type_hints(cls)
    for field in fields(cls):
        if field.name in stored and not same_kind(stored[field.name], hints[field.name]):
            raise BadInput(f"the coordinator's configuration gives {field.name} = {stored[field.name]!r}, "
                           f"not a value of its flag's type")
    cfg = config_from(cls, stored, {"data": data} if data else {})
    try:
        cfg.check(1)
    except BadInput as e:
        raise BadInput(f"the coordinator's configuration does not check: {e}") from None
    return cfg


def same_kind(value, hint):
    """JSON `value` is of the type `hint` a flag declares (int, float, bool, str, or one of them or None)."""
    allowed = typing.get_args(hint) or (hint,)
    if isinstance(value, bool):
        return bool in allowed
    if isinstance(value, int):
        return int in allowed or float in allowed
    if isinstance(value, float):
        return float in allowed and math.isfinite(value)
    if value is None:
        return type(None) in allowed
    return isinstance(value, str) and str in allowed


def serve(address, token_file=None, backend=None, threads=None, data=None, reconnect_timeout=600.0):
    """Work for the coordinator at `address` (HOST:PORT) until it says STOP; returns the exit status."""
    link = TcpWorkerLink(address, token_key(token_file), JOIN_WAIT_S)
    try:
        return work(link, address, backend, threads, data, reconnect_timeout)
    except RunOver as e:  # it joined as the run ended
        print(f"worker: {e}", flush=True)
        return e.status
    finally:
        link.close()


def work(link, address, backend, threads, data, reconnect_timeout):
    world, worker, replica_run = world_without_mpi(), None, None
    while True:
        cfg = config_of(link.join(reconnect_timeout), data)
        link.timeout = cfg.heartbeat_timeout
        if worker is not None and link.run_id != replica_run:  # a replica of another run is of no use here
            print("worker: the coordinator runs another run; starting from its initial parameters", flush=True)
            worker = None
        if worker is None:
            chosen = select_backend(backend, world.local_rank)
            count = set_threads(threads, world)
            corpus = open_run_corpus(cfg, world)
            model = cfg.build_model()
            memory = cfg.memory_line(model, cfg.population_chunk, device_free_bytes(chosen))  # or BadInput
            worker = Worker(cfg, link, chosen, corpus, model, model.init_params(cfg.seed), 0, val_sample(cfg, corpus))
            worker.warm_up()
            replica_run = link.run_id
            print(f"worker {link.name.decode()[:12]}: coordinator {address}  backend: {chosen.name} "
                  f"({chosen.device_name})  threads: {count}" + (f"  {memory}" if memory else ""), flush=True)
        else:  # a resumed coordinator may change what a run may change on resume
            worker.cfg, (worker.val_rows, worker.val_tokens) = cfg, val_sample(cfg, corpus)
            worker.shape = run_shape(cfg, worker.model)
        try:
            link.ready(config_hash(cfg, corpus), worker.shape.max_message_bytes())
            return worker.run()
        except LinkLost as e:
            print(f"worker: {e}; asking to be admitted again", flush=True)
        except wire.Malformed as e:
            print(f"worker: the coordinator sent {e}; asking to be admitted again", flush=True)
