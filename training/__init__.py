"""What every trainer shares: optimisers, the BPTT trainer, MinGRU runs and the launcher of a run."""
