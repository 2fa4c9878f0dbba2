"""The TRAJECT-Bench tool catalog: ``tools/*.json`` -> ``CatalogTool`` with JSON Schema parameters.

Type mapping (the repo's ``utils/*_tool_transformer.py``): STRING/string -> ``string``, NUMBER -> ``number``,
INTEGER -> ``integer``, BOOLEAN -> ``boolean``, DATE* -> ``string`` (format stated in the description),
ENUM -> ``string`` (the options live only in the free-text description), unknown -> ``string``.
``required`` = names in ``required_parameters``. The catalog ``default`` is a RapidAPI *example* value, so it
is shown as JSON Schema ``examples``, never as ``default``.

Departures, each measured on the gold data (docs/traject-bench.md sec 2.3, 9.2) and applied so that the reference
trajectories are executable through a validating harness:

* a catalog-required parameter stays ``required`` only if *every scorable gold call* of that tool supplies it
  (gold omits catalog-required params in 749 steps);
* if some scorable gold value of a parameter is not valid JSON for the mapped type (gold sends ``"10"`` for a
  NUMBER in most steps), the property type becomes the union of the mapped type and the observed JSON types;
* parameter names used by gold but absent from the catalog are accepted by the replay executor but never shown.

These relaxations are environment facts derived from the loaded tasks (see ``Catalog.observe``), not labels.

Lookup (``Catalog.resolve``): full-name identity after ``canon_name``; then a unique ``alnum`` alias; then
path templates (catalog names containing ``{...}`` match any non-``/`` segment). Several catalog names contain
more than one ``": "``; we never split names, identity is the full string.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hpd.bench.canon import alnum, canon_name, is_empty

TYPE_MAP = {"STRING": "string", "NUMBER": "number", "INTEGER": "integer", "BOOLEAN": "boolean", "ENUM": "string",
            "ARRAY": "array", "OBJECT": "object"}   # ARRAY/OBJECT: imported traces (hpd.bench.traces), not in TRAJECT


def json_type_of_param(ptype: str) -> str:
    """TRAJECT parameter type string -> JSON Schema type (see module docstring)."""
    t = str(ptype or "").strip()
    if t.upper().startswith("DATE"):
        return "string"
    return TYPE_MAP.get(t.upper(), "string")


def json_type_of_value(v: Any) -> str:
    if isinstance(v, bool):
        return "boolean"
    if isinstance(v, int):
        return "integer"
    if isinstance(v, float):
        return "number"
    if isinstance(v, str):
        return "string"
    if isinstance(v, list):
        return "array"
    if isinstance(v, dict):
        return "object"
    return "null"


def _fits(jtype: str, vtype: str) -> bool:
    return jtype == vtype or (jtype == "number" and vtype == "integer")


@dataclass(eq=False)
class CatalogTool:
    """One catalog entry. ``name`` is the full ``tool name`` (identity); ``key`` its ``canon_name``."""

    name: str
    description: str
    parent: str
    api: str
    domain: str
    required: list[dict]
    optional: list[dict]
    source: str = ""           # relative path of the tools file it came from
    key: str = ""
    _names: list | None = field(default=None, repr=False)
    _types: dict | None = field(default=None, repr=False)

    def __post_init__(self) -> None:
        self.key = canon_name(self.name)

    def param_names(self) -> list[str]:
        if self._names is None:
            self._names = [str(p.get("name", "")).strip() for p in self.required + self.optional if p.get("name")]
        return self._names

    def param_types(self) -> dict[str, str]:
        if self._types is None:
            self._types = {}
            for p in self.required + self.optional:
                if p.get("name"):
                    self._types.setdefault(str(p["name"]).strip(), str(p.get("type", "")))
        return self._types


@dataclass
class ToolFacts:
    """What scorable gold calls of one tool reveal about its real interface (see module docstring)."""

    n_calls: int = 0
    always_supplied: set[str] | None = None          # intersection of supplied names over gold calls
    used_names: set[str] = field(default_factory=set)
    value_types: dict[str, set[str]] = field(default_factory=dict)
    values: dict[str, list[Any]] = field(default_factory=dict)   # for type checks in the executor


class Catalog:
    """All tool definitions of a data folder, indexed by canonical name; per-file domain lists."""

    def __init__(self, defs: list[CatalogTool]):
        self.defs: dict[str, CatalogTool] = {}
        self.by_file: dict[str, list[str]] = {}
        for d in defs:
            self.defs.setdefault(d.key, d)       # first definition wins (files read in sorted order)
            lst = self.by_file.setdefault(d.source, [])
            if d.key not in lst:
                lst.append(d.key)
        aliases: dict[str, set[str]] = {}
        for k, d in self.defs.items():
            aliases.setdefault(alnum(d.name), set()).add(k)
        self._alias = {a: next(iter(ks)) for a, ks in aliases.items() if len(ks) == 1}
        self._templates = []
        for k in self.defs:
            if "{" in k and "}" in k:
                parts = re.split(r"\{[^}]*\}", k)
                pat = "[^/]+".join(re.escape(p) for p in parts)
                self._templates.append((re.compile("^" + pat + "$"), k))
        self.facts: dict[str, ToolFacts] = {}
        self._schema_cache: dict[str, dict] = {}
        self._type_enforced: dict[tuple, bool] = {}
        self._resolve_cache: dict[str, str | None] = {}

    # ---- loading -------------------------------------------------------------------------------
    @classmethod
    def load(cls, data_dir: Path) -> "Catalog":
        defs: list[CatalogTool] = []
        tdir = Path(data_dir) / "tools"
        files = sorted(tdir.glob("*.json")) if tdir.is_dir() else []
        # all_tools.json (if present) is the concatenation of the domain files: read it last.
        files.sort(key=lambda p: (p.name == "all_tools.json", p.name))
        for f in files:
            rel = f.relative_to(data_dir).as_posix()
            try:
                entries = json.loads(f.read_text(encoding="utf-8"))
            except (OSError, ValueError) as e:
                raise ValueError(f"cannot read tool file {f}: {e}") from e
            if not isinstance(entries, list):
                continue
            for e in entries:
                if not isinstance(e, dict) or not e.get("tool name"):
                    continue
                defs.append(CatalogTool(
                    name=str(e["tool name"]),
                    description=str(e.get("tool description") or e.get("parent tool description") or ""),
                    parent=str(e.get("parent tool name") or ""),
                    api=str(e.get("API name") or ""),
                    domain=str(e.get("domain name") or ""),
                    required=list(e.get("required_parameters") or e.get("required parameters") or []),
                    optional=list(e.get("optional_parameters") or e.get("optional parameters") or []),
                    source=rel,
                ))
        return cls(defs)

    def domain_file(self, domain: str) -> str | None:
        """The tools file of a domain (``tools/<Domain>_tool.json``), if present."""
        for src in self.by_file:
            if Path(src).name.casefold() == f"{domain}_tool.json".casefold():
                return src
        return None

    def domain_tools(self, domain: str) -> list[str]:
        cache = self.__dict__.setdefault("_domain_tools", {})
        if domain not in cache:
            cache[domain] = self._domain_tools_uncached(domain)
        return cache[domain]

    def _domain_tools_uncached(self, domain: str) -> list[str]:
        """Canonical names offered as same-domain distractors: the domain's tools file if present, else every
        catalog tool whose ``domain name`` is the domain, else the whole catalog (a domain never seen before)."""
        src = self.domain_file(domain)
        if src is not None:
            return list(self.by_file[src])
        same = [k for k, d in self.defs.items() if d.domain.casefold() == domain.casefold()]
        return same or list(self.defs)

    # ---- identity ------------------------------------------------------------------------------
    def resolve(self, name: str) -> str | None:
        """Catalog key for a tool name (exact canonical, unique alnum alias, path template), else None."""
        if name in self._resolve_cache:
            return self._resolve_cache[name]
        k = canon_name(name)
        out: str | None = None
        if k in self.defs:
            out = k
        elif alnum(name) in self._alias:
            out = self._alias[alnum(name)]
        else:
            for rx, key in self._templates:
                if rx.match(k):
                    out = key
                    break
        self._resolve_cache[name] = out
        return out

    def __contains__(self, key: str) -> bool:
        return key in self.defs

    def __getitem__(self, key: str) -> CatalogTool:
        return self.defs[key]

    def __len__(self) -> int:
        return len(self.defs)

    # ---- gold facts and schema ---------------------------------------------------------------------
    def observe(self, key: str, args: dict[str, Any]) -> None:
        """Record one scorable gold call of catalog tool ``key`` (see ``ToolFacts``)."""
        f = self.facts.setdefault(key, ToolFacts())
        supplied = {str(n).strip() for n, v in args.items() if not is_empty(v)}
        f.n_calls += 1
        f.always_supplied = supplied if f.always_supplied is None else (f.always_supplied & supplied)
        f.used_names |= {str(n).strip() for n in args}
        for n, v in args.items():
            if is_empty(v):
                continue
            n = str(n).strip()
            f.value_types.setdefault(n, set()).add(json_type_of_value(v))
            f.values.setdefault(n, []).append(v)
        self._schema_cache.pop(key, None)
        if self._type_enforced:
            self._type_enforced.clear()

    def required_names(self, key: str) -> list[str]:
        """Catalog-required names that every scorable gold call of the tool supplies."""
        d = self.defs[key]
        f = self.facts.get(key)
        names = [str(p["name"]).strip() for p in d.required if p.get("name")]
        if f is not None and f.always_supplied is not None:
            names = [n for n in names if n in f.always_supplied]
        return list(dict.fromkeys(names))

    def schema(self, key: str) -> dict:
        """JSON Schema (object) of a catalog tool, with the documented relaxations."""
        if key in self._schema_cache:
            return self._schema_cache[key]
        d = self.defs[key]
        f = self.facts.get(key)
        props: dict[str, dict] = {}
        for p in d.required + d.optional:
            n = str(p.get("name") or "").strip()
            if not n or n in props:
                continue
            jt = json_type_of_param(p.get("type", ""))
            seen = (f.value_types.get(n, set()) if f else set())
            bad = sorted(t for t in seen if not _fits(jt, t))
            prop: dict[str, Any] = {"type": jt if not bad else [jt] + [t for t in bad if t != jt]}
            desc = str(p.get("description") or "").strip()
            ptype = str(p.get("type") or "")
            if ptype.upper().startswith("DATE"):
                desc = (desc + " " if desc else "") + "Format: YYYY-MM-DD."
            if desc:
                prop["description"] = desc
            ex = p.get("default")
            if not is_empty(ex) and not isinstance(ex, (list, dict)):
                prop["examples"] = [ex]
            props[n] = prop
        schema: dict[str, Any] = {"type": "object", "properties": props}
        req = self.required_names(key)
        if req:
            schema["required"] = req
        self._schema_cache[key] = schema
        return schema
