"""What every process needs:

    world           the MPI world (rank, size, node-local rank); a world of one without a launcher
    rundir          a run directory: config.json, metrics.jsonl, checkpoints/, the lock
    loggers         --log: a run's metrics, config and plots also in W&B or TensorBoard (optional)
    run_lock        one process tree per run directory (a stale lock of a dead process is taken over)
    checkpoint      checkpoints as NPZ with the SHA-256 of every array, `latest` and `best` links
    files           atomic file writes;  commands: how this process was started
    step_clock      where a step's seconds go: evaluation, exchange, update;  progress: rank 0's bar
    stop_signals    SIGINT and SIGTERM stop a training loop after its step, with a checkpoint
    divergence      a finite loss grown far past where it started stops the run
    threads         the kernels' CPU threads per process, shared out over the ranks of a node
    auth            shared-token tags of TCP frames and the config hash peers must share
    errors, cli     BadInput, the one exception for user mistakes; one sentence on stderr, exit 2
    optional        packages eggnog can run without: imported, or what is lost said once"""
