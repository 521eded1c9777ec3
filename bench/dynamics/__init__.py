"""Learning like the original: eggnog's training curves beside the original implementations' own runs on
the same data and settings (nano-egg, minGRU-pytorch, zero_order_rnn, d-eggs with its build), in bits per
byte: `python -m bench.dynamics.<peer>`. docs/originals.md holds the results."""
