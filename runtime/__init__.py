"""MPI world and device binding, run directories, checkpoints, metrics log, progress."""
