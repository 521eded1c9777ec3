"""The authors' zero_order_rnn series trainer (rge_series_experiments.train) run on a problem that
bench/dynamics/zorn.py hands it, the peer of that bench. Run with a Python that has torch and numpy;
it imports nothing from eggnog, and it runs the authors' code from a checkout (--repo), unedited:

    python bench/peers/zorn_torch_train.py --repo CHECKOUT --problem PROBLEM.npz --init-out INIT.npz --steps 0
    python bench/peers/zorn_torch_train.py --repo CHECKOUT --problem PROBLEM.npz --init-in INIT.npz --method cdrge
    python bench/peers/zorn_torch_train.py --repo CHECKOUT --check  # versions and a hash of the code, as JSON

To run it on a CPU, four things are changed from outside, at run time: a stand-in `flashrnn` module
(imported by the script; the model itself falls back to nn.LSTM + nn.Linear when models.models finds
no FlashRNN, as on any machine without it), fp32 parameters instead of the fp16 the script gives
zero-order runs (fp16 on a CPU is 10-50x slower), no 10 s sleep at the end, and the task's batches:
get_examples_for_task returns the problem's batches in order (the first twice: the script draws one
for its "initial loss" before the loop), so both sides see the same samples. With --init-in the
model's tensors are loaded from that .npz after construction; --init-out writes them.

Every --eval-every steps (and at the end) the model is scored on the problem's held-out samples by the
authors' compute_task_loss (nats over their target positions) and by the mask the problem gives
(bits over every answer letter). Prints one JSON line: the logged loss of every step, the scores,
seconds per step.
"""

import argparse
import contextlib
import hashlib
import json
import math
import os
import sys
import time
import types
from pathlib import Path

import numpy as np
import torch

CODE_FILES = ("rge_series_experiments.py", "models/models.py", "tasks/tasks.py")
# the fallback model's tensors under the names of the .npz both sides read
TENSORS = {"embed": "embed.weight", "weight_ih": "fallback_lstm.weight_ih_l0",
           "weight_hh": "fallback_lstm.weight_hh_l0", "bias_ih": "fallback_lstm.bias_ih_l0",
           "bias_hh": "fallback_lstm.bias_hh_l0", "proj_weight": "fallback_proj.weight",
           "proj_bias": "fallback_proj.bias"}


def import_authors(repo):
    sys.path.insert(0, str(repo))
    import models.models  # noqa: F401  (finds no flashrnn: nn.LSTM fallback)

    stub = types.ModuleType("flashrnn")
    stub.flashrnn = types.ModuleType("flashrnn.flashrnn")
    stub.flashrnn.flashrnn = None  # never called: the fallback model does not use it
    sys.modules.update({"flashrnn": stub, "flashrnn.flashrnn": stub.flashrnn})
    with contextlib.redirect_stdout(sys.stderr):
        import rge_series_experiments as rse
    return rse


def code_hash(repo):
    digest = hashlib.sha256()
    for name in CODE_FILES:
        digest.update((Path(repo) / name).read_bytes())
    return digest.hexdigest()[:16]


def scorer(rse, tok, problem):
    """score(model) -> [clean nats, val nats, clean bits, val bits] on the problem's held-out samples."""
    sets = [(problem[name], torch.as_tensor(problem[name + "_mask"])) for name in ("clean", "val")]

    def score(model):
        nats, bits = [], []
        with torch.no_grad():
            for seqs, mask in sets:
                logits, _, _ = model(model.embed(torch.as_tensor(seqs, dtype=torch.long)))
                nats.append(float(rse.compute_task_loss(logits, seqs, tok, "copy")))
                ce = torch.nn.functional.cross_entropy(logits[:, :-1].float().transpose(1, 2),
                                                       torch.as_tensor(seqs[:, 1:], dtype=torch.long), reduction="none")
                bits.append(float((ce * mask).sum() / mask.sum()) / math.log(2.0))
        return nats + bits

    return score


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repo", required=True)
    parser.add_argument("--problem")
    parser.add_argument("--check", action="store_true")
    parser.add_argument("--method", choices=("cdrge", "bptt"), default="cdrge")
    parser.add_argument("--init-in")
    parser.add_argument("--init-out")
    parser.add_argument("--overfit", action="store_true")
    for name, default in (("steps", 1000), ("probes", 96), ("seed", 0), ("eval_every", 50), ("hidden", 32),
                          ("heads", 4), ("embed", 16), ("seq_length", 4)):
        parser.add_argument(f"--{name.replace('_', '-')}", type=int, default=default)
    parser.add_argument("--lr", type=float, default=0.1)
    args = parser.parse_args()
    rse = import_authors(args.repo)
    if args.check:
        print(json.dumps({"torch": torch.__version__, "numpy": np.__version__, "code_sha256": code_hash(args.repo),
                          "threads": torch.get_num_threads()}))
        return
    problem = dict(np.load(args.problem, allow_pickle=False))
    train = problem["train"].astype(np.int32)
    calls, state = [0], {"losses": [], "evals": [], "seconds": 0.0}
    tok = rse.CharTokenizer()
    score = scorer(rse, tok, problem)

    def examples(task, tok_, batch, seq_length, split="train", max_num=None):
        assert split == "train"  # validation is ours: the script's own runs every --log_interval steps
        batch_np = train[max(calls[0] - 1, 0)]
        calls[0] += 1
        return batch_np.copy()

    def lstm_fp32(*a, embed, dtype, **k):
        model = authors_lstm(*a, embed=embed.float(), dtype=torch.float32, **k)
        named = dict(model.named_parameters())
        if args.init_in:
            with torch.no_grad():
                for key, value in np.load(args.init_in, allow_pickle=False).items():
                    named[TENSORS[key]].copy_(torch.as_tensor(value))
        if args.init_out:
            np.savez(args.init_out, **{key: named[name].detach().numpy() for key, name in TENSORS.items()})
        state["model"] = model
        return model

    def timed_step(model, args_, batch_np, loss_closure, optimizer=None):
        step = len(state["losses"])
        if step % args.eval_every == 0:
            state["evals"].append([step, *score(model)])
        begin = time.perf_counter()
        out = authors_step(model, args_, batch_np, loss_closure, optimizer)
        state["seconds"] += time.perf_counter() - begin
        state["losses"].append(float(out["train_loss"][-1]))
        if (step + 1) % 50 == 0:
            print(f"step {step + 1}/{args.steps} loss {state['losses'][-1]:.4f}", file=sys.stderr, flush=True)
        return out

    authors_lstm, authors_step = rse.LSTM, rse.train_step
    rse.LSTM, rse.train_step, rse.get_examples_for_task = lstm_fp32, timed_step, examples
    rse.time = types.SimpleNamespace(time=time.time, sleep=lambda seconds: None)
    flags = ["--device", "cpu", "--model_type", "LSTM", "--task", "copy", "--seq_length", str(args.seq_length),
             "--hidden_size", str(args.hidden), "--num_heads", str(args.heads),
             "--head_size", str(args.hidden // args.heads), "--input_size", str(args.embed),
             "--micro_batch_size", str(train.shape[1]), "--learning_rate_and_epsilon", repr(args.lr),
             "--num_perturbations", str(args.probes), "--max_iterations", str(args.steps), "--distribution", "rad",
             "--log_interval", str(args.steps + 1), "--seed", str(args.seed)]
    flags += ["--use_bptt", "--use_adam"] if args.method == "bptt" else []
    flags += ["--overfit_to_one_batch_flag"] if args.overfit else []
    sys.argv = ["rge_series_experiments.py", *flags]
    run_args = rse.get_argument_parser()
    rse.set_seed(run_args.seed)
    with open(os.devnull, "w") as quiet, contextlib.redirect_stdout(quiet):  # the script prints every step
        rse.train(run_args)
    model = state["model"]
    state["evals"].append([len(state["losses"]), *score(model)])
    used = sum(p.numel() for n, p in model.named_parameters() if n in TENSORS.values())
    print(json.dumps({"train_loss": state["losses"], "evals": state["evals"],
                      "s_per_step": state["seconds"] / max(len(state["losses"]), 1), "torch": torch.__version__,
                      "threads": torch.get_num_threads(), "params": sum(p.numel() for p in model.parameters()),
                      "used_params": used, "flags": flags}))


if __name__ == "__main__":
    main()
