"""Models over one flat parameter buffer, and what reads them:

    egg                   nano-egg's integer EGG language model (int8)
    egg_transformer       d-eggs' integer transformer: configuration, parameter layout, initialisation
    mingru                the float MinGRU LM (lucidrains' minLM as gruboros trains it)
    mingru_sizing         MinGRU sizes from a parameter budget, as gruboros solves it
    mingru_eval           validation of a MinGRU LM (bits/byte on a fixed sample of the val split)
    validation_sample     how many validation rows of how many bytes a split holds of the asked sample
    lstm                  the multi-head LSTM LM of the zero-order RNN paper (fp32)
    dnc                   the simplified DNC of the same paper (fp32), with exact BPTT through its memory
    dnc_windows           column and row windows of matrices, as the DNC cuts and joins them
    flat_params           named tensors laid out in one flat vector, as every float model stores them
    generate              generation after a prompt, one generator per model (EGG, MinGRU LM, d-eggs'
                          transformer with its integer sampler)
    sampling              the next byte from logits: temperature, min-p, presence penalty, top-k, top-p
"""
