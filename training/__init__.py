"""What every trainer shares, and the trainers that belong to no strategy family:

    launch          the start of every training run: flags to totals, resume, checks, backend, corpus,
                    run directory, header and closing line
    cli             the command lines (Typer) generated from run configs
    run/            a run's config, loop, schedule and plots
    optimizers      Schedule-Free AdamW, AdamW and SGD over one flat float32 vector, where it lives
    memory_plan     the memory a run will hold, estimated from its config before anything is
                    allocated, and the refusal of a run that cannot fit
    memory          the peak memory of this process over a window (what the metrics report)
    mingru/         the MinGRU LM trained by truncated BPTT, also as a gossip island
    gossip/         gossip tournaments between islands of any trainer, over MPI or TCP
"""
