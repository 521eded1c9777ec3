"""The GPU memory of one integer EGGROLL rank (evolution/eggroll.py: the EGG, the transformer, a gossip
EGG island), counted from the arrays its code places on the device:

- throughout: the int8 parameters, AdamW's m, v and accumulator (float32, --optimizer adamw), the noise
  gains (--adaptive-noise), the members' hidden states (int8, the EGG) and the scratch an epoch keeps for
  the next (`model.kept_bytes`: the fused EGG kernel's noise rows and vectors);
- evaluating the members: their windows and what the model's epoch takes per member
  (`model.evaluation_bytes`: noise rows, perturbed vectors, scores) and once per launch
  (`model.launch_bytes`);
- validating: a copy of the parameters, the validation windows, their states and their evaluation;
- updating (adamw): one tensor's int64 votes and the pairs' fitness.
The peak is what is held throughout plus the largest of the three.
"""

import math

import numpy as np

from eggnog.evolution.noise_overlay import initial_overlay
from eggnog.training.memory_plan import peak


def evaluation(model, count, steps, windows_of=1):
    """Bytes of `count` members evaluated at once over windows of `steps` tokens (`windows_of` windows each)."""
    windows = count * windows_of
    token = np.dtype(model.token_dtype).itemsize
    return int(windows * ((steps + 1) * token + model.evaluation_bytes(steps)) + model.launch_bytes(steps))


def int_eggroll_memory(cfg, model, members):
    """{what: bytes} one rank holds on the GPU at its peak with `members` members; `cfg` an EsRunConfig."""
    n, (layers, width) = model.n_params, model.state_dims
    held = {"parameters": n, "AdamW state": 12 * n if cfg.optimizer == "adamw" else 0,
            "noise gains": initial_overlay(model).size if cfg.adaptive_noise else 0,
            "members' states": layers * width * members}
    kept = held["epoch scratch kept between epochs"] = model.kept_bytes(members)
    steps = cfg.tokens_per_update
    context = getattr(model, "context", None)
    val_steps = min(cfg.val_tokens, context) if context else cfg.val_tokens
    val_windows = math.ceil(cfg.val_tokens / val_steps)
    phases = [{f"evaluation of {members} members": evaluation(model, members, steps) - kept},
              {"validation": n + layers * width * cfg.val_rows + evaluation(model, cfg.val_rows, val_steps,
                                                                             val_windows)}]
    if cfg.optimizer == "adamw":
        phases.append({"update votes": 8 * max(t.size for t in model.tensors) + cfg.population // 2})
    return peak(held, phases)
