"""``python -m hpd.train --config ... --out ...``: the train command alone (for ``accelerate launch -m hpd.train``).

A command line, not part of the library: it sits on the CLI floor (docs/architecture.md, Layers) and takes the
command from :mod:`hpd.cli.train`."""

import typer

from hpd.cli.train import register_train

app = typer.Typer(add_completion=False, pretty_exceptions_enable=False)
register_train(app)


@app.callback()
def _root() -> None:
    """hpd train"""


if __name__ == "__main__":
    import sys
    if len(sys.argv) < 2 or sys.argv[1] != "train":
        sys.argv.insert(1, "train")
    app()
