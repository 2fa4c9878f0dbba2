"""Tool lookup and the public :func:`execute` entry point."""

from __future__ import annotations

import re
from typing import Any

from .domains import FOREIGN, MODULES
from .registry import ToolDef, ToolInputError, check_args, render_output
from .world import get_world

TOOLS: dict[str, ToolDef] = {t.name: t for m in MODULES.values() for t in m.TOOLS}
_CANON = {re.sub(r"\s+", " ", n).strip().casefold(): n for n in TOOLS}


def domains() -> list[str]:
    return list(MODULES)


def get_tool(name: str) -> ToolDef:
    """Exact name first, then whitespace/case-insensitive. Raises :class:`ToolInputError`."""
    t = TOOLS.get(name)
    if t is None:
        t = TOOLS.get(_CANON.get(re.sub(r"\s+", " ", str(name)).strip().casefold(), ""))
    if t is None:
        raise ToolInputError(f"Tool '{name}' not found in available tools")
    return t


def domain_catalog(domain: str) -> list[ToolDef]:
    """Tools written to ``tools/<domain>_tool.json``: the domain's own tools + its foreign distractors."""
    if domain not in MODULES:
        raise ToolInputError(f"unknown built-in domain {domain!r}; known: {', '.join(MODULES)}")
    return list(MODULES[domain].TOOLS) + [TOOLS[n] for n in FOREIGN[domain]]


def call(tool_name: str, args: dict | None, world_seed: int = 0) -> tuple[Any, str]:
    """Run a tool; return (python object, rendered output string)."""
    t = get_tool(tool_name)
    obj = t.fn(get_world(world_seed), **check_args(t, args))
    return obj, render_output(obj)


def execute(tool_name: str, args: dict | None = None, world_seed: int = 0) -> str:
    """Execute any built-in tool and return its output string (Python repr, as recorded in the data).

    Raises :class:`ToolInputError` (a ``ValueError``) with a one-line message on an unknown tool,
    unknown/missing/ill-typed arguments or an unknown entity (city, product, order, ...).
    """
    return call(tool_name, args, world_seed)[1]
