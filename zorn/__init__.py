"""Zero-order RNN training: CD-RGE and FDRAS (rge/: in series or over MPI ranks, the run behind
bin/train_rge.py with its BPTT baseline solver, the gossip island), the sequence tasks and the MinGRU
as a task model. Optimisers live in eggnog.training."""
