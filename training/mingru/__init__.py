"""The float MinGRU LM's trainers:

    run       what the MinGRU runs (BPTT, float EGGROLL) share: flags, model, checkpoints, resume
    bptt      truncated BPTT, data-parallel over MPI ranks (bin/train_bptt.py)
    island    the BPTT trainer as a gossip island, and its gossip run config
"""
