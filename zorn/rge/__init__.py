"""CD-RGE and FDRAS, the zero-order estimators of the zero-order RNN paper:

    trainer   the estimator's step, in series or over MPI ranks
    search    ask/tell on any loss: the caller scores the members, the trainer's update applies
    run       the run behind bin/train_rge.py: flags, model and task, BPTT baseline solver
    memory    the memory a run will hold, and --probe-batch
    island    the trainer as a gossip island, and its gossip run config
"""
