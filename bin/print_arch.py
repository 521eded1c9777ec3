"""Print a model's tensors and parameter count (or, with --json, one JSON object).

    python bin/print_arch.py transformer --preset d-eggs     # d-eggs' own sizes: 5,778,944 parameters
"""

import json
import sys

import typer

from eggnog.runtime.cli import cli_help, user_errors
from eggnog.training.mingru.run import DEFAULT_DEPTH, DEFAULT_DIM, MinGruRunConfig

# plain click help: rich truncates long flag names at 80 columns
app = typer.Typer(add_completion=False, pretty_exceptions_enable=False, rich_markup_mode=None)
MODELS = ("egg", "transformer", "mingru", "lstm", "dnc")
EGG_DEPTH, EGG_DIM = 6, 256  # nano-egg's size


@app.command(help=cli_help(__doc__))
@user_errors
def main(
    model: str = typer.Argument(..., help="Model family: egg, transformer, mingru, lstm or dnc."),
    dim: int = typer.Option(None, "--dim", "--n-embd", help="Width of the EGG or the MinGRU.",
                            show_default=f"EGG {EGG_DIM}; MinGRU from --params, else {DEFAULT_DIM}"),
    depth: int = typer.Option(None, "--depth", "--n-layer", help="Blocks of the EGG or the MinGRU.",
                              show_default=f"EGG {EGG_DEPTH}; MinGRU from --params, else {DEFAULT_DEPTH}"),
    params: str = typer.Option(None, help="MinGRU parameter budget, k/m/g = 1024^n (gruboros sizing)."),
    expansion_factor: float = typer.Option(1.5, help="MinGRU inner width / dim."),
    ff_mult: float = typer.Option(4.0, help="MinGRU feed-forward width / dim."),
    hidden_size: int = typer.Option(240, help="LSTM hidden size H (all heads); DNC controller width."),
    num_heads: int = typer.Option(12, help="LSTM heads N (H must be divisible by N)."),
    input_size: int = typer.Option(100, help="LSTM/DNC embedding width E."),
    head_dim: int = typer.Option(64, help="Transformer head width (--preset d-eggs: d-eggs' sizes)."),
    vocab_size: int = typer.Option(None, help="Vocabulary: transformer 256, LSTM/DNC 100.",
                                   show_default="transformer 256, LSTM/DNC 100"),
    memory_size: int = typer.Option(128, help="DNC memory rows."),
    head_size: int = typer.Option(128, help="DNC memory row width."),
    num_reads: int = typer.Option(1, help="DNC read heads."),
    as_json: bool = typer.Option(False, "--json", help="One JSON object: total_params, config, tensors."),
):
    from eggnog.models.egg import EggConfig, EggModel
    from eggnog.models.mingru import MinGruModel
    from eggnog.runtime.errors import BadInput

    if model not in MODELS:
        raise BadInput(f"unknown model {model!r}: choose one of {', '.join(MODELS)}")
    if depth is not None and depth > MAX_LISTED_DEPTH:
        raise BadInput(f"the table lists every tensor of every block: --depth must be at most {MAX_LISTED_DEPTH:,}, "
                       f"got {depth:,}")
    lstm_vocab = 100 if vocab_size is None else vocab_size
    if model == "transformer":
        from eggnog.models.egg_transformer import TransformerConfig, TransformerModel

        depth, dim = 4 if depth is None else depth, 256 if dim is None else dim
        cfg = TransformerConfig(depth, dim, head_dim, 256 if vocab_size is None else vocab_size)
        arch = TransformerModel(cfg).architecture()
    elif model == "egg":
        depth, dim = EGG_DEPTH if depth is None else depth, EGG_DIM if dim is None else dim
        if depth < 1 or dim < 1:
            raise BadInput(f"--depth and --dim must be positive, got {depth} and {dim}")
        arch = EggModel(EggConfig(depth, dim)).architecture()
    elif model == "lstm":
        from eggnog.models.lstm import LstmConfig, LstmModel

        arch = LstmModel(LstmConfig(vocab_size=lstm_vocab, input_size=input_size, hidden_size=hidden_size,
                                    num_heads=num_heads)).architecture()
    elif model == "dnc":
        from eggnog.models.dnc import DncConfig, DncModel

        dnc = DncConfig(lstm_vocab, input_size, hidden_size, memory_size, head_size, num_reads)
        arch = DncModel(dnc).architecture()
    else:
        sizing = MinGruRunConfig(params=params, dim=dim, depth=depth, expansion_factor=expansion_factor,
                                 ff_mult=ff_mult).resolved()
        arch = MinGruModel(sizing.model_config()).architecture()
    if as_json:
        print(json.dumps(arch))
        return
    width = max(len(t["name"]) for t in arch["tensors"])
    print(f"{'tensor':<{width}}  {'shape':>12}  {'kind':>9}  {'params':>13}")
    for t in arch["tensors"]:
        shape = "x".join(map(str, t["shape"]))
        print(f"{t['name']:<{width}}  {shape:>12}  {t['kind']:>9}  {t['params']:>13,}")
    print(f"{'total':<{width}}  {'':>12}  {'':>9}  {arch['total_params']:>13,}")
    print("config: " + ", ".join(f"{k}={v}" for k, v in arch["config"].items()))


MAX_LISTED_DEPTH = 100_000
PRESETS = {"d-eggs": ["--depth", "4", "--dim", "256", "--head-dim", "64", "--vocab-size", "8192"]}


def cli():
    """The program (`python bin/print_arch.py`, the `eggnog-print-arch` command): `--preset NAME` becomes its flags."""
    from eggnog.evolution.transformer_es_config import with_preset

    sys.argv[1:] = with_preset(sys.argv[1:], PRESETS)
    app()


if __name__ == "__main__":
    cli()
