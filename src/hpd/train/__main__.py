"""``python -m hpd.train --config ... --out ...``: the train command alone (for ``accelerate launch -m hpd.train``)."""

import typer

from .cli_impl import register_train

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
