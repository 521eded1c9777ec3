"""Zero-order RNN training: CD-RGE, BPTT baseline, optimisers, synthetic tasks."""
