"""The GPU memory of one zero-order RNN run or island (zorn/rge/trainer.py, zorn/rge/run.py, zorn/rge/island.py),
counted from the arrays its code places on the device, in float32 words:

- throughout: the parameters theta, the probes' work copy, the optimiser's state where it lives on the
  device (--dist-mode seeds: momentum's buffer, Adam's m and v); the BPTT baseline: its parameters and
  optimiser state;
- a step: a forward over the batch's tokens (`forward_words` a token, `fixed_words` a pass) for
  one probe, or --probe-batch probes at once (each probe's full copy of the tensors, then every
  activation that many times); with a dense estimate (momentum, Adam, --dist-mode reduce) one
  more vector; the BPTT baseline: the forward's cache, the backward's transients and the gradients
  (named and flat);
- validating: the parameters copied once more and a forward over a validation pass.
The peak is what is held throughout plus the largest of the phases.
"""

from dataclasses import replace

from eggnog.kernels.core.backend import device_free_bytes
from eggnog.models.mingru import MinGruConfig
from eggnog.training.memory_plan import WORD, check_device_fits, device_line, mingru_forward_words, peak
from eggnog.zorn.tasks import VOCAB
from eggnog.zorn.validation import sample_tokens, validation_bounds, validation_chunk

OPTIMIZER_STATE = {"sgd": 0, "momentum": 1, "adam": 2}
AUTO_PROBE_BYTES = 2**30  # --probe-batch 0 on a GPU: the perturbed tensors and activations of a pass


def with_probe_batch(cfg, n_params, backend_name, ranks=1):
    """`cfg` with --probe-batch 0 resolved: on a GPU, for the LSTM, as many of a rank's evaluations a
    pass as AUTO_PROBE_BYTES holds (a fixed budget, not the free memory, so that a run gives the same
    numbers on every GPU); 1 elsewhere (a pass of one probe is the CPU's fastest)."""
    if cfg.probe_batch or cfg.solver == "bptt":
        return cfg
    evaluations = cfg.probes // ranks * (2 if cfg.solver == "cdrge" else 1)
    if cfg.model != "lstm" or backend_name != "cuda":
        return replace(cfg, probe_batch=1)
    longest = cfg.curriculum_max or cfg.max_seq_len
    per_probe = WORD * (n_params + cfg.batch_size * sample_tokens(cfg, longest) * forward_words(cfg, keep=False)
                        + fixed_words(cfg, cfg.batch_size))
    return replace(cfg, probe_batch=max(1, min(evaluations, AUTO_PROBE_BYTES // per_probe)))


def forward_words(cfg, keep):
    """float32 words a token (a row of batch x length) of one forward holds at its peak: the hidden
    states, the logits and the cross-entropy's gradient; with `keep` (BPTT) what the backward needs and
    its transients too."""
    v = VOCAB
    if cfg.model == "lstm":
        h = cfg.hidden_size
        return (11 * h if keep else 2 * h) + 2 * v + 1
    if cfg.model == "dnc":
        h, rw, c = cfg.hidden_size, cfg.num_reads * cfg.head_size, cfg.input_size + cfg.num_reads * cfg.head_size
        outputs = cfg.input_size + 3 * h + 3 * rw + 2 * v + 1  # embeddings, controller and reads of every step, logits
        m, w = cfg.memory_size, cfg.head_size
        step = 2 * c + 9 * h + 2 * rw + 4 * w + 2 + 3 * m * w + (cfg.num_reads + 1) * m  # a step's cache
        return outputs + (step if keep else 0)
    model = MinGruConfig(cfg.dim, cfg.depth, cfg.expansion_factor, cfg.ff_mult)
    if not keep:
        return mingru_forward_words(model, perturbed=False)
    d, e, f = model.dim, model.dim_inner, model.ff_inner
    return cfg.depth * (4 * d + 3 * e + 2 * f + 2) + 512 + 2 * d + 1 + 8 * d + 3 * e + 2 * f


def fixed_words(cfg, batch):
    """float32 words a forward pass over `batch` rows holds whatever their length: the LSTM's input
    table (V x 4H); the DNC's memory and its norm, before and after a step's write."""
    if cfg.model == "lstm":
        return VOCAB * 4 * cfg.hidden_size
    if cfg.model == "dnc":
        return 4 * batch * cfg.memory_size * cfg.head_size
    return 0


def rge_device_memory(cfg, n_params):
    """{what: bytes} one rank (or island) holds on the GPU at its peak; `cfg` an RgeRunConfig."""
    n = n_params
    longest = cfg.curriculum_max or cfg.max_seq_len
    tokens = cfg.batch_size * sample_tokens(cfg, longest)
    pass_words = tokens * forward_words(cfg, keep=False) + fixed_words(cfg, cfg.batch_size)
    if cfg.solver == "bptt":
        held = {"parameters and optimiser state": WORD * n * (1 + OPTIMIZER_STATE[cfg.optimizer])}
        step = {"activations and gradients": WORD * (tokens * forward_words(cfg, keep=True)
                                                     + fixed_words(cfg, cfg.batch_size) + 2 * n)}
    else:
        on_device = OPTIMIZER_STATE[cfg.optimizer] if cfg.dist_mode == "seeds" else 0
        held = {"parameters, work copy and optimiser state": WORD * n * (2 + on_device)}
        dense = n if cfg.optimizer != "sgd" or cfg.dist_mode == "reduce" else 0
        probes = max(1, cfg.probe_batch) if cfg.model == "lstm" else 1
        step = {f"{probes} probe(s) at once": WORD * (max(probes * (n + pass_words) if probes > 1 else pass_words,
                                                          dense))}
    rows = min(validation_chunk(cfg), cfg.val_samples)
    length = sample_tokens(cfg, cfg.max_seq_len if cfg.task == "char_lm" else validation_bounds(cfg)[1])
    validation = {"validation": WORD * (n + rows * length * forward_words(cfg, False) + fixed_words(cfg, rows))}
    return peak(held, [step, validation] if cfg.validate_every else [step])



def check_rge_fits(cfg, model, backend):
    """The header line of the GPU memory a run or island of `cfg` holds (None on the CPU); BadInput,
    before anything is allocated, where it cannot fit the GPU's free memory."""
    free = device_free_bytes(backend)
    needs = rge_device_memory(cfg, model.n_params)
    check_device_fits(needs, free, "a smaller --batch-size, --max-seq-len (or --curriculum-max), --probe-batch "
                                   "or model needs less")
    return device_line(needs, free)
