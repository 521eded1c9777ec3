"""Streaming byte statistics: size, SHA-256, unigram and bigram entropy in bits per byte, and the
split's size compressed by gzip (level 9) and xz (preset 9) in bits per byte, the general-purpose
compressors nano-egg also quotes.

The unigram entropy H(X) is the loss of the best context-free byte model; the bigram entropy is the
conditional entropy H(X_t | X_t-1), the loss of the best model that sees one previous byte. Both are
measured on the split itself, so they are the baselines a trained model must beat.
"""

import hashlib
import lzma
import zlib

import numpy as np


def entropy_bits(counts):
    counts = counts[counts > 0].astype(np.float64)
    if counts.size == 0:
        return 0.0
    p = counts / counts.sum()
    return float(-(p * np.log2(p)).sum())


class ByteStats:
    def __init__(self):
        self.size = 0
        self.sha256 = hashlib.sha256()
        self.unigram = np.zeros(256, dtype=np.int64)
        self.bigram = np.zeros(65536, dtype=np.int64)
        self._last = None
        self.gzip = zlib.compressobj(9, zlib.DEFLATED, 31)  # wbits 31: the gzip format
        self.xz = lzma.LZMACompressor(preset=9)
        self.gzip_bytes = self.xz_bytes = 0

    def update(self, block):
        block = np.frombuffer(block, dtype=np.uint8) if isinstance(block, (bytes, bytearray, memoryview)) \
            else np.asarray(block, dtype=np.uint8)
        if block.size == 0:
            return
        self.size += block.size
        raw = block.tobytes()
        self.sha256.update(raw)
        self.gzip_bytes += len(self.gzip.compress(raw))
        self.xz_bytes += len(self.xz.compress(raw))
        self.unigram += np.bincount(block, minlength=256)
        pairs = block[:-1].astype(np.int64) * 256 + block[1:]
        self.bigram += np.bincount(pairs, minlength=65536)
        if self._last is not None:
            self.bigram[self._last * 256 + int(block[0])] += 1
        self._last = int(block[-1])

    def result(self):
        bigram_joint = entropy_bits(self.bigram)
        first_of_pair = self.bigram.reshape(256, 256).sum(axis=1)
        gzip_bytes = self.gzip_bytes + len(self.gzip.flush())
        xz_bytes = self.xz_bytes + len(self.xz.flush())
        per_byte = 8.0 / max(self.size, 1)
        return {
            "bytes": int(self.size),
            "sha256": self.sha256.hexdigest(),
            "unigram_bpb": round(entropy_bits(self.unigram), 6),
            "bigram_bpb": round(bigram_joint - entropy_bits(first_of_pair), 6),
            "gzip_bpb": round(gzip_bytes * per_byte, 6),
            "xz_bpb": round(xz_bytes * per_byte, 6),
        }


BLOCK = 1 << 24


def stats_of(array):
    """ByteStats of an array-like of uint8, read in blocks (works on memmaps and block readers)."""
    stats = ByteStats()
    for start in range(0, len(array), BLOCK):
        stats.update(np.asarray(array[start:start + BLOCK]))
    return stats.result()
