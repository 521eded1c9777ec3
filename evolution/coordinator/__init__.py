"""d-eggs' coordinator: one process hands out chunks of the population to workers, re-queues a
straggler's chunk and applies the update, over MPI or TCP.

    coordinator       the coordinator's books: chunks handed out, fitness gathered, steps, checkpoints
    fields            the coordinator's flags and their checks, for the run configs it can run
    wire              the messages between coordinator and workers, as flat arrays (no pickle)
    messages          one parser per message kind, every field checked against the run's shape
    mpi               the MPI links of both ends
    tcp               the coordinator's TCP link (CurveZMQ, sealed messages, admission)
    tcp_worker_link   a worker's TCP link
    worker            a worker: evaluates the chunks it is given, ternary-packed fitness back
    chunk_shaping     a chunk's fitness as ternary signs (d-eggs' shaping)
    trainer           bin/train_es.py --mode coordinated: the coordinator and workers of one MPI job
    tcp_worker        bin/es_worker.py: a worker process joining a coordinator over TCP
"""
