"""A worker of `bin/train_es.py --mode coordinator --transport tcp`: start as many as you like, on any
node, at any time; each joins the running coordinator, catches up with the run and takes chunks of the
population until the run ends. A worker that dies or goes quiet has its chunks redone by others.

    EGGNOG_TOKEN=... python bin/es_worker.py --connect node001:12345
    srun -n 8 --gpus-per-task 1 python bin/es_worker.py --connect node001:12345 --token-file ~/.eggnog-token
"""

import typer

from eggnog.runtime.cli import cli_help, user_errors

# plain click help: rich truncates long flag names at 80 columns
app = typer.Typer(add_completion=False, pretty_exceptions_enable=False, rich_markup_mode=None)


@app.command(help=cli_help(__doc__))
@user_errors
def main(
    connect: str = typer.Option(..., help="HOST:PORT the coordinator listens on (its --listen).",
                                metavar="<host:port>"),
    token_file: str = typer.Option(None, help="File holding the shared token (else $EGGNOG_TOKEN).",
                                   metavar="<path>"),
    backend: str = typer.Option(None, help="auto, cpu or cuda (default: cuda when a GPU is usable)."),
    threads: int = typer.Option(None, help="CPU threads of the kernels (default: this task's share of the node)."),
    data: str = typer.Option(None, help="This node's copy of the run's corpus, when its path differs from the "
                                        "coordinator's (its content must be the same).", metavar="<path>"),
    reconnect_timeout: float = typer.Option(600.0, help="Seconds to keep asking a coordinator that is down or "
                                                        "restarting before giving up."),
):
    from eggnog.evolution.coordinator.tcp_worker import serve

    raise SystemExit(serve(connect, token_file, backend, threads, data, reconnect_timeout))


if __name__ == "__main__":
    app()
