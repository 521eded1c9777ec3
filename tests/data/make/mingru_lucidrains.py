"""Rebuild tests/data/mingru_lucidrains_chunk1.npz with minGRU-pytorch 0.2.1's own `minLM`, float64 on the CPU.

The parameters are minLM's own initialisation after `torch.manual_seed(0)` (drawn in float32, then the model is
cast to float64); the loss is minLM's `return_loss=True` path and its gradient is torch's autograd of it.

    git clone https://github.com/lucidrains/minGRU-pytorch && git -C minGRU-pytorch checkout 38b26e1   # v0.2.1
    python -m venv mingru-env && . mingru-env/bin/activate
    pip install torch==2.13.0 einops    # the CPU build is enough
    python tests/data/make/mingru_lucidrains.py --source minGRU-pytorch --out mingru_lucidrains_chunk1.npz \\
        --check tests/data/mingru_lucidrains_chunk1.npz
"""

import math
import sys
from pathlib import Path

import numpy as np
from golden_compare import parser, require_commit, require_version, save_and_check

COMMIT = "38b26e119a2e85e70ea53825dc09b91b021afa06"  # tagged 0.2.1 on PyPI
TORCH_VERSION = "2.13.0"
CONFIG = dict(num_tokens=256, dim=32, depth=2, ff_mult=4, expansion=1.5, enable_conv=False)
PHRASE = b"Were RNNs all we needed? "
BATCH, CHUNK, FIRST_LOGITS = 2, 256, 64
# float64 all through; reruns on other machines or torch builds differ by summation order (~1e-15)
FLOAT_TOLERANCE = 1e-12


def tokens():
    """The phrase repeated, cut into two rows of 257 bytes: inputs [:, :256], targets [:, 1:]."""
    text = PHRASE * (BATCH * (CHUNK + 1) // len(PHRASE) + 1)
    return np.frombuffer(text[:BATCH * (CHUNK + 1)], dtype=np.uint8).astype(np.int64).reshape(BATCH, CHUNK + 1)


def rebuild():
    import minGRU_pytorch
    import torch
    from minGRU_pytorch.minLM import minLM

    print(f"minLM from {Path(minGRU_pytorch.__file__).parent}")
    torch.manual_seed(0)
    model = minLM(**CONFIG).double()
    batch = torch.from_numpy(tokens())
    loss = model(batch, return_loss=True)
    loss.backward()
    with torch.no_grad():
        logits = model(batch[:, :CHUNK])[:, :FIRST_LOGITS]
    names = [name for name, _ in model.named_parameters()]
    arrays = {"chunk1_tokens": batch.numpy(), "param_names": np.array(names)}
    arrays.update({f"param.{name}": p.detach().numpy().copy() for name, p in model.named_parameters()})
    arrays["chunk1_loss_nats"] = np.float64(loss.item())
    arrays["chunk1_loss_bits"] = np.float64(loss.item() / math.log(2))
    arrays.update({f"chunk1_grad.{name}": p.grad.numpy().copy() for name, p in model.named_parameters()})
    arrays["chunk1_logits_first64"] = logits.numpy().copy()
    return arrays


def main():
    flags = parser(__doc__.splitlines()[0], "a git checkout of minGRU-pytorch at 38b26e1 (v0.2.1)", "torch")
    args = flags.parse_args()
    require_commit(args.source, COMMIT, "minGRU-pytorch")
    sys.path.insert(0, str(Path(args.source).resolve()))
    import torch

    require_version("torch", torch.__version__.split("+")[0], TORCH_VERSION, args.unpinned)
    arrays = rebuild()
    save_and_check(args, arrays, FLOAT_TOLERANCE)


if __name__ == "__main__":
    main()
