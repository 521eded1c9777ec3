"""The coordinator's messages, whatever carries them (MPI or TCP): one byte buffer each, an int64
header (its first field the kind) followed by a payload of raw bytes; nothing pickled. Over MPI,
workers send on tag UP to rank 0 and rank 0 answers on tag DOWN; waiting polls with short sleeps,
because MPI implementations busy-wait in a blocking probe and would starve the ranks that compute on
an oversubscribed node."""

import time

import numpy as np

UP, DOWN = 11, 12

# worker -> coordinator
REQUEST = 1  # [REQUEST, worker_step, signal]: signal, a stop signal the worker got (0: none)
RESULT = 2  # [RESULT, step, chunk, loglik_sum, proxy_sum, n_packed] + packed fitness + the chunk's states
SNAPSHOT_RESULT = 3  # [SNAPSHOT_RESULT, step, validated, val_loglik_sum] + parameters + optimizer state
HELLO = 4  # [HELLO] + JSON {"worker", "version"}: TCP only, the first message of a connection
READY = 5  # [READY] + JSON {"config_hash"}: TCP only, after the worker built the welcomed config
HEARTBEAT = 6  # [HEARTBEAT] + the worker's id: TCP only, from the worker's heartbeat thread
LEAVE = 7  # [LEAVE]: TCP only, a worker stopping by itself (a stop signal) between jobs

# coordinator -> worker
JOB = 10  # [JOB, step, chunk] + the chunk's states (members, layers, dim)
CATCHUP = 11  # [CATCHUP, step] + the packed fitness of that step
WAIT = 12  # [WAIT]
STOP = 13  # [STOP, status]: the exit status of every rank (0, or 128 + the stop signal)
SNAPSHOT = 14  # [SNAPSHOT, step, validate]: send the parameters (and the validation sum)
LOAD = 15  # [LOAD, step] + parameters + optimizer state of that step (a snapshot's body)
WELCOME = 16  # [WELCOME] + JSON {"model", "config", "corpus"}: TCP only, the run's configuration
REFUSE = 17  # [REFUSE] + UTF-8 reason: TCP only, the connection is not admitted
HELLO_AGAIN = 18  # [HELLO_AGAIN]: TCP only, to a worker this coordinator does not know (it restarted)

POLL_S = 0.0005


class Malformed(ValueError):
    """A message whose header or payload does not have the size its kind and fields say."""


def encode(header, *payloads):
    head = np.asarray(header, dtype=np.int64)
    parts = [np.frombuffer(head.tobytes(), np.uint8)]
    parts += [np.frombuffer(np.ascontiguousarray(p).tobytes(), np.uint8) for p in payloads]
    return np.concatenate(parts)


def header(message, fields):
    if message.size < 8 * fields:
        raise Malformed(f"a message of {message.size} bytes is shorter than its {fields}-field header")
    return [int(v) for v in np.frombuffer(message[:8 * fields].tobytes(), np.int64)]


def payload(message, fields):
    return message[8 * fields:]


def send(comm, message, dest, tag):
    comm.Send(message, dest=dest, tag=tag)


def receive(comm, source, tag, timeout=None):
    """(message bytes, source rank) from `source` (None: any); waits with short sleeps, at most
    `timeout` seconds when given (then None)."""
    from mpi4py import MPI

    status = MPI.Status()
    source = MPI.ANY_SOURCE if source is None else source
    deadline = None if timeout is None else time.perf_counter() + timeout
    while not comm.Iprobe(source=source, tag=tag, status=status):
        if deadline is not None and time.perf_counter() >= deadline:
            return None
        time.sleep(POLL_S)
    buf = np.empty(status.Get_count(MPI.BYTE), dtype=np.uint8)
    comm.Recv(buf, source=status.Get_source(), tag=tag)
    return buf, status.Get_source()


def kind(message):
    return header(message, 1)[0]
