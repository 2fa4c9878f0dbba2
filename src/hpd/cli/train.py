"""`hpd train --config FILE [--data RECORDS] --out DIR [--resume] [KEY=VALUE ...]` (logic: hpd.train)."""

import typer


def register(app: typer.Typer) -> None:
    from hpd.train.cli_impl import register_train
    register_train(app)
