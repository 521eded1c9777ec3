"""minGRU-pytorch's minLM trained as its train.py does, the peer of bench/dynamics/mingru.py. Run with a
Python that has torch and minGRU-pytorch; it imports nothing from eggnog (nor numpy).

    python bench/peers/mingru_torch_train.py --plan PLAN.json --dim 64 --depth 2
    python bench/peers/mingru_torch_train.py --check  # versions, as a JSON line

The plan (written by bench/dynamics/mingru.py) names the raw byte files of the train and validation
splits, the start offset of every training window of every step, the validation windows and how
often to validate. Each step: minLM(return_loss=True) on a (batch, seq + 1) window, backward, the
gradient norm clipped (train.py: 0.5), AdamW (weight decay 0: train.py's Adam), gradients zeroed.
Vocabulary 256, expansion 1.5, feed-forward multiplier 4, PyTorch's default initialisation.
Prints one JSON line per validation and, last, one line with the whole curve in bits per byte.
"""

import argparse
import json
import math
import sys
import time
from importlib.metadata import version
from pathlib import Path

import torch
from minGRU_pytorch.minLM import minLM


def read_bytes(path):
    return torch.frombuffer(bytearray(Path(path).read_bytes()), dtype=torch.uint8)


def windows(data, starts, length):
    return torch.stack([data[s:s + length] for s in starts]).long()


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--plan")
    parser.add_argument("--check", action="store_true", help="Print the versions and stop.")
    for name, default in (("dim", 64), ("depth", 2), ("seed", 0)):
        parser.add_argument(f"--{name}", type=int, default=default)
    parser.add_argument("--lr", type=float, default=1e-4)
    parser.add_argument("--clip", type=float, default=0.5)
    args = parser.parse_args()
    if args.check or not args.plan:
        print(json.dumps({"torch": torch.__version__, "minGRU_pytorch": version("minGRU-pytorch"),
                          "threads": torch.get_num_threads()}))
        return
    plan = json.loads(Path(args.plan).read_text())
    train, val = read_bytes(plan["train_file"]), read_bytes(plan["val_file"])
    length = plan["window"]
    val_batch = windows(val, plan["val_starts"], length)
    torch.manual_seed(args.seed)
    model = minLM(num_tokens=256, dim=args.dim, depth=args.depth, ff_mult=4, expansion=1.5)
    opt = torch.optim.AdamW(model.parameters(), lr=args.lr, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0)
    to_bits = 1.0 / math.log(2.0)  # minLM's loss is in nats

    def validate(step):
        model.eval()
        with torch.no_grad():
            bpb = model(val_batch, return_loss=True).item() * to_bits
        model.train()
        print(json.dumps({"step": step, "val_bpb": bpb}), flush=True)
        return [step, bpb]

    train_bpb, val_curve, seconds = [], [], 0.0
    steps = len(plan["train_starts"])
    for step, starts in enumerate(plan["train_starts"]):
        if step % plan["val_every"] == 0:
            val_curve.append(validate(step))
        batch = windows(train, starts, length)
        begin = time.perf_counter()
        loss = model(batch, return_loss=True)
        loss.backward()
        if args.clip > 0:
            torch.nn.utils.clip_grad_norm_(model.parameters(), args.clip)
        opt.step()
        opt.zero_grad()
        seconds += time.perf_counter() - begin
        train_bpb.append(loss.item() * to_bits)
        print(f"step {step + 1}/{steps} train {train_bpb[-1]:.3f} bits/byte", file=sys.stderr, flush=True)
    val_curve.append(validate(steps))
    print(json.dumps({"train_bpb": train_bpb, "val": val_curve, "s_per_step": seconds / max(steps, 1),
                      "torch": torch.__version__, "threads": torch.get_num_threads(),
                      "params": sum(p.numel() for p in model.parameters())}))


if __name__ == "__main__":
    main()
