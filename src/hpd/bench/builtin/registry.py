"""Simulated-tool registry: tool definitions, argument checking and execution.

A tool here is a TRAJECT-style catalog entry (``"<parent>: <API>"`` name, parameters typed with
TRAJECT's strings STRING / NUMBER / ENUM / BOOLEAN / DATE (YYYY-MM-DD)) plus a deterministic Python
function that *computes* its output from the arguments and the seeded :class:`World`. Outputs are
rendered as compact Python ``repr`` strings, like TRAJECT's recorded ``executed_output``.

Departures from TRAJECT (documented on purpose):
- ENUM options are machine-checked here (TRAJECT has free-text options only); the options are also
  written into the parameter description, so a catalog read through the TRAJECT loader still shows
  them to the model.
- Invalid input raises :class:`ToolInputError` (a ``ValueError``) with a one-line message; in the
  harness that becomes Pi's thrown-error tool result (``isError: true``).
"""

from __future__ import annotations

import datetime as _dt
import re
from dataclasses import dataclass, field
from typing import Any, Callable

TRAJECT_TYPES = ("STRING", "NUMBER", "ENUM", "BOOLEAN", "DATE (YYYY-MM-DD)")
_JSON_TYPE = {"STRING": "string", "NUMBER": "number", "ENUM": "string", "BOOLEAN": "boolean",
              "DATE (YYYY-MM-DD)": "string"}


class ToolInputError(ValueError):
    """Invalid tool call (unknown tool, bad or missing argument, unknown entity)."""


@dataclass(frozen=True)
class Param:
    name: str
    type: str
    description: str
    default: Any = ""
    options: tuple[str, ...] = ()

    def __post_init__(self):
        if self.type not in TRAJECT_TYPES:
            raise ValueError(f"bad param type {self.type!r}")

    def full_description(self) -> str:
        if self.options:
            return f"{self.description} One of: {', '.join(self.options)}."
        return self.description


@dataclass(frozen=True)
class ToolDef:
    parent: str
    api: str
    domain: str
    description: str
    parent_description: str
    fn: Callable[..., Any]                       # fn(world, **coerced_args) -> python object
    required: tuple[Param, ...] = ()
    optional: tuple[Param, ...] = ()
    output_summary: str = ""
    connected: tuple[tuple[str, tuple[str, ...]], ...] = field(default=())   # (tool name, params)

    @property
    def name(self) -> str:
        return f"{self.parent}: {self.api}"

    def catalog_entry(self) -> dict:
        """The 11-key TRAJECT ``tools/<Domain>_tool.json`` entry."""
        def plist(ps):
            return [{"name": p.name, "type": p.type, "description": p.full_description(),
                     "default": p.default} for p in ps]
        args = ", ".join(f'"{p.name}": {p.name}' for p in self.required + self.optional)
        code = (f"# offline simulated tool (hpd.bench.builtin); no network\n"
                f"from hpd.bench.builtin import execute\n\n"
                f"print(execute({self.name!r}, {{{args}}}))\n")
        return {
            "parent tool name": self.parent,
            "parent tool description": self.parent_description,
            "required_parameters": plist(self.required),
            "optional_parameters": plist(self.optional),
            "code": code,
            "tool name": self.name,
            "tool description": self.description,
            "API name": self.api,
            "domain name": self.domain,
            "output_info": {"output_info_summary": self.output_summary or self.description,
                            "output_format": "A Python-repr dict or list on one line."},
            "connected tools": [{"tool name": t, "connect params": [{"name": p} for p in ps]}
                                for t, ps in self.connected],
        }

    def json_schema(self) -> dict:
        """JSON Schema (object) with the TRAJECT transformer mapping (STRING->string, NUMBER->number,
        BOOLEAN->boolean, DATE/ENUM->string); ENUMs additionally carry ``enum``."""
        props = {}
        for p in self.required + self.optional:
            s: dict[str, Any] = {"type": _JSON_TYPE[p.type], "description": p.full_description()}
            if p.options:
                s["enum"] = list(p.options)
            props[p.name] = s
        return {"type": "object", "properties": props, "required": [p.name for p in self.required]}


# ----------------------------------------------------------------------------- argument coercion

def _coerce(tool: str, p: Param, v: Any) -> Any:
    where = f"{tool}: parameter '{p.name}'"
    if p.type == "NUMBER":
        if isinstance(v, bool):
            raise ToolInputError(f"{where} must be a number, got {v!r}")
        if isinstance(v, (int, float)):
            return v
        if isinstance(v, str):
            try:
                f = float(v.strip())
            except ValueError:
                raise ToolInputError(f"{where} must be a number, got {v!r}") from None
            return int(f) if f.is_integer() and re.fullmatch(r"\s*-?\d+\s*", v) else f
        raise ToolInputError(f"{where} must be a number, got {v!r}")
    if p.type == "BOOLEAN":
        if isinstance(v, bool):
            return v
        s = str(v).strip().lower()
        if s in ("true", "1", "yes"):
            return True
        if s in ("false", "0", "no"):
            return False
        raise ToolInputError(f"{where} must be true or false, got {v!r}")
    if isinstance(v, (dict, list)) or v is None:
        raise ToolInputError(f"{where} must be a string, got {v!r}")
    s = str(v).strip()
    if p.type == "DATE (YYYY-MM-DD)":
        try:
            _dt.date.fromisoformat(s) if re.fullmatch(r"\d{4}-\d{2}-\d{2}", s) else 1 / 0
        except (ValueError, ZeroDivisionError):
            raise ToolInputError(f"{where} must be a date YYYY-MM-DD, got {v!r}") from None
        return s
    if p.type == "ENUM":
        for o in p.options:
            if s.lower() == o.lower():
                return o
        raise ToolInputError(f"{where} must be one of {', '.join(p.options)}; got {v!r}")
    if not s:
        raise ToolInputError(f"{where} must not be empty")
    return s


def check_args(tool: ToolDef, args: dict | None) -> dict:
    """Validate and coerce ``args``; fill optional defaults. Raises :class:`ToolInputError`."""
    if args is not None and not isinstance(args, dict):
        raise ToolInputError(f"{tool.name}: arguments must be an object, got {type(args).__name__}")
    args = dict(args or {})
    known = {p.name: p for p in tool.required + tool.optional}
    unknown = sorted(k for k in args if k not in known)
    if unknown:
        raise ToolInputError(f"{tool.name}: unknown parameters {unknown}; valid parameters: "
                             f"{', '.join(known) or '(none)'}")
    # empty strings / None count as "not given" (as in TRAJECT's normalisation)
    args = {k: v for k, v in args.items() if v is not None and v != ""}
    missing = [p.name for p in tool.required if p.name not in args]
    if missing:
        raise ToolInputError(f"{tool.name}: Missing required parameters: {missing}")
    out = {}
    for p in tool.required + tool.optional:
        if p.name in args:
            out[p.name] = _coerce(tool.name, p, args[p.name])
        elif p.default != "":
            out[p.name] = p.default
    return out


def render_output(obj: Any) -> str:
    """Outputs are Python reprs (single quotes, True/None), like TRAJECT's ``executed_output``."""
    return repr(obj)


def num(x: float, nd: int = 2) -> int | float:
    """Round for display; integral values become ints (so '12' not '12.0' appears in outputs)."""
    r = round(float(x), nd)
    return int(r) if r.is_integer() else r
