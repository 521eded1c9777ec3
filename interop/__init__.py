"""Bridges from other frameworks to eggnog's kernels: `torch_autograd` (PyTorch autograd functions over
the MinGRU scan, the float matmul and the LSTM sequence). Needs the optional extra `eggnog[torch]`."""
