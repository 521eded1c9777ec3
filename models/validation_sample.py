"""The shape of a validation sample: --val-rows rows of --val-tokens bytes (each with its target) read from
the start of the validation split. A split too small for all of them keeps the rows' length, as far as it
can, and reads fewer rows: a byte model scored on rows of 2 bytes measures nothing but its first bytes."""

from eggnog.runtime.errors import BadInput

EGG_SAMPLE = (64, 256)  # the EGG main job's --val-rows and --val-tokens, which a prepared corpus is checked against


def sample_shape(split_bytes: int, rows: int, tokens: int) -> tuple[int, int]:
    """(rows, bytes scored per row) that a split of `split_bytes` bytes holds of the asked sample."""
    if split_bytes < 2:
        raise BadInput("the corpus has no validation split; prepare it with --val-fraction > 0")
    tokens = min(tokens, split_bytes - 1)
    return min(rows, split_bytes // (tokens + 1)), tokens


def short_split_line(split_bytes: int, rows: int, tokens: int) -> str | None:
    """One line naming a split too small for the asked sample and what is scored instead; None where it fits."""
    got_rows, got_tokens = sample_shape(split_bytes, rows, tokens)
    if (got_rows, got_tokens) == (rows, tokens):
        return None
    return (f"the validation split holds {split_bytes:,} bytes, fewer than --val-rows {rows} x (--val-tokens "
            f"{tokens} + 1) = {rows * (tokens + 1):,}: each validation scores {got_rows} row(s) of {got_tokens} "
            "bytes; prepare the corpus with more text or a larger --val-fraction")
