"""minGRU-pytorch's minLM trained by BPTT, the peer of bench/throughput/mingru_side_by_side.py. Run with a Python
that has torch and minGRU-pytorch; it imports nothing from eggnog.

    python bench/peers/mingru_torch_step.py --dim 64 --depth 2 --batch 8 --seq 512 --steps 5
    python bench/peers/mingru_torch_step.py --dim 1024 --depth 8 --batch 8 --seq 2048 --device cuda

One step: the loss of a (batch, seq + 1) byte window (minLM's return_loss), backward, AdamW, gradients
zeroed. Vocabulary 256, expansion 1.5, feed-forward multiplier 4 (minLM's defaults), all cores in
torch's thread pool, or on the GPU with `--device cuda` (fp32, the clock read after a synchronisation).
Prints one JSON line: seconds per step (median of --steps after --warmup).
"""

import argparse
import json
import time

import torch
from minGRU_pytorch.minLM import minLM


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    for name, default in (("dim", 64), ("depth", 2), ("batch", 8), ("seq", 512), ("steps", 5), ("warmup", 1)):
        parser.add_argument(f"--{name}", type=int, default=default)
    parser.add_argument("--device", default="cpu", help="cpu or cuda")
    args = parser.parse_args()
    device = torch.device(args.device)
    sync = torch.cuda.synchronize if device.type == "cuda" else (lambda: None)
    torch.manual_seed(0)
    model = minLM(num_tokens=256, dim=args.dim, depth=args.depth, ff_mult=4, expansion=1.5).to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    data = torch.randint(0, 256, (args.batch, args.seq + 1)).to(device)
    times = []
    for i in range(args.warmup + args.steps):
        sync()
        start = time.perf_counter()
        loss = model(data, return_loss=True)
        loss.backward()
        opt.step()
        opt.zero_grad()
        sync()
        if i >= args.warmup:
            times.append(time.perf_counter() - start)
    print(json.dumps({"s_per_step": sorted(times)[len(times) // 2], "steps_timed": args.steps,
                      "torch": torch.__version__,
                      "device": args.device, "threads": torch.get_num_threads(), "loss": loss.item()}))


if __name__ == "__main__":
    main()
