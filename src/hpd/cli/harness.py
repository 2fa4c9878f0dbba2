"""(placeholder: this command group is not built yet; it registers nothing)."""

import typer


def register(app: typer.Typer) -> None:
    return None
