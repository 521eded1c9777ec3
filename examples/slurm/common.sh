# Sourced by the sbatch scripts beside it, which are submitted from the repository's root (so that
# $SLURM_SUBMIT_DIR is the checkout and runs go to its runs/). What every eggnog job does alike:
# threads, data, the run directory and its resume after a requeue, the stop before the time limit.
#
# Variables you (or a test) may set when submitting; sbatch passes the environment on:
#   DATA            corpus written by bin/prepare_data.py (default: the embedded standard-library corpus)
#   STEPS           steps of the run in total (each script has its own default)
#   EGGNOG_ARGS     more flags for the script, after the script's own (the last of a flag wins)
#   EGGNOG_BACKEND  cpu, cuda or auto (read by eggnog itself)
#   EGGNOG_LAUNCH   what starts the ranks instead of the script's srun line ("" = run directly)
#   EGGNOG_REPO     the checkout (default: $SLURM_SUBMIT_DIR)
#   EGGNOG_REQUEUE  the command that requeues the job (default: scontrol requeue $SLURM_JOB_ID)

REPO=${EGGNOG_REPO:-$SLURM_SUBMIT_DIR}
RUNS=$SLURM_SUBMIT_DIR/runs
mkdir -p "$RUNS"

# Each task's cores go to numba's pool (and to any OpenMP library); BLAS gets one thread, so that
# its pool does not spin against numba's. --threads is given too: the default would share the
# node's cores out over its ranks, not the cores SLURM gave this task.
CPUS=${SLURM_CPUS_PER_TASK:-1}
export NUMBA_NUM_THREADS=$CPUS OMP_NUM_THREADS=$CPUS EGGNOG_BLAS_THREADS=${EGGNOG_BLAS_THREADS:-1}
THREADS=(--threads "$CPUS")
# compiled kernels are cached per node: concurrent writes from several nodes to one cache can race
export NUMBA_CACHE_DIR=${NUMBA_CACHE_DIR:-$HOME/.cache/eggnog-numba/$(hostname -s)}

DATA_ARGS=()
if [ -n "${DATA:-}" ]; then DATA_ARGS=(--data "$DATA"); fi

# run_dir NAME: RUN=$RUNS/NAME and START, the flags that open it: --resume RUN where RUN holds a
# checkpoint (this job was requeued), else --run-dir RUN (a start that never saved is set aside).
run_dir() {
    RUN=$RUNS/$1
    if find "$RUN" -maxdepth 3 -path '*/checkpoints/latest' 2>/dev/null | grep -q .; then
        # The job id names the run and SLURM runs a job once at a time, so a lock left by this
        # job's earlier start (killed, perhaps on another node) is stale.
        rm -f "$RUN/lock"
        START=(--resume "$RUN")
    else
        if [ -e "$RUN" ]; then mv "$RUN" "$RUN.unsaved-$(date +%Y%m%d-%H%M%S)"; fi
        START=(--run-dir "$RUN")
    fi
}

# run_stoppable COMMAND...: run the job's step in the background and wait for it. SLURM sends the
# batch shell USR1 before the time limit (#SBATCH --signal=B:USR1@180): the step gets TERM, finishes
# its training step, saves a checkpoint and exits, and STOPPED_FOR_TIME=1 asks for a requeue.
# Preemption and scancel need nothing here: SLURM sends TERM to the step itself, and requeues a
# preempted --requeue job on its own.
STOPPED_FOR_TIME=0
STEP_PID=
trap 'STOPPED_FOR_TIME=1; if [ -n "$STEP_PID" ]; then kill -TERM "$STEP_PID" 2>/dev/null; fi' USR1
run_stoppable() {
    local status
    "$@" &
    STEP_PID=$!
    while kill -0 "$STEP_PID" 2>/dev/null; do wait "$STEP_PID"; done
    wait "$STEP_PID"
    status=$?
    STEP_PID=
    return "$status"
}

# requeue_if_stopped STATUS [REQUEUE_STATUS...]: requeue the job when run_stoppable stopped it for
# the time limit, or when STATUS is one of REQUEUE_STATUS; then exit with STATUS.
requeue_if_stopped() {
    local status=$1
    shift
    if [ "$STOPPED_FOR_TIME" = 1 ] || [[ " $* " == *" $status "* ]]; then
        echo "requeueing job $SLURM_JOB_ID (exit status $status): its next start continues ${RUN:-the work}"
        ${EGGNOG_REQUEUE:-scontrol requeue "$SLURM_JOB_ID"}
    fi
    exit "$status"
}
