"""Optimiser steps where the parameters live.

    float_steps       ops: SGD, AdamW and Schedule-Free AdamW over a flat float32 vector
    quantized_adamw   op: d-eggs' AdamW on the EGGROLL vote for integer weights
"""
