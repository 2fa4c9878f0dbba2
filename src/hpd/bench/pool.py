"""The tool pool shown to the policy for one task, and the executor's schema check.

Pool (default): the task's gold tools that resolve into the catalog, plus distractors drawn from the same
domain's tools (``Catalog.domain_tools``) until the pool has ``k`` tools (default 20; the repo's ``fixed``
mode, made deterministic: ``random.Random(sha1(uid))``), then shuffled with the same generator so gold tools
have no fixed position. If the gold tools alone exceed ``k`` the pool is just the gold tools. Option
``full_domain=True`` (or ``k=None``): gold tools plus every domain tool.

What is shown for each tool is the **catalog** definition only (full name, catalog ``tool description``, JSON
Schema): a sequential gold step's ``tool description`` is the chain-role instruction and is never shown.

Gold tools that are not in the catalog are not in the pool (their steps are unscorable). Calls to a name
outside the pool are the documented ``unknown_tool`` case of the executor.

Schema check (docs/traject-bench.md sec 9.2 step 2; deterministic, names only, never gold values):
* missing required (``Catalog.required_names``, i.e. relaxed to what every scorable gold call supplies) ->
  ``ERROR: Missing required parameters: [...]`` (wording of TRAJECT ``tool_exe.execute_tool_by_name``);
* a name neither in the catalog nor used by any gold call of the tool -> ``ERROR: Unknown parameters: [...].
  Valid parameters: [...]`` (catalog names only);
* type checks where every gold value of the parameter passes them: NUMBER parseable, BOOLEAN in
  {true, false, 0, 1}, DATE ``\\d{4}-\\d{2}-\\d{2}``; ENUM unchecked.
"""

from __future__ import annotations

import difflib
import hashlib
import random
import re
from typing import Any

from hpd.bench.canon import is_empty
from hpd.bench.catalog import Catalog

_DATE = re.compile(r"^\d{4}-\d{2}-\d{2}$")
_UNCHECKED = {"STRING", "ENUM", ""}


def seed_of(uid: str) -> int:
    """Deterministic per-task seed: the integer value of ``sha1(uid)``."""
    return int(hashlib.sha1(uid.encode("utf-8")).hexdigest(), 16)


def _type_ok(ptype: str, v: Any) -> bool:
    t = str(ptype or "").upper()
    if t == "NUMBER":
        if isinstance(v, bool):
            return False
        if isinstance(v, (int, float)):
            return True
        try:
            float(str(v).strip())
            return True
        except ValueError:
            return False
    if t == "BOOLEAN":
        return isinstance(v, bool) or str(v).strip().lower() in {"true", "false", "0", "1"}
    if t.startswith("DATE"):
        return isinstance(v, str) and bool(_DATE.match(v.strip()))
    return True


class ToolPool:
    """The tools of one episode: ordered catalog keys + display names + the schema check."""

    def __init__(self, keys: list[str], catalog: Catalog):
        self.keys = list(keys)
        self.catalog = catalog
        self.by_name = {catalog[k].name: k for k in self.keys}
        self._keyset = set(self.keys)

    @classmethod
    def for_task(cls, task, catalog: Catalog, k: int | None = 20, *, full_domain: bool = False) -> "ToolPool":
        gold = list(dict.fromkeys(s.key for s in task.steps if s.key is not None))
        rng = random.Random(seed_of(task.uid))
        gset = set(gold)
        cands = sorted(k for k in catalog.domain_tools(task.domain) if k not in gset)
        if full_domain or k is None:
            extra = cands
        else:
            extra = rng.sample(cands, max(0, min(k - len(gold), len(cands))))
        keys = gold + extra
        rng.shuffle(keys)
        return cls(keys, catalog)

    def names(self) -> list[str]:
        return [self.catalog[k].name for k in self.keys]

    def key_of(self, name: str) -> str | None:
        """Pool key of a called name: exact display name, else catalog resolution restricted to the pool."""
        if name in self.by_name:
            return self.by_name[name]
        k = self.catalog.resolve(name)
        return k if k in self._keyset else None

    def display(self, key: str) -> str:
        return self.catalog[key].name

    def specs(self) -> list[dict]:
        """``[{"name", "description", "parameters"}]`` as the harness shows them."""
        return [{"name": self.catalog[k].name, "description": self.catalog[k].description,
                 "parameters": self.catalog.schema(k)} for k in self.keys]

    def closest(self, name: str, n: int = 3) -> list[str]:
        """Top-n pool names by ``difflib`` ratio, ties alphabetical."""
        names = self.names()
        scored = sorted(names, key=lambda x: (-difflib.SequenceMatcher(None, name, x).ratio(), x))
        return scored[:n]

    def unknown_tool_text(self, name: str) -> str:
        return (f"ERROR: Tool '{name}' not found in available tools. "
                f"Closest available: {', '.join(self.closest(name))}")

    def _enforced(self, key: str, name: str, ptype: str) -> bool:
        cache = self.catalog._type_enforced
        ck = (key, name)
        if ck not in cache:
            facts = self.catalog.facts.get(key)
            gold_vals = facts.values.get(name, []) if facts else []
            cache[ck] = all(_type_ok(ptype, g) for g in gold_vals)
        return cache[ck]

    def check(self, key: str, args: dict[str, Any]) -> str | None:
        """The executor's schema check for a pool tool; returns the error text or None."""
        d = self.catalog[key]
        facts = self.catalog.facts.get(key)
        if not isinstance(args, dict):
            return "ERROR: Arguments must be a JSON object."
        missing = [n for n in self.catalog.required_names(key) if is_empty(args.get(n))]
        if missing:
            return f"ERROR: Missing required parameters: {missing}"
        valid = d.param_names()
        allowed = set(valid) | (facts.used_names if facts else set())
        unknown = [n for n in args if str(n).strip() not in allowed]
        if unknown:
            return f"ERROR: Unknown parameters: {unknown}. Valid parameters: {valid}"
        types = d.param_types()
        bad = []
        for n, v in args.items():
            n = str(n).strip()
            if is_empty(v) or n not in types or str(types[n]).upper() in _UNCHECKED:
                continue
            if not self._enforced(key, n, types[n]):
                continue  # gold itself violates the declared type: do not enforce it
            if not _type_ok(types[n], v):
                bad.append(f"{n} (expected {types[n]})")
        if bad:
            return f"ERROR: Invalid parameter types: {bad}"
        return None
