"""Print a model's tensors and parameter count (or, with --json, one JSON object)."""

import json

import typer

from eggnog.runtime.cli import user_errors
from eggnog.training.mingru_run import DEFAULT_DEPTH, DEFAULT_DIM, MinGruRunConfig

app = typer.Typer(add_completion=False, pretty_exceptions_enable=False, help=__doc__)
MODELS = ("egg", "mingru", "lstm", "dnc")
EGG_DEPTH, EGG_DIM = 6, 256  # nano-egg's size


@app.command()
@user_errors
def main(
    model: str = typer.Argument(..., help="Model family: egg, mingru, lstm or dnc."),
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
    vocab_size: int = typer.Option(100, help="LSTM/DNC vocabulary V."),
    memory_size: int = typer.Option(128, help="DNC memory rows."),
    head_size: int = typer.Option(128, help="DNC memory row width."),
    num_reads: int = typer.Option(1, help="DNC read heads."),
    as_json: bool = typer.Option(False, "--json", help="One JSON object: total_params, config, tensors."),
):
    from eggnog.runtime.errors import BadInput
    from eggnog.models.egg import EggConfig, EggModel
    from eggnog.models.mingru import MinGruModel

    if model not in MODELS:
        raise BadInput(f"unknown model {model!r}: choose one of {', '.join(MODELS)}")
    if model == "egg":
        depth, dim = EGG_DEPTH if depth is None else depth, EGG_DIM if dim is None else dim
        if depth < 1 or dim < 1:
            raise BadInput(f"--depth and --dim must be positive, got {depth} and {dim}")
        arch = EggModel(EggConfig(depth, dim)).architecture()
    elif model == "lstm":
        from eggnog.models.lstm import LstmConfig, LstmModel

        arch = LstmModel(LstmConfig(vocab_size=vocab_size, input_size=input_size, hidden_size=hidden_size,
                                    num_heads=num_heads)).architecture()
    elif model == "dnc":
        from eggnog.models.dnc import DncConfig, DncModel

        arch = DncModel(DncConfig(vocab_size, input_size, hidden_size, memory_size, head_size, num_reads)).architecture()
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


if __name__ == "__main__":
    app()
