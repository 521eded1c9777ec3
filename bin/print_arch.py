"""Print a model's tensors and parameter count (or, with --json, one JSON object)."""

import json

import typer

from runtime.cli import user_errors

app = typer.Typer(add_completion=False, pretty_exceptions_enable=False, help=__doc__)
MODELS = ("egg",)


@app.command()
@user_errors
def main(
    model: str = typer.Argument(..., help="Model family: egg."),
    n_layer: int = typer.Option(6, help="EGG blocks."),
    n_embd: int = typer.Option(256, help="EGG width."),
    as_json: bool = typer.Option(False, "--json", help="One JSON object: total_params, config, tensors."),
):
    from kernels.errors import BadInput
    from models.egg import EggConfig, EggModel

    if model not in MODELS:
        raise BadInput(f"unknown model {model!r}: choose one of {', '.join(MODELS)}")
    arch = EggModel(EggConfig(n_layer, n_embd)).architecture()
    if as_json:
        print(json.dumps(arch))
        return
    width = max(len(t["name"]) for t in arch["tensors"])
    print(f"{'tensor':<{width}}  {'shape':>12}  {'kind':>9}  {'params':>12}")
    for t in arch["tensors"]:
        shape = "x".join(map(str, t["shape"]))
        print(f"{t['name']:<{width}}  {shape:>12}  {t['kind']:>9}  {t['params']:>12,}")
    print(f"{'total':<{width}}  {'':>12}  {'':>9}  {arch['total_params']:>12,}")
    print("config: " + ", ".join(f"{k}={v}" for k, v in arch["config"].items()))


if __name__ == "__main__":
    app()
