"""Runs written before one parameter update was called a step everywhere: their ES metrics.jsonl
lines carry `epoch`, the 0-based index of the line's update, and their ES checkpoints
`data_position {"epoch": n}` after n updates. Whatever reads them converts here, so the rest of the
code knows steps only: `step` in a metrics line is the count of steps done, 1 after the first."""


def metrics_record(record):
    """A metrics.jsonl line as it is logged now."""
    if "epoch" not in record or "step" in record:
        return record
    return {("step" if k == "epoch" else k): (v + 1 if k == "epoch" else v) for k, v in record.items()}


def checkpoint_meta(meta):
    """A checkpoint's metadata as it is written now."""
    position = meta.get("data_position") if isinstance(meta, dict) else None
    if not isinstance(position, dict) or "epoch" not in position:
        return meta
    return {**meta, "data_position": {("step" if k == "epoch" else k): v for k, v in position.items()}}
