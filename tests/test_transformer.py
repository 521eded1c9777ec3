"""d-eggs' integer transformer: its parameter count, its tables pinned against their formulas, and its
training runs (resume bit for bit, bad input refused with one sentence). The forward's three
implementations are compared by the generated kernel tests (op transformer_epoch)."""

import json
import math

import numpy as np
import pytest

from eggnog.corpus.reader import open_corpus
from eggnog.evolution.es_trainer import EsTrainer
from eggnog.evolution.transformer_es_config import TransformerEsRunConfig, with_preset
from eggnog.kernels.core.backend import Backend
from eggnog.kernels.transformer.epoch import proxy_loss
from eggnog.kernels.transformer.tables import EXP_LUT, GELU_LUT, rope_table
from eggnog.models.egg_transformer import TransformerConfig, TransformerModel
from eggnog.runtime.checkpoint import load_checkpoint
from eggnog.runtime.errors import BadInput
from eggnog.runtime.rundir import read_jsonl
from eggnog.runtime.world import init_world
from tests.es_helpers import tiny_corpus
from tests.helpers import assert_user_error, run_script

TINY = dict(depth=1, dim=8, head_dim=4, population=8, group_size=2, tokens_per_update=6, steps=4, validate_every=2,
            checkpoint_every=2, val_rows=4, val_tokens=8, seed=5)


@pytest.mark.parametrize("vocab,total", [(8192, 5_778_944), (256, 3_747_328)])
def test_parameter_count_of_d_eggs_sizes(vocab, total):
    arch = TransformerModel(TransformerConfig(4, 256, 64, vocab)).architecture()
    assert arch["total_params"] == total
    groups = {"embedding": 0, "init_mlp": 0, "layers.0.": 0, "ln_f": 0}
    for t in arch["tensors"]:
        for prefix in groups:
            groups[prefix] += t["params"] if t["name"].startswith(prefix) else 0
    assert groups == {"embedding": vocab * 256 + 256, "init_mlp": 526_080, "layers.0.": 788_736, "ln_f": 512}


def test_print_arch_preset_and_single_flags():
    preset = run_script("print_arch.py", "transformer", "--preset", "d-eggs", "--json")
    assert preset.returncode == 0, preset.stderr
    assert json.loads(preset.stdout)["total_params"] == 5_778_944
    single = run_script("print_arch.py", "transformer", "--depth", "4", "--dim", "256", "--head-dim", "64",
                        "--vocab-size", "256", "--json")
    assert json.loads(single.stdout)["total_params"] == 3_747_328
    assert_user_error(run_script("print_arch.py", "transformer", "--dim", "100"), "--head-dim 64", "divide --dim 100")


def test_tables_follow_their_formulas():
    assert EXP_LUT[0] == 1 << 18 and EXP_LUT[6] == round(2**18 / math.e) and EXP_LUT[-1] == 0
    assert all(EXP_LUT[i] == round(2**18 * math.exp(-i / 6)) for i in range(256))
    rope = rope_table(5, 8)
    assert rope.shape == (5, 4, 2) and rope[0].tolist() == [[1 << 20, 0]] * 4
    for p, i in ((1, 0), (4, 1), (3, 3)):
        theta = 10000.0 ** (-2 * i / 8)
        assert rope[p, i].tolist() == [round(math.cos(p * theta) * 2**20), round(math.sin(p * theta) * 2**20)]
    gelu = lambda z: z * 0.5 * (1 + math.erf(z / math.sqrt(2)))  # noqa: E731
    assert GELU_LUT[128] == 0 and GELU_LUT[128 + 16] == round(16 * gelu(1.0)) == 13
    assert GELU_LUT[0] == 0 and GELU_LUT[255] == 127 and GELU_LUT[128 - 16] == round(16 * gelu(-1.0))


def test_evaluation_memory_is_stated_and_refused_with_what_would_fit():
    cfg = TransformerEsRunConfig(depth=4, dim=256, head_dim=64, vocab_size=8192, tokens_per_update=64)
    model = cfg.build_model()
    per_member = model.evaluation_bytes(64)
    assert 20_000 < per_member < 2 * 4 * 64 * 256  # noise rows and vectors: K and V stay in the kernel's shared memory
    line = cfg.memory_line(model, 40_960, None)
    assert "40960 members" in line and f"{40_960 * per_member / 2**20:,.1f} MiB" in line
    # the parameters, AdamW's state and the padded weights come first; then a member's windows and scratch
    fixed = model.n_params * (1 + 12) + model.launch_bytes(64)
    fits = int((0.9 * 2**30 - fixed) // (per_member + 4 * 65))
    with pytest.raises(BadInput, match=f"at most {fits} members fit at once"):
        cfg.memory_line(model, 40_960, 2**30)
    assert "GPU memory per rank" in cfg.memory_line(model, fits, 2**30)
    wide = TransformerEsRunConfig(depth=1, dim=512, head_dim=64, tokens_per_update=64)
    with pytest.raises(BadInput, match="the GPU kernel takes --dim up to 256"):
        wide.memory_line(wide.build_model(), 8, 2**34)
    assert "members evaluated at once" in wide.memory_line(wide.build_model(), 8, None)  # no GPU: the CPU twin


def test_preset_flags_come_first_so_the_users_win():
    argv = with_preset(["--preset", "d-eggs", "--population", "64"])
    assert argv[:2] == ["--model", "transformer"] and argv[-2:] == ["--population", "64"]
    assert with_preset(["transformer", "--preset", "d-eggs"], {"d-eggs": ["--dim", "256"]}) == \
        ["transformer", "--dim", "256"]


def train(tmp_path, name, steps, resume=False, **overrides):
    cfg = TransformerEsRunConfig(**{**TINY, "steps": steps, **overrides})
    run_dir = tmp_path / name
    (run_dir / "checkpoints").mkdir(parents=True, exist_ok=True)
    trainer = EsTrainer(cfg, init_world(), Backend("cpu"), open_corpus(tiny_corpus(tmp_path)))
    if resume:
        trainer.restore(run_dir)
    trainer.run(run_dir)
    return load_checkpoint(run_dir)


@pytest.mark.parametrize("optimizer", ["adamw", "ztest"])
def test_resume_equals_uninterrupted_run(tmp_path, optimizer):
    straight, record = train(tmp_path, "straight", 4, optimizer=optimizer)
    assert record["meta"]["model"] == "transformer"
    initial = TransformerEsRunConfig(**TINY).build_model().init_params(TINY["seed"])
    assert np.any(straight["params"] != initial)
    train(tmp_path, "split", 2, optimizer=optimizer)
    resumed, _ = train(tmp_path, "split", 4, resume=True, optimizer=optimizer)
    assert set(straight) == set(resumed) and all(np.array_equal(straight[k], resumed[k]) for k in straight)
    logged = read_jsonl(tmp_path / "split" / "metrics.jsonl")
    assert [r["step"] for r in logged] == [1, 2, 3, 4] and all(np.isfinite(r["train_bpb"]) for r in logged)
    assert all(r["train_deggs_proxy"] > 0 for r in logged)


def test_proxy_loss_follows_d_eggs_formula():
    # 8 (floor(log2 sum EXP_LUT[max - l]) - 18) + max - l_target per row, over unclipped logits
    logits = np.array([[0, 0], [10, 0], [300, 0], [-5, -5]], np.int64)
    targets = np.array([0, 1, 1, 0])
    sums = [2 << 18, (1 << 18) + EXP_LUT[10], (1 << 18) + EXP_LUT[255], 2 << 18]
    expected = [8 * (math.floor(math.log2(s)) - 18) for s in sums] + np.array([0, 10, 300, 0])
    assert proxy_loss(logits, targets).tolist() == expected.tolist() == [8, 10, 300, 8]


def test_generate_samples_with_d_eggs_sampler_and_refuses_what_it_lacks(tmp_path):
    train(tmp_path, "run", 2)
    text = run_script("generate.py", tmp_path / "run", "--prompt", "import ", "--length", "12", "--seed", "3")
    assert text.returncode == 0, text.stderr
    again = run_script("generate.py", tmp_path / "run", "--prompt", "import ", "--length", "12", "--seed", "3")
    assert text.stdout.startswith("import ") and len(text.stdout) >= 7 + 12 and again.stdout == text.stdout
    refused = run_script("generate.py", tmp_path / "run", "--top-k", "3")
    assert_user_error(refused, "no --top-k or --top-p")
    assert refused.stdout == ""


@pytest.mark.parametrize("changes,message", [
    (dict(head_dim=3), "--head-dim 3 must be even and divide --dim 8"),
    (dict(noise="normal"), "unknown --noise 'normal'"),
    (dict(adaptive_noise=True), "--adaptive-noise is built for the EGG only"),
    (dict(population=7), "group size"),
])
def test_bad_transformer_settings_are_refused(changes, message):
    with pytest.raises(BadInput, match=message):
        cfg = TransformerEsRunConfig(**{**TINY, **changes})
        cfg.check(1)
        cfg.model()


def test_script_refuses_bad_input_with_one_sentence_and_writes_nothing(tmp_path):
    corpus = tiny_corpus(tmp_path)
    result = run_script("train_es.py", "--model", "transformer", "--data", corpus, "--run-dir", tmp_path / "run",
                        "--dim", "10", "--head-dim", "4")
    assert_user_error(result, "--head-dim 4 must be even and divide --dim 10")
    assert not (tmp_path / "run").exists()
    assert_user_error(run_script("train_es.py", "--preset", "tiny"), "unknown --preset 'tiny'")


def write_deggs_data(folder, tokens, vocab, decoding_vocab=None):
    """d-eggs' input.bin (uint32 tokens) and decoding.bin (token t decodes to '<t>')."""
    folder.mkdir(parents=True, exist_ok=True)
    np.asarray(tokens, "<u4").tofile(folder / "input.bin")
    with open(folder / "decoding.bin", "wb") as f:
        f.write((decoding_vocab or vocab).to_bytes(4, "little"))
        for t in range(decoding_vocab or vocab):
            text = f"<{t}>".encode()
            f.write(len(text).to_bytes(4, "little") + text)
    return folder


def test_d_eggs_token_data_trains_in_bits_per_token_and_generates_through_decoding_bin(tmp_path):
    data = write_deggs_data(tmp_path / "data", np.arange(6000) * 7 % 300, 300)
    run_dir = tmp_path / "run"
    result = run_script("train_es.py", "--model", "transformer", "--data", data / "input.bin", "--vocab-size", "300",
                        "--run-dir", run_dir, "--steps", "2", "--population", "8", "--group-size", "2", "--dim", "8",
                        "--head-dim", "4", "--tokens-per-update", "6", "--val-rows", "4", "--val-tokens", "8")
    assert result.returncode == 0, result.stderr
    assert "vocabulary 300" in result.stdout and "bits/token" in result.stdout
    text = run_script("generate.py", run_dir, "--length", "5")
    assert text.returncode == 0, text.stderr
    assert text.stdout.count("<") == 5 and text.stdout.count(">") == 5
    assert_user_error(run_script("generate.py", run_dir, "--prompt", "x"), "no tokenizer here")


@pytest.mark.parametrize("tokens,vocab,decoding_vocab,message", [
    (np.arange(100) % 50, 60, 50, "has 50 tokens but --vocab-size is 60"),
    (np.arange(100) % 70, 60, None, "holds token 69, outside a vocabulary of 60"),
])
def test_bad_d_eggs_data_is_refused(tmp_path, tokens, vocab, decoding_vocab, message):
    from eggnog.corpus.deggs_tokens import open_deggs

    data = write_deggs_data(tmp_path / "data", tokens, vocab, decoding_vocab)
    with pytest.raises(BadInput, match=message):
        open_deggs(data, 0.1, vocab)


def test_damaged_d_eggs_files_are_refused(tmp_path):
    from eggnog.corpus.deggs_tokens import open_deggs, read_decoding

    data = write_deggs_data(tmp_path / "data", np.arange(100) % 50, 50)
    whole = (data / "decoding.bin").read_bytes()
    (data / "decoding.bin").write_bytes(whole[:-3])
    with pytest.raises(BadInput, match="ends inside token 49 of 50"):
        read_decoding(data / "decoding.bin")
    (data / "decoding.bin").write_bytes(whole)
    (data / "input.bin").write_bytes((data / "input.bin").read_bytes()[:-1])
    with pytest.raises(BadInput, match="not a whole number of 4-byte tokens"):
        open_deggs(data, 0.1, 50)


def test_decoding_one_token_at_a_time_equals_reading_the_whole_context():
    """The KV cache generation keeps: prefill then single tokens give, at every step, the logits and
    cache of the whole context read at once, and the epoch's own last logits."""
    from eggnog.kernels.transformer.epoch_cpu import run_decode, run_epoch

    model = TransformerModel(TransformerConfig(2, 16, 8, 256, 8, 4, 6, 6, 6, 7))
    params = model.init_params(3)
    context = np.random.default_rng(4).integers(0, 256, 12).astype(np.int32)
    keys, values = np.zeros((2, 12, 16), np.int8), np.zeros((2, 12, 16), np.int8)
    logits = run_decode(params, context[:5], keys, values, 0, model.spec)
    for n in range(5, 12):
        whole_keys, whole_values = np.zeros_like(keys), np.zeros_like(values)
        whole = run_decode(params, context[:n], whole_keys, whole_values, 0, model.spec)
        np.testing.assert_array_equal(logits, whole)
        np.testing.assert_array_equal(keys[:, :n], whole_keys[:, :n])
        np.testing.assert_array_equal(values[:, :n], whole_values[:, :n])
        window = np.append(context[:n], 0)[None, :]
        np.testing.assert_array_equal(logits, run_epoch(params, window, np.zeros(40, np.int64), 0, model.spec,
                                                        False)[1][0])
        logits = run_decode(params, context[n:n + 1], keys, values, n, model.spec)


def test_generation_past_the_cache_rereads_the_last_half(monkeypatch):
    """Past MAX_CONTEXT tokens the cache restarts from the last half of the context: the tokens are
    those of a generator that re-reads that half itself."""
    from eggnog.models import generate
    from eggnog.models.sampling import Sampler

    model = TransformerModel(TransformerConfig(1, 8, 4, 256, 8, 4, 6, 6, 6, 7))
    params = model.init_params(1)
    monkeypatch.setattr(generate, "MAX_CONTEXT", 8)
    tokens = list(generate.generate_transformer(model, params, [5, 6, 7], 20, Sampler(), 2, Backend("cpu")))
    assert len(tokens) == 20
    reads = []
    real = generate.transformer_decode

    def recording(kernels, p, toks, keys, values, position, spec):
        reads.append((list(toks), position))
        return real(kernels, p, toks, keys, values, position, spec)

    monkeypatch.setattr(generate, "transformer_decode", recording)
    assert list(generate.generate_transformer(model, params, [5, 6, 7], 20, Sampler(), 2, Backend("cpu"))) == tokens
    context = [5, 6, 7] + tokens
    assert reads[0] == ([5, 6, 7], 0) and reads[1] == ([tokens[0]], 3)
    assert max(position for _, position in reads) == 7
    refills = [i for i, (_, position) in enumerate(reads) if position == 0 and i > 0]
    assert refills
    for i in refills:  # read i follows the i-th sampled token: the context then holds 3 + i tokens
        assert reads[i][0] == context[3 + i - 4:3 + i]


def test_validation_reads_each_row_in_windows_of_the_training_context():
    """A row longer than the window the model trains on is scored window by window, each from an empty
    cache, every byte once (positions past the training window were never trained)."""
    from types import SimpleNamespace

    from eggnog.evolution.es_trainer import val_loglik
    from eggnog.kernels.transformer.epoch_cpu import run_epoch

    cfg = TransformerEsRunConfig(**{**TINY, "tokens_per_update": 4})
    model = cfg.build_model()
    params = model.init_params(2)
    val = np.random.default_rng(5).integers(0, 256, 40).astype(np.uint8)
    rows = val[:2 * 11].reshape(2, 11)  # 10 scored bytes a row: windows of 4, 4 and 2
    spec_zero = np.zeros(len(model.layout), np.int64)
    expected = sum(int(run_epoch(params, rows[:, a:b], spec_zero, 0, model.spec, False)[0][:, 0].sum())
                   for a, b in ((0, 5), (4, 9), (8, 11)))
    got = val_loglik(model, cfg, Backend("cpu"), params, 0, SimpleNamespace(val=val), np.arange(2), 10)
    assert got == expected
    whole = int(run_epoch(params, rows, spec_zero, 0, model.spec, False)[0][:, 0].sum())
    assert whole != expected
