"""Conformance: run scenarios through our loop and the real Pi loop and compare them.

Compared per scenario (after normalisation): the event sequence, the final transcript, and the context
handed to the provider at every boundary. Normalisation replaces every ``timestamp`` by 0 and every
``durationMs`` by 0 (Pi stamps wall-clock times; ours come from a deterministic clock; the *presence* of
the keys is still compared). Scripted replies carry fixed ids, so no generated ids need normalising.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hpd import PI_PACKAGE, PI_VERSION
from hpd.harness import bridge as br
from hpd.harness import scenario as sc

SCENARIO_DIR = Path(__file__).resolve().parent / "scenarios"
NORMALISED_KEYS = {"timestamp": 0, "durationMs": 0}


def normalise(x: Any) -> Any:
    """JSON round trip, with ``timestamp``/``durationMs`` values set to 0."""
    def walk(v: Any) -> Any:
        if isinstance(v, dict):
            return {k: (NORMALISED_KEYS[k] if k in NORMALISED_KEYS else walk(x)) for k, x in v.items()}
        if isinstance(v, list):
            return [walk(x) for x in v]
        return v

    return walk(json.loads(json.dumps(x)))


def first_difference(a: Any, b: Any, path: str = "") -> str | None:
    """The path of the first difference between two JSON values, with both sides, or None."""
    if isinstance(a, dict) and isinstance(b, dict):
        for k in list(a) + [k for k in b if k not in a]:
            if k not in a:
                return f"{path}.{k}: missing in ours, pi has {json.dumps(b[k])[:200]}"
            if k not in b:
                return f"{path}.{k}: only in ours ({json.dumps(a[k])[:200]})"
            d = first_difference(a[k], b[k], f"{path}.{k}")
            if d:
                return d
        return None
    if isinstance(a, list) and isinstance(b, list):
        for i, (x, y) in enumerate(zip(a, b)):
            d = first_difference(x, y, f"{path}[{i}]")
            if d:
                return d
        if len(a) != len(b):
            return f"{path}: length {len(a)} (ours) != {len(b)} (pi)"
        return None
    if not same_leaf(a, b):
        return f"{path}: ours {json.dumps(a)[:300]} != pi {json.dumps(b)[:300]}"
    return None


def same_leaf(a: Any, b: Any) -> bool:
    """Two leaves are the same value of the same Python type (``1000.0`` is not Pi's ``1000``, see
    :func:`hpd.harness.jsvalues.js_number`); a non-finite number of ours matches Pi's ``null`` (Pi holds
    ``Infinity`` in memory, and ``JSON.stringify`` carries it over the bridge as ``null``)."""
    if isinstance(a, float) and not math.isfinite(a):
        return b is None
    return type(a) is type(b) and a == b


@dataclass
class ScenarioResult:
    name: str
    identical: bool
    boundaries: int = 0
    events: int = 0
    difference: str | None = None
    error: str | None = None
    covers: list = field(default_factory=list)

    def to_json(self) -> dict:
        return {"name": self.name, "identical": self.identical, "boundaries": self.boundaries, "events": self.events,
                "difference": self.difference, "error": self.error, "covers": self.covers}


def compare(ours: dict, pi: dict) -> str | None:
    for key in ("contexts", "events", "transcript"):
        d = first_difference(normalise(ours[key]), normalise(pi[key]), key)
        if d:
            return d
    return None


def run_scenario(s: sc.Scenario) -> ScenarioResult:
    covers = list(s.data.get("covers", []))
    try:
        ours = sc.run_python(s)
    except Exception as e:  # noqa: BLE001 - reported per scenario
        return ScenarioResult(s.name, False, error=f"our loop: {type(e).__name__}: {e}", covers=covers)
    try:
        pi = br.run_pi(s)
    except br.BridgeUnavailable:
        raise
    except Exception as e:  # noqa: BLE001
        return ScenarioResult(s.name, False, error=f"pi bridge: {type(e).__name__}: {e}", covers=covers)
    diff = compare(ours, pi)
    return ScenarioResult(s.name, diff is None, boundaries=len(pi["contexts"]), events=len(pi["events"]),
                          difference=diff, covers=covers)


def run_conformance(folder: str | Path | None = None, on_result=None) -> list[ScenarioResult]:
    """Every scenario of ``folder`` (default: the built-in library) through our loop and the real Pi.
    ``on_result(result)`` is called as each scenario finishes. Raises ``ScenarioError`` for a bad
    scenario file and ``BridgeUnavailable`` when the Node bridge cannot run."""
    scenarios = sc.load_scenarios(folder or SCENARIO_DIR)
    br.check_bridge()
    out = []
    for s in scenarios:
        r = run_scenario(s)
        out.append(r)
        if on_result is not None:
            on_result(r)
    return out


def summary_line(results: list[ScenarioResult]) -> str:
    ok = sum(r.identical for r in results)
    return f"conformance: {ok}/{len(results)} scenarios identical to {PI_PACKAGE}@{PI_VERSION}"
