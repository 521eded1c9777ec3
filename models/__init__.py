"""Models over one flat parameter buffer: the integer EGG, the float MinGRU LM (sizing, validation,
generation), the multi-head LSTM and the DNC; byte sampling from logits."""
