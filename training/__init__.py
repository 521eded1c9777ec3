"""What every trainer shares: optimisers, run configs and the command lines generated from them, the
launcher of a run, the MinGRU runs' common parts, the MinGRU BPTT trainer and the peak-memory meter."""
