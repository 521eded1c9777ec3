"""What a training run is, for every trainer:

    config      a run config: a frozen dataclass whose fields are the script's flags
    loop        the loop every language-model trainer runs: timed steps, metrics, validation,
                checkpoints, progress, a stop on SIGINT/SIGTERM
    schedule    when a run validates, checkpoints and redraws its plots: the flags and their rules
    plots       plots of runs from their metrics.jsonl
"""
