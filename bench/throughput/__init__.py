"""Speed of eggnog's kernels and steps: EGGROLL population evaluation, generation, the fp32 matmul, noise
generation and the MinGRU scan, alone or beside nano-egg and minGRU-pytorch on the same machine; the CPU's
int8 peak they are held against, and what the registry's argument checks cost:
`python -m bench.throughput.<name>`."""
