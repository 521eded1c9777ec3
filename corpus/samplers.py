"""Deterministic samplers over a byte array: every result is a function of (seed, step, global
index), never of the MPI rank count, so a rank asks for its own slice of a global batch.

- RandomWindows: windows at hashed start offsets (gruboros style).
- ContiguousStreams: S streams, each a contiguous stretch of the corpus read window by window
  across epochs (nano-egg style); consecutive members share a stream.
- tbptt_chunks: consecutive chunks of long windows, overlapping by one byte so no byte is skipped
  between chunks (the last target of a chunk is the first input of the next).
"""

import numpy as np

from eggnog.kernels.noise.reference import bits
from eggnog.kernels.noise.scalar_math import stream_key
from eggnog.runtime.errors import BadInput

WINDOW_STREAM_ID = 0x57494E44  # tensor id of the window-start noise: "WIND"


def _gather(data, starts, length):
    out = np.empty((len(starts), length), dtype=data.dtype)  # bytes, or a token corpus's tokens
    for row, start in enumerate(starts):  # a loop of slices beats fancy indexing on a memmap
        out[row] = data[int(start):int(start) + length]
    return out


class RandomWindows:
    def __init__(self, data, length, seed):
        if length < 1:
            raise BadInput(f"window length must be positive, got {length}")
        if len(data) < length:
            raise BadInput(f"corpus of {len(data)} bytes is shorter than one window of {length} bytes")
        self.data, self.length, self.seed = data, length, seed
        self.n_starts = len(data) - length + 1

    def starts(self, step, first, count):
        """Start offsets of samples [first, first + count) of `step`."""
        lo = bits(stream_key(self.seed, WINDOW_STREAM_ID, step, 0), first, count)
        hi = bits(stream_key(self.seed, WINDOW_STREAM_ID, step, 1), first, count)
        return (((hi << np.uint64(32)) | lo) % np.uint64(self.n_starts)).astype(np.int64)

    def batch(self, step, first, count):
        return _gather(self.data, self.starts(step, first, count), self.length)


class ContiguousStreams:
    """Stream s is corpus[s*L : (s+1)*L] with L = segments*T + 1; at epoch e it yields the T + 1
    bytes starting at (e mod segments)*T, so consecutive epochs continue where the last stopped."""

    def __init__(self, data, n_streams, tokens):
        if n_streams < 1 or tokens < 1:
            raise BadInput(f"streams and tokens per window must be positive, got {n_streams} and {tokens}")
        self.segments = (len(data) - n_streams) // (tokens * n_streams)
        if self.segments < 1:
            raise BadInput(f"corpus of {len(data)} bytes is shorter than one window of {tokens + 1} bytes "
                           f"for each of {n_streams} streams")
        self.data, self.n_streams, self.tokens = data, n_streams, tokens
        self.stream_length = self.segments * tokens + 1

    def starts(self, epoch, first_stream, count):
        if first_stream < 0 or first_stream + count > self.n_streams:
            raise ValueError(f"streams [{first_stream}, {first_stream + count}) outside [0, {self.n_streams})")
        streams = np.arange(first_stream, first_stream + count, dtype=np.int64)
        return streams * self.stream_length + (epoch % self.segments) * self.tokens

    def batch(self, epoch, first_stream, count):
        """(count, tokens + 1) bytes: inputs are [:, :-1], targets [:, 1:]."""
        return _gather(self.data, self.starts(epoch, first_stream, count), self.tokens + 1)

    def member_batch(self, epoch, first_member, count, group_size):
        """Windows of members [first_member, first_member + count); member m reads stream
        m // group_size."""
        streams = np.arange(first_member, first_member + count) // group_size
        lo = int(streams[0]) if count else 0
        rows = self.batch(epoch, lo, int(streams[-1]) - lo + 1 if count else 0)
        return rows[streams - lo]


def tbptt_chunks(windows, chunk_size):
    """Split (B, n*chunk_size + 1) windows into n chunks of chunk_size + 1 bytes sharing edges."""
    windows = np.asarray(windows)
    if chunk_size < 1:
        raise BadInput(f"chunk size must be positive, got {chunk_size}")
    length = windows.shape[-1]
    if length < chunk_size + 1 or (length - 1) % chunk_size:
        raise BadInput(f"window of {length} bytes is not a whole number of {chunk_size}-byte chunks plus one")
    return [windows[..., c:c + chunk_size + 1] for c in range(0, length - 1, chunk_size)]
