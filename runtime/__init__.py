"""What every process needs: the MPI world, run directories and the metrics log, checkpoints, step
timing (`step_clock`), progress bars, and user errors (`errors`) turned into one sentence."""
