"""Small document trees for corpus tests."""

import os


def make_docs(root, count=6, seed=0, binary=True):
    """Write `count` documents (some in a subdirectory) and return {relative path: bytes} in the
    order a directory source is read (sorted by path)."""
    import numpy as np

    rng = np.random.default_rng(seed)
    docs = {}
    for i in range(count):
        rel = os.path.join("sub", f"doc{i}.dat") if i % 2 else f"doc{i}.txt"
        size = int(rng.integers(200, 3000))
        if binary:
            data = rng.integers(1, 256, size=size, dtype=np.uint8).tobytes()  # no 0: docs stay splittable
        else:
            data = (f"document {i}\n" * (size // 12)).encode()
        path = os.path.join(root, rel)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "wb") as f:
            f.write(data)
        docs[rel] = data
    return {rel: docs[rel] for rel in sorted(docs)}
