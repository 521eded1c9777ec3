"""Rebuild tests/data/lstm_zorn_code9.npz with zero_order_rnn's `LSTM` (commit bd1104d) and FlashRNN (d73fb52).

The parameters are zero_order_rnn's own: `models.models.LSTM` built as its train() builds it (an nn.Embedding
first, then the LSTM), in float64 after `torch.manual_seed(0)`. That LSTM's forward runs FlashRNN only on a CUDA
device (on the CPU it swaps in an unrelated nn.LSTM), so this script replays its FlashRNN path step for step
(input projection, states0 expanded over the batch, `flashrnn(..., function="lstm")`, output projection) with
FlashRNN's own "vanilla" backend, its PyTorch implementation of the same kernel, in float64. The loss is the one
distributed_rge.py's teacher_forcing_loss_emb_parallel defines for a Table 1 batch (x = tokens[:, :2],
y = tokens[:, 2:]): mean cross-entropy of tokens[:, 3:] from positions 2..10, in nats. That function demotes to
float32 and its forward runs without autograd, so the loss is written out here in float64 with autograd on;
states0 takes a gradient too. Tokens come from `np.random.seed(1); np.random.randint(0, 100, (3, 12))`.

    git clone https://github.com/stopthrowingrocks/zero_order_rnn && git -C zero_order_rnn checkout bd1104d
    git clone https://github.com/NX-AI/flashrnn && git -C flashrnn checkout d73fb52
    python -m venv zorn-env && . zorn-env/bin/activate
    pip install torch==2.13.0 einops packaging    # the CPU build is enough; FlashRNN's CUDA parts are not used
    python tests/data/make/lstm_zorn.py --source zero_order_rnn --flashrnn flashrnn --out lstm_zorn_code9.npz \\
        --check tests/data/lstm_zorn_code9.npz
"""

import importlib.util
import sys
from pathlib import Path

import numpy as np
from golden_compare import parser, refuse, require_commit, require_version, save_and_check

COMMIT = "bd1104da9239b0142a08e3e17e1636c8cb54d078"
FLASHRNN_COMMIT = "d73fb52b1b492ce9f9b2c107660b49079add5eb1"
TORCH_VERSION = "2.13.0"
VOCAB, HIDDEN, HEADS = 100, 24, 4
BATCH, LENGTH, X_LENGTH = 3, 12, 2
FLOAT_TOLERANCE = 1e-12


def import_models_py(source):
    """zero_order_rnn's models/models.py, loaded by path under its own name (eggnog has a `models` folder too)."""
    spec = importlib.util.spec_from_file_location("zero_order_rnn_models", Path(source) / "models" / "models.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def rebuild(source):
    import torch
    from torch import nn

    zorn = import_models_py(source)
    if not zorn.FLASH_OK:
        refuse("zero_order_rnn's models.py could not import FlashRNN: pass its checkout as --flashrnn and "
               "install its Python dependencies (einops, packaging).")
    flashrnn = zorn.flashrnn  # the function models.py imported, as its forward calls it
    np.random.seed(1)
    tokens = torch.from_numpy(np.random.randint(0, VOCAB, (BATCH, LENGTH)).astype(np.int64))
    torch.manual_seed(0)
    embed = nn.Embedding(VOCAB, VOCAB, dtype=torch.float64)
    model = zorn.LSTM(input_size=VOCAB, output_size=VOCAB, hidden_size=HIDDEN, memory_size=0, head_size=0,
                      num_heads=HEADS, embed=embed, device=torch.device("cpu"), dtype=torch.float64)
    model.states0.requires_grad_(True)

    # LSTM.forward's FlashRNN path (models/models.py, "FlashRNN fast path"), with the vanilla backend
    x = model.embed(tokens)
    wx = torch.einsum("bte,eg->btg", x, model.W_in).view(BATCH, LENGTH, model.G, model.N, model.D).contiguous()
    states0 = model.states0.expand(-1, BATCH, -1, -1, -1).contiguous()
    states, _ = flashrnn(wx, model.R, model.b, states=states0, function="lstm", backend="vanilla", dtype="float64")
    h = states[0].reshape(BATCH, LENGTH, model.N * model.D)
    logits = torch.einsum("btn,vn->btv", h, model.W_proj) + model.b_proj

    # teacher forcing over y = tokens[:, 2:]: predictions of y[:, 1:] from positions 2..LENGTH-2
    predicted = logits[:, X_LENGTH:LENGTH - 1].reshape(-1, VOCAB)
    loss = nn.functional.cross_entropy(predicted, tokens[:, X_LENGTH + 1:].reshape(-1))
    loss.backward()

    params = {name: p for name, p in model.named_parameters() if not name.startswith("fallback")}
    arrays = {"tokens": tokens.numpy(), "param_names": np.array(list(params))}
    arrays.update({f"param.{name}": p.detach().numpy().copy() for name, p in params.items()})
    arrays["loss_code9"] = np.float64(loss.item())
    arrays.update({f"grad_code9.{name}": p.grad.numpy().copy() for name, p in params.items()})
    arrays["logits"] = logits.detach().numpy().copy()
    return arrays


def main():
    flags = parser(__doc__.splitlines()[0], "a git checkout of zero_order_rnn at bd1104d", "torch")
    flags.add_argument("--flashrnn", required=True, help="a git checkout of FlashRNN at d73fb52")
    args = flags.parse_args()
    require_commit(args.source, COMMIT, "zero_order_rnn")
    require_commit(args.flashrnn, FLASHRNN_COMMIT, "FlashRNN")
    sys.path.insert(0, str(Path(args.flashrnn).resolve()))
    import torch

    require_version("torch", torch.__version__.split("+")[0], TORCH_VERSION, args.unpinned)
    arrays = rebuild(args.source)
    save_and_check(args, arrays, FLOAT_TOLERANCE)


if __name__ == "__main__":
    main()
