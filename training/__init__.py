"""What every trainer shares: optimisers, run configs and the command lines generated from them, the
launcher of a run, the run loop (metrics, validation, checkpoints, progress), the MinGRU runs' common
parts, the MinGRU BPTT trainer and the peak-memory meter."""
