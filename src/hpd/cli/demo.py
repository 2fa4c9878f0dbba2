"""`hpd demo`: the whole HPD pipeline on the built-in benchmark (grows as stages land)."""

from __future__ import annotations

import typer
from rich.console import Console


def register(app: typer.Typer) -> None:
    @app.command()
    def demo() -> None:
        """Run the HPD pipeline end to end on the built-in benchmark, offline, on a CPU."""
        console = Console()
        console.print("[bold]hpd demo[/bold]: the pipeline stages are being built; nothing runs yet.")
