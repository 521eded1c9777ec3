"""Recurrent cells and sequences (fp32), forward and backward.

    scan                  ops: the MinGRU recurrence (parallel scan on the GPU) and one step of it
    scan_layout           how the CUDA scan cuts a sequence into blocks, tiles and segments
    scan_cpu              the scan's CPU twin loops
    scan_roofline         the scan's roofline workloads for the static report
    lstm                  ops: the FlashRNN-style multi-head LSTM (steps, whole sequences, projections)
    lstm_sequence_cpu     its whole-sequence CPU twin
    lstm_sequence_cuda    its whole-sequence CUDA kernels (R in shared memory)
    lstm_cell             ops: the pointwise cell of the DNC's controller LSTM
    dnc_addressing        ops: the DNC's content addressing and read
    dnc_interface         ops: the DNC's interface vector cut into heads
    dnc_memory            ops: the DNC's erase/add memory write
"""
