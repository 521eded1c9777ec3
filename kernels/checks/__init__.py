"""Checks of the node and of the compiled code.

    hardware          four small ops, one per mechanism the big kernels rely on (IMMA, HMMA, shared
                      memory, grid-wide launches), run by `bin/selfcheck.py --gpu`
    platform_check    what this node's CUDA stack can do, item by item
    ptx_compile       every registered CUDA kernel compiled to PTX without a GPU
                      (`python -m eggnog.kernels.checks.ptx_compile`)
"""
