"""``BuiltinEnv``: the harness ``Environment`` for the built-in benchmark, backed by the live tools.

Unlike ``hpd.bench.replay.ReplayEnv`` nothing is looked up: every call is executed by the simulated
tool, so calls off the reference path get real answers (what RL rollouts need). What the model is
*shown* can be made identical to the replay path: built with ``bench=`` (a loaded
``hpd.bench.loader.Bench``) the tool list is the same pool (``ToolPool.for_task``: gold tools + seeded
distractors, catalog descriptions and the loader's JSON Schema); otherwise it is the built-in domain
catalog (or the given tool names) with the registry's own schema (which adds ``enum`` lists).

Call log (``env.calls``), one dict per call that reached the environment::

    {"seq", "call_id", "name", "arguments", "match", "step", "is_error", "output"}

``match``: ``"exact"`` (the call's canonical signature equals reference step ``step`` of the task),
``"live"`` (a real answer off the reference path), ``"error"`` (the tool rejected the input),
``"unknown_tool"``. An error raises, so the harness records Pi's thrown-error result (``isError``).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Iterable

from .registry import ToolInputError
from .tools import domain_catalog, get_tool
from .tools import call as _call

MANIFEST = "builtin_manifest.json"


def is_builtin_dir(data_dir: str | Path) -> bool:
    """True when ``data_dir`` was written by :func:`hpd.bench.builtin.generate`."""
    return (Path(data_dir) / MANIFEST).is_file()


def read_manifest(data_dir: str | Path) -> dict:
    return json.loads((Path(data_dir) / MANIFEST).read_text(encoding="utf-8"))


class BuiltinEnv:
    """``BuiltinEnv(source, *, bench=None, k=20, full_domain=False, world_seed=None)``.

    ``source`` is a loader ``Task`` (its domain's catalog, or the replay pool when ``bench`` is
    given), a built-in domain name, or an iterable of tool names / catalog entries (dicts with
    ``"tool name"``). ``world_seed`` defaults to the bench folder's manifest value, else 0.
    """

    def __init__(self, source: Any, *, bench: Any = None, k: int | None = 20, full_domain: bool = False,
                 world_seed: int | None = None):
        self.task = source if hasattr(source, "steps") and hasattr(source, "domain") else None
        if world_seed is None:
            world_seed = 0
            d = getattr(bench, "data_dir", None)
            if d is not None and is_builtin_dir(d):
                world_seed = int(read_manifest(d).get("world_seed", 0))
        self.world_seed = int(world_seed)
        self._specs: list[dict]
        if self.task is not None and bench is not None:
            from hpd.bench.pool import ToolPool
            pool = ToolPool.for_task(self.task, bench.catalog, k=k, full_domain=full_domain)
            self._specs = pool.specs()
        else:
            if self.task is not None:
                names = [t.name for t in domain_catalog(self.task.domain)]
                for s in self.task.steps:               # gold tools always offered
                    if get_tool(s.tool).name not in names:
                        names.append(get_tool(s.tool).name)
            elif isinstance(source, str):
                names = [t.name for t in domain_catalog(source)]
            else:
                names = [get_tool(x["tool name"] if isinstance(x, dict) else x).name for x in _as_list(source)]
            self._specs = [{"name": n, "description": get_tool(n).description,
                            "parameters": get_tool(n).json_schema()} for n in names]
        for s in self._specs:
            get_tool(s["name"])                          # every shown tool must be executable
        self._names = {s["name"] for s in self._specs}
        self._gold: dict[tuple, list[int]] = {}
        if self.task is not None:
            from hpd.bench.canon import signature
            self._signature = signature
            for s in self.task.steps:
                self._gold.setdefault(signature(get_tool(s.tool).name, s.arguments), []).append(s.index)
        self.calls: list[dict] = []

    # ---- Environment protocol ----------------------------------------------------------------------
    def tools(self) -> list:
        from hpd.harness.tools import AgentTool
        return [AgentTool(name=s["name"], description=s["description"],
                          parameters=json.loads(json.dumps(s["parameters"])),
                          execute=self._executor(s["name"]), label=s["name"]) for s in self._specs]

    def fork(self) -> "BuiltinEnv":
        g = object.__new__(BuiltinEnv)
        g.__dict__.update(self.__dict__)
        g.calls = list(self.calls)
        return g

    def specs(self) -> list[dict]:
        """``[{"name", "description", "parameters"}]`` as shown to the model."""
        return json.loads(json.dumps(self._specs))

    # ---- execution ---------------------------------------------------------------------------------
    def _executor(self, name: str):
        def execute(tool_call_id: str, args: dict, *_a, **_kw) -> dict:
            r = self.execute(name, args, call_id=tool_call_id)
            if r["is_error"]:
                raise ToolInputError(r["text"])
            return {"content": [{"type": "text", "text": r["text"]}],
                    "details": {"match": r["match"], "step": r["step"]}}
        return execute

    def execute(self, name: str, args: dict | None, call_id: str | None = None) -> dict:
        """Run one call; returns ``{"text", "is_error", "match", "step"}`` and appends to ``self.calls``."""
        step = None
        if name not in self._names:
            level, text, err = "unknown_tool", f"Tool '{name}' not found in available tools", True
        else:
            try:
                _, text = _call(name, args, self.world_seed)
                level, err = "live", False
                if self.task is not None:
                    idx = self._gold.get(self._signature(name, dict(args or {})))
                    if idx:
                        level, step = "exact", idx[0]
            except ToolInputError as e:
                level, text, err = "error", str(e), True
        self.calls.append({"seq": len(self.calls), "call_id": call_id, "name": name,
                           "arguments": dict(args or {}) if isinstance(args, dict) else args,
                           "match": level, "step": step, "is_error": err, "output": text})
        return {"text": text, "is_error": err, "match": level, "step": step}


def _as_list(x: Iterable) -> list:
    return list(x)
