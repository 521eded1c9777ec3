"""What every trainer shares:

    launch          the start of every training run: flags to totals, resume, checks, backend, corpus,
                    run directory, header and closing line
    run_config      what a run config is: a frozen dataclass whose fields are the script's flags
    cli             the command lines (Typer) generated from run configs
    run_loop        the loop every language-model trainer runs: timed steps, metrics, validation,
                    checkpoints, progress, a stop on SIGINT/SIGTERM
    run_schedule    when a run validates, checkpoints and redraws its plots: the flags and their rules
    run_plots       plots of runs from their metrics.jsonl
    optimizers      Schedule-Free AdamW, AdamW and SGD over one flat float32 vector, where it lives
    bptt            truncated BPTT of the MinGRU LM, data-parallel over MPI ranks
    mingru_run      what the MinGRU runs (BPTT, float EGGROLL) share: flags, model, checkpoints, resume
    memory_plan     the memory a run will hold, estimated from its config before anything is
                    allocated, and the refusal of a run that cannot fit
    memory          the peak memory of this process over a window (what the metrics report)
    island          an island: one model trained by a local trainer, as gossip tournaments see it
    gossip_fields   the gossip flags every island trainer's run config shares
"""
