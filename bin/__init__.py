"""The programs. Each file runs as `python bin/<file>.py` from a checkout and, installed (as
`eggnog.bin`), as the `eggnog-*` command pyproject.toml's [project.scripts] names for it: the same
function, the one its `if __name__ == "__main__":` block calls, so the flags and the runs are the same."""
