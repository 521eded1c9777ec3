"""The coordinator's messages over MPI: one byte buffer each, an int64 header (its first field the
kind) followed by a payload of raw bytes, sent with buffer-based point-to-point calls (nothing
pickled). Workers send on tag UP to rank 0; rank 0 answers on tag DOWN. Waiting polls with short
sleeps, because MPI implementations busy-wait in a blocking probe and would starve the ranks that
compute on an oversubscribed node."""

import time

import numpy as np

UP, DOWN = 11, 12

# worker -> coordinator
REQUEST = 1  # [REQUEST, worker_step, signal]: signal, a stop signal the worker got (0: none)
RESULT = 2  # [RESULT, step, chunk, loglik_sum, proxy_sum, n_packed] + packed fitness + the chunk's states
SNAPSHOT_RESULT = 3  # [SNAPSHOT_RESULT, step, validated, val_loglik_sum] + parameters

# coordinator -> worker
JOB = 10  # [JOB, step, chunk] + the chunk's states (members, layers, dim)
CATCHUP = 11  # [CATCHUP, step] + the packed fitness of that step
WAIT = 12  # [WAIT]
STOP = 13  # [STOP, status]: the exit status of every rank (0, or 128 + the stop signal)
SNAPSHOT = 14  # [SNAPSHOT, step, validate]: send the parameters (and the validation sum)
LOAD = 15  # [LOAD, step] + a checkpoint's path, UTF-8

POLL_S = 0.0005


def encode(header, *payloads):
    head = np.asarray(header, dtype=np.int64)
    parts = [np.frombuffer(head.tobytes(), np.uint8)]
    parts += [np.frombuffer(np.ascontiguousarray(p).tobytes(), np.uint8) for p in payloads]
    return np.concatenate(parts)


def header(message, fields):
    return [int(v) for v in np.frombuffer(message[:8 * fields].tobytes(), np.int64)]


def payload(message, fields):
    return message[8 * fields:]


def send(comm, message, dest, tag):
    comm.Send(message, dest=dest, tag=tag)


def receive(comm, source, tag):
    """(message bytes, source rank) from `source` (None: any); waits with short sleeps."""
    from mpi4py import MPI

    status = MPI.Status()
    source = MPI.ANY_SOURCE if source is None else source
    while not comm.Iprobe(source=source, tag=tag, status=status):
        time.sleep(POLL_S)
    buf = np.empty(status.Get_count(MPI.BYTE), dtype=np.uint8)
    comm.Recv(buf, source=status.Get_source(), tag=tag)
    return buf, status.Get_source()


def kind(message):
    return header(message, 1)[0]
