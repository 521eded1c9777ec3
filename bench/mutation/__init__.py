"""Mutation testing (cosmic-ray) of the modules where a silent error does the most harm: `python -m
bench.mutation`. Not run in CI; see docs/internals.md."""
