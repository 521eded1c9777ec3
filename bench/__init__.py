"""Benchmarks, run as `python -m bench.<package>[.<name>]`, each a sub-package of one concern (the README's
layout table lists them); report.py is what they share (machine, commit, tables, result files), and
results/ holds what they measured."""
