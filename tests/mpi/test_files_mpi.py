"""Run directories, logs, checkpoints and the default corpus cache with several ranks."""

import os

import numpy as np

from eggnog.corpus.default import default_corpus
from eggnog.runtime.checkpoint import load_checkpoint, save_checkpoint
from eggnog.runtime.rundir import create_run_dir, metrics_log, read_jsonl


def test_run_directory_is_created_once_and_logged_by_rank_zero(world, shared_dir, parallel_assert):
    run = create_run_dir(world, os.path.join(shared_dir, "run"), {"ranks": world.size})
    log = metrics_log(world, run)
    log.write(epoch=0, rank=world.rank)
    log.close()
    world.barrier()
    parallel_assert(read_jsonl(run / "metrics.jsonl") == [{"epoch": 0, "rank": 0}])
    if world.is_root:
        save_checkpoint(run / "checkpoints", 5, {"p": np.arange(10, dtype=np.int8)}, {"ranks": world.size})
    world.barrier()
    arrays, record = load_checkpoint(run)
    parallel_assert(record["step"] == 5 and arrays["p"].tolist() == list(range(10)))


def test_default_corpus_built_once_and_shared(world, shared_dir, parallel_assert, tmp_path):
    cache = os.path.join(shared_dir, "cache")
    corpus = world.root_first(lambda: default_corpus(cache))
    digests = world.allgather_array(np.frombuffer(bytes.fromhex(corpus.meta["splits"]["train"]["sha256"]),
                                                  dtype=np.uint8))
    parallel_assert(len(set(digests.reshape(world.size, 32).tobytes()[i * 32:(i + 1) * 32]
                            for i in range(world.size))) == 1)
    parallel_assert(len([p for p in os.listdir(cache) if p.endswith(".bin")]) == 1)
