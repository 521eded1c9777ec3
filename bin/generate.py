"""Generate bytes from a trained model's checkpoint (EGG, d-eggs' transformer, MinGRU), streamed to
stdout (non-printable bytes escaped). The transformer samples with d-eggs' integer sampler; a run on
d-eggs' token data starts from an empty prompt and decodes its tokens through the data's decoding.bin."""

import sys
from pathlib import Path

import typer

from eggnog.runtime.cli import cli_help, user_errors

# plain click help: rich truncates long flag names at 80 columns
app = typer.Typer(add_completion=False, pretty_exceptions_enable=False, rich_markup_mode=None)


def one_byte(token):
    return bytes([token])


@app.command(help=cli_help(__doc__))
@user_errors
def main(
    checkpoint: Path = typer.Argument(..., help="Run directory (its latest checkpoint) or checkpoint file."),
    prompt: str = typer.Option("", help="Prompt text."),
    prompt_file: Path = typer.Option(None, help="Read the prompt bytes from this file instead."),
    length: int = typer.Option(256, help="Bytes to generate."),
    temperature: float = typer.Option(1.0, help="Sampling temperature (0: the most likely byte)."),
    min_p: float = typer.Option(0.03, help="Drop bytes below min-p times the most likely one."),
    presence_penalty: float = typer.Option(0.2, help="Subtracted from the logit (nats) of bytes already seen."),
    top_k: int = typer.Option(0, help="Keep the k most likely bytes (0: all)."),
    top_p: float = typer.Option(1.0, help="Keep the smallest set with this much probability."),
    seed: int = typer.Option(0),
    backend: str = typer.Option("cpu", help="auto, cpu or cuda."),
):
    from eggnog.kernels.core.backend import select_backend
    from eggnog.kernels.core.first_compile import compile_notice, first_step_done
    from eggnog.models.egg import EggConfig, EggModel
    from eggnog.models.generate import generate_egg, generate_mingru, generate_transformer
    from eggnog.models.mingru import MinGruModel
    from eggnog.models.sampling import Sampler, degenerate, escape_byte
    from eggnog.runtime.checkpoint import load_checkpoint
    from eggnog.runtime.errors import BadInput
    from eggnog.runtime.rundir import current_names
    from eggnog.training.mingru.run import model_config_of

    sampler = Sampler(temperature, min_p, presence_penalty, top_k, top_p)
    sampler.check()
    if length < 0:
        raise BadInput(f"--length must be non-negative, got {length}")
    if prompt_file is not None:
        try:
            text = prompt_file.read_bytes()
        except OSError as e:
            raise BadInput(f"cannot read prompt file {str(prompt_file)!r}: {e.strerror}") from None
    else:
        text = prompt.encode()
    from eggnog.corpus.deggs_tokens import deggs_paths, read_decoding

    decode = one_byte  # unless the run read d-eggs tokens
    arrays, record = load_checkpoint(checkpoint)
    meta = record.get("meta", {})
    if meta.get("model") == "egg":
        cfg = current_names(meta["config"])
        model, generate = EggModel(EggConfig(cfg["depth"], cfg["dim"])), generate_egg
    elif meta.get("model") == "transformer":
        from dataclasses import fields

        from eggnog.evolution.transformer_es_config import TransformerEsRunConfig

        cfg = current_names(meta["config"])
        names = [f.name for f in fields(TransformerEsRunConfig) if f.name in cfg]
        stored = TransformerEsRunConfig(**{name: cfg[name] for name in names})
        if sampler.top_k or sampler.top_p < 1.0:
            raise BadInput("d-eggs' sampler has no --top-k or --top-p: use --temperature, --min-p and "
                           "--presence-penalty")
        model, generate = stored.build_model(), generate_transformer
        if stored.data and deggs_paths(stored.data) is not None:
            if text:
                raise BadInput("this run reads d-eggs tokens and there is no tokenizer here: give no prompt")
            decode = read_decoding(deggs_paths(stored.data)[1]).__getitem__
    elif meta.get("model") == "mingru":
        model, generate = MinGruModel(model_config_of(meta)), generate_mingru
    else:
        raise BadInput(f"checkpoint holds a {meta.get('model')!r} model; this script knows: egg, transformer, mingru")
    chosen = select_backend(backend)
    notice = compile_notice(f"generate {meta['model']}")
    if notice:
        print(notice, file=sys.stderr, flush=True)  # stderr: the sample alone goes to stdout
    sys.stdout.write("".join(map(escape_byte, text)))
    produced = []
    for token in generate(model, arrays["params"], text, length, sampler, seed, chosen):
        first_step_done()
        produced.append(token)
        sys.stdout.write("".join(map(escape_byte, decode(token))))
        sys.stdout.flush()
    sys.stdout.write("\n")
    unit = degenerate(produced)
    if unit is not None:
        print(f"note: the sample ends repeating {b''.join(map(decode, unit))!r}; a young model's best guess "
              "often is: try a higher --temperature, a lower --min-p or a larger --presence-penalty",
              file=sys.stderr)


if __name__ == "__main__":
    app()
