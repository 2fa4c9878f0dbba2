"""Options shared by several commands: ``--dtype`` of every model command (:mod:`hpd.policy.dtype`)."""

from __future__ import annotations

from typing import Any

import typer

from hpd.policy.dtype import DTYPE_HELP, canonical


def _check_dtype(value: str | None) -> str | None:
    """The canonical name (``auto`` | ``float32`` | ``bfloat16``) of ``--dtype``, or a one-line usage error."""
    if value is None:
        return None
    try:
        return canonical(value)
    except ValueError as exc:
        raise typer.BadParameter(str(exc)) from None


def dtype_option(default: str | None = "auto", note: str = "") -> Any:
    """``--dtype auto|float32|bfloat16`` (also ``fp32``, ``bf16``); its help says what ``auto`` means."""
    return typer.Option(default, "--dtype", help=f"{DTYPE_HELP} {note}".strip(), callback=_check_dtype,
                        metavar="auto|float32|bfloat16")
