"""A plain PyTorch loop of CD-RGE or BPTT steps over the Table 1 multi-head LSTM, the peer of
bench/zorn_paper/table1_side_by_side.py and of bench/zorn_paper/table1.py's series cells. Run with a Python
that has torch; it imports nothing from eggnog.

    python bench/peers/table1_torch_loop.py --hidden 240 --heads 12 --batch 1024 --probes 96 --steps 2
    python bench/peers/table1_torch_loop.py --hidden 9600 --heads 64 --method bptt --lr 0.01 --device cuda

The model is eggnog's (models/lstm.py): embedding V -> E, W_in, per-head recurrence R[g, n] @ h_n,
gates i, f, z, o, output projection; vocabulary and input size 100. One fixed batch of 2 + 10 tokens
(11 recurrent steps, the loss over the 10 predicted positions). A step evaluates every probe as
L(theta + eps z) and L(theta - eps z) with Rademacher z, perturbing the parameters in place (z drawn
once per probe and kept while it is used), then applies theta -= lr sum_i c_i z_i. Under no_grad, all
cores in torch's thread pool. BPTT: autograd through the same loss and torch.optim.Adam (eggnog's
Table 1 BPTT optimiser). `--device cuda` runs it on the GPU (Rademacher directions drawn there; the
clock read after a synchronisation). Prints one JSON line: seconds per step (mean of --steps after
--warmup), the first and last loss in bits.
"""

import argparse
import json
import math
import time

import torch


def build(hidden, heads, vocab=100, inputs=100, seed=0, device="cpu"):
    g = torch.Generator().manual_seed(seed)
    d = hidden // heads

    def normal(*shape, std):
        return torch.randn(*shape, generator=g) * std

    tensors = (normal(inputs, 4 * hidden, std=1 / math.sqrt(inputs)), normal(4, heads, d, d, std=1 / math.sqrt(d)),
               torch.zeros(4, heads, d), torch.zeros(2, heads, d), normal(vocab, hidden, std=1 / math.sqrt(d)),
               torch.zeros(vocab), normal(vocab, inputs, std=1.0))
    return [t.to(device) for t in tensors]


def loss_tensor(params, tokens, heads):
    w_in, r, b, states0, w_proj, b_proj, embed = params
    batch, length = tokens.shape
    d = r.shape[2]
    wx = (embed[tokens[:, :-1]] @ w_in).view(batch, length - 1, 4, heads, d)
    h = states0[0].expand(batch, heads, d)
    c = states0[1].expand(batch, heads, d)
    outputs = []
    for t in range(length - 1):
        raw = wx[:, t] + torch.einsum("gndk,bnk->bgnd", r, h) + b
        i, f, z, o = torch.sigmoid(raw[:, 0]), torch.sigmoid(raw[:, 1]), torch.tanh(raw[:, 2]), torch.sigmoid(raw[:, 3])
        c = f * c + i * z
        h = o * torch.tanh(c)
        outputs.append(h.reshape(batch, -1))
    hs = torch.stack(outputs[1:], dim=1)  # positions 1.. predict tokens 2..
    logits = hs @ w_proj.T + b_proj
    return torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]), tokens[:, 2:].reshape(-1))


def loss(params, tokens, heads):
    return loss_tensor(params, tokens, heads).item()


def step(params, tokens, heads, probes, eps, lr, seed):
    g = torch.Generator(device=params[0].device).manual_seed(seed)
    update = [torch.zeros_like(p) for p in params]
    for _ in range(probes):
        z = [torch.randint(0, 2, p.shape, generator=g, device=p.device).float().mul_(2).sub_(1) for p in params]
        for p, zi in zip(params, z):
            p.add_(zi, alpha=eps)
        plus = loss(params, tokens, heads)
        for p, zi in zip(params, z):
            p.add_(zi, alpha=-2 * eps)
        minus = loss(params, tokens, heads)
        coef = (plus - minus) / (2 * eps * probes)
        for p, u, zi in zip(params, update, z):
            p.add_(zi, alpha=eps)
            u.add_(zi, alpha=coef)
    for p, u in zip(params, update):
        p.sub_(u, alpha=lr)


def bptt_step(params, tokens, heads, optimizer):
    optimizer.zero_grad()
    value = loss_tensor(params, tokens, heads)
    value.backward()
    optimizer.step()


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    for name, default in (("hidden", 240), ("heads", 12), ("batch", 1024), ("probes", 96), ("steps", 2),
                          ("warmup", 1)):
        parser.add_argument(f"--{name}", type=int, default=default)
    parser.add_argument("--lr", type=float, default=0.1)
    parser.add_argument("--method", choices=("cdrge", "bptt"), default="cdrge")
    parser.add_argument("--device", default="cpu", help="cpu or cuda")
    args = parser.parse_args()
    device = torch.device(args.device)
    sync = torch.cuda.synchronize if device.type == "cuda" else (lambda: None)
    params = build(args.hidden, args.heads, device=device)
    tokens = torch.randint(0, 100, (args.batch, 12), generator=torch.Generator().manual_seed(1)).to(device)
    if args.method == "bptt":
        for p in params:
            p.requires_grad_(True)
        optimizer = torch.optim.Adam(params, lr=args.lr)
        run = lambda s: bptt_step(params, tokens, args.heads, optimizer)  # noqa: E731
    else:
        run = lambda s: step(params, tokens, args.heads, args.probes, args.lr, args.lr, s)  # noqa: E731
    with torch.set_grad_enabled(args.method == "bptt"):
        first = loss(params, tokens, args.heads)
        for s in range(args.warmup):
            run(s)
        sync()
        start = time.perf_counter()
        for s in range(args.steps):
            run(args.warmup + s)
        sync()
        seconds = (time.perf_counter() - start) / args.steps
        last = loss(params, tokens, args.heads)
    print(json.dumps({"s_per_step": seconds, "steps_timed": args.steps, "method": args.method,
                      "device": torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu",
                      "torch": torch.__version__, "threads": torch.get_num_threads(),
                      "loss_first_bits": first / math.log(2), "loss_after_bits": last / math.log(2)}))


if __name__ == "__main__":
    main()
