"""The GPU memory of one float EGGROLL rank (evolution/float_eggroll.py, the MinGRU LM), counted from
the arrays its code places on the device, in float32 words:

- throughout: the optimiser's vector and state (sf-adamw z, v; adamw m, v; sgd momentum);
- evaluating the members: every matrix's factors A and B of every member (r (rows + cols) each), the
  members' perturbed vectors, the constants the perturbed norms and biases use, then the forward's
  activations over all members' tokens (training/memory_plan.mingru_forward_words) and their losses;
- updating: the factors of one matrix for every pair of the population, the named estimate and its
  flat copy (2 P);
- validating: the evaluation point (sf-adamw's x) and the forward over the validation rows.
The peak is what is held throughout plus the largest of the three.
"""

from eggnog.training.memory_plan import OPTIMIZER_STATE, WORD, mingru_forward_words, peak


def float_eggroll_memory(cfg, model, members):
    """{what: bytes} one rank holds on the GPU at its peak with `members` members; `cfg` a FloatEsRunConfig."""
    n, r, tokens = model.n_params, cfg.perturbation_rank, members * cfg.tokens_per_update
    matrices = [shape for _, shape, kind, _ in model.specs if kind == "matrix"]
    vectors = sum(shape[0] for _, shape, kind, _ in model.specs if kind != "matrix")
    d, f = model.cfg.dim, model.cfg.ff_inner
    words_per_token = mingru_forward_words(model.cfg)
    held = {"parameters and optimiser state": WORD * n * (1 + OPTIMIZER_STATE[cfg.optimizer])}
    vector_noise = 0 if cfg.freeze_vectors else members * (vectors + 2 * d + f)
    phases = [{f"noise of {members} members": WORD * (members * r * sum(sum(s) for s in matrices) + vector_noise),
               "activations": WORD * tokens * words_per_token + 2 * tokens},
              {"update": WORD * (cfg.population // 2 * r * max(sum(s) for s in matrices) + 2 * n)},
              {"validation": WORD * (n + cfg.val_rows * cfg.val_tokens * mingru_forward_words(model.cfg, False))}]
    return peak(held, phases)
