"""The start of a MinGRU training script, shared by bin/train_bptt.py and `bin/train_es.py --model
mingru`: merge the flags with a resumed run's config, check everything before anything is written,
pick the backend and corpus, create (or reopen) the run directory, print the header, run."""

from dataclasses import asdict

from eggnog.corpus.default import default_corpus
from eggnog.corpus.reader import open_corpus
from eggnog.kernels.backend import select_backend
from eggnog.runtime.rundir import config_from, create_run_dir, read_config
from eggnog.runtime.world import init_world
from eggnog.training.mingru_run import describe


def launch(config_cls, trainer_cls, given, resume, run_dir, backend, name, describe_run, describe_summary):
    world = init_world()
    stored = read_config(resume) if resume is not None else {}
    cfg = config_from(config_cls, stored, given).resolved()
    cfg.check(world.size)
    chosen = select_backend(backend, world.local_rank)
    corpus = open_corpus(cfg.data) if cfg.data else world.root_first(default_corpus)
    trainer = trainer_cls(cfg, world, chosen, corpus)
    if resume is not None:
        trainer.restore(resume)
    path = create_run_dir(world, resume or run_dir, asdict(cfg), resume=resume is not None, name=name)
    if world.is_root:
        val = corpus.meta.get("splits", {}).get("val", {})
        print(f"run: {path}  backend: {chosen.name} ({chosen.device_name})  ranks: {world.size}")
        print(describe(cfg, trainer.model))
        print(describe_run(trainer))
        if val:
            print(f"validation baselines: unigram {val['unigram_bpb']:.3f}, bigram {val['bigram_bpb']:.3f} bits/byte")
    summary = trainer.run(path)
    if world.is_root:
        print(f"{describe_summary(summary)}; val {summary['val_bpb']:.3f} bits/byte "
              f"(best {summary['best_val_bpb']:.3f})")
    return summary
