"""The `hpd` command: a thin layer over the library. Each command group lives in its own module."""

from __future__ import annotations

import importlib

import typer

app = typer.Typer(
    name="hpd",
    help=(
        "Harness Policy Distillation: replay reference trajectories through the Pi agent loop, "
        "compile control documents at every model-call boundary, verify teacher actions in the "
        "harness, train a three-view LoRA student and evaluate it natively."
    ),
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)



@app.callback()
def _root() -> None:
    """Harness Policy Distillation toolkit."""


# Command modules, in pipeline order. Each defines `register(app)`.
COMMAND_MODULES = ["demo", "data", "harness", "model", "replay", "teach", "train", "eval", "probe", "report", "serve", "export", "bfcl", "study"]

for _name in COMMAND_MODULES:
    importlib.import_module(f"hpd.cli.{_name}").register(app)


def main() -> None:
    app()
