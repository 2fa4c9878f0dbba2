"""Offline replay executor for TRAJECT-Bench: an ``Environment`` for ``hpd.harness`` (docs/traject-bench.md sec 9.2).

``ReplayEnv(task, bench, k=20, full_domain=False, allow_global=False, mark_truncated=False,
lenient_tool_fallback=False)``; ``env.tools()`` -> ``AgentTool`` list (the pool, catalog definitions only);
``env.fork()`` -> an independent copy (call log and FIFO state copied, task/pool/catalog shared).

Procedure for a call ``(name, args)``, in order; the level is logged in ``env.calls``:

1. ``unknown_tool``: the name is not in the episode pool (after alias resolution) -> ``ERROR: Tool '<name>' not
   found in available tools. Closest available: a, b, c`` (top 3 by difflib, from the pool only).
   *Policy for tools not in the catalog*: gold steps whose tool is not in the catalog are unscorable and
   their tools are never in the pool, so calling them is always ``unknown_tool``. Inside the harness such
   calls are answered by Pi's own "Tool ... not found" before reaching the environment.
2. ``schema_error``: ``ToolPool.check`` fails (names and types only, never gold values).
3. ``exact``: the canonical signature equals a gold step of this task -> its recorded output verbatim,
   recorded failures included. Identical calls are served FIFO over the gold steps with that signature (in
   gold order), then the last one repeats.
4. ``near``: ``hpd.bench.match.near_match`` against a successful gold step of the same tool (first one not
   yet served, else the first) -> that step's output.
5. ``global`` (only with ``allow_global``): the same signature was recorded in another task of the loaded
   data -> the majority output there, preferring non-error outputs, ties to the smallest uid.
6. ``miss``: the constant ``MISS_TEXT``; identical whether or not the tool is in the gold plan.
(``tool_only``, only with ``lenient_tool_fallback``, before miss: the output of the single remaining
unserved successful gold step of that tool. For answer-quality ablations only; never counts as matched.)

Inside the harness, Pi's own lookup and JSON-Schema validation (``Catalog.schema``) run first; the
executor's schema check adds what JSON Schema does not express (gold-only parameter names, formats).

Error results (unknown_tool, schema_error, miss, and replayed recorded failures) make ``execute`` raise, so
the harness produces Pi's thrown-error ``toolResult`` with ``isError: true`` and the text as content.
No time, no randomness; outputs are byte-identical to the data (optionally `` …[truncated]`` is appended to
outputs of exactly 2,048 chars).

Call log entry (``env.calls``, one dict per call that reached the environment, in execution order)::

    {"seq": int, "call_id": str|None, "name": str, "key": str|None, "arguments": dict,
     "match": "exact"|"near"|"global"|"tool_only"|"miss"|"unknown_tool"|"schema_error",
     "step": int|None,          # gold step index that answered (exact/near/tool_only)
     "scorable": bool,          # that gold step is scorable
     "is_error": bool}
"""

from __future__ import annotations

import json
from collections import Counter
from typing import Any

from hpd.bench.canon import signature
from hpd.bench.match import near_match
from hpd.bench.pool import ToolPool

MISS_TEXT = json.dumps({
    "error": "NO_RECORDED_RESPONSE",
    "message": "This offline environment has no recorded response for these arguments. Re-check the argument "
               "values against the request and earlier tool outputs.",
})
TRUNCATED_AT = 2048
TRUNC_MARK = " …[truncated]"
MATCHED_LEVELS = ("exact", "near")


class ReplayError(Exception):
    """Raised by a tool's ``execute`` for an error result; ``str(exc)`` is exactly the text the model sees."""


def is_error_output(text: str) -> bool:
    return text.startswith("ERROR:")


class GlobalCache:
    """Signature -> chosen recorded output over all loaded tasks (majority, non-error first, smallest uid)."""

    def __init__(self, tasks):
        stats: dict[tuple, dict[str, list]] = {}
        for t in tasks:
            for s in t.steps:
                if s.key is None or s.status != "success":
                    continue
                d = stats.setdefault(s.sig, {})
                e = d.setdefault(s.output, [0, t.uid])
                e[0] += 1
                e[1] = min(e[1], t.uid)
        self._best = {}
        for sig, outs in stats.items():
            best = sorted(outs.items(), key=lambda kv: (is_error_output(kv[0]) or not kv[0], -kv[1][0], kv[1][1]))
            self._best[sig] = best[0][0]

    def get(self, sig: tuple) -> str | None:
        return self._best.get(sig)


class ReplayEnv:
    """See module docstring."""

    def __init__(self, task, bench, *, k: int | None = 20, full_domain: bool = False, allow_global: bool = False,
                 mark_truncated: bool = False, lenient_tool_fallback: bool = False, pool: ToolPool | None = None,
                 global_cache: GlobalCache | None = None):
        self.task = task
        self.bench = bench
        self.pool = pool or ToolPool.for_task(task, bench.catalog, k=k, full_domain=full_domain)
        self.allow_global = allow_global
        self.mark_truncated = mark_truncated
        self.lenient_tool_fallback = lenient_tool_fallback
        self._global = global_cache
        if allow_global and self._global is None:
            self._global = _bench_global_cache(bench)
        self.calls: list[dict] = []
        self.served: list[int] = [0] * len(task.steps)
        self._by_sig: dict[tuple, list[int]] = {}
        for s in task.steps:
            if s.key is not None:
                self._by_sig.setdefault(s.sig, []).append(s.index)

    # ---- Environment protocol ----------------------------------------------------------------------
    def tools(self) -> list:
        from hpd.harness.tools import AgentTool
        out = []
        for spec in self.pool.specs():
            out.append(AgentTool(name=spec["name"], description=spec["description"],
                                 parameters=spec["parameters"], execute=self._executor(spec["name"]),
                                 label=spec["name"]))
        return out

    def fork(self) -> "ReplayEnv":
        g = object.__new__(ReplayEnv)
        g.__dict__.update(self.__dict__)
        g.calls = list(self.calls)
        g.served = list(self.served)
        return g

    def _executor(self, name: str):
        def execute(tool_call_id: str, args: dict, *_a, **_kw) -> dict:
            r = self.execute(name, args, call_id=tool_call_id)
            if r["is_error"]:
                raise ReplayError(r["text"])
            return {"content": [{"type": "text", "text": r["text"]}], "details": {}}
        return execute

    # ---- the replay procedure ----------------------------------------------------------------------
    def execute(self, name: str, args: dict[str, Any] | None, call_id: str | None = None) -> dict:
        """Answer one call. Returns ``{"text", "is_error", "match", "step"}`` and appends to ``self.calls``."""
        if args is None:
            args = {}
        args = dict(args) if isinstance(args, dict) else args
        key = self.pool.key_of(name)
        step_idx: int | None = None
        if key is None:
            level, text, err = "unknown_tool", self.pool.unknown_tool_text(name), True
        else:
            problem = self.pool.check(key, args)
            if problem is not None:
                level, text, err = "schema_error", problem, True
            else:
                level, text, err, step_idx = self._lookup(key, args)
        if not err and self.mark_truncated and len(text) == TRUNCATED_AT:
            text = text + TRUNC_MARK
        scorable = step_idx is not None and self.task.steps[step_idx].scorable
        self.calls.append({"seq": len(self.calls), "call_id": call_id, "name": name, "key": key,
                           "arguments": args, "match": level, "step": step_idx, "scorable": scorable,
                           "is_error": err})
        return {"text": text, "is_error": err, "match": level, "step": step_idx}

    def _serve(self, idx: int) -> tuple[str, bool]:
        self.served[idx] += 1
        s = self.task.steps[idx]
        return s.output, (s.status != "success")

    def _lookup(self, key: str, args: dict) -> tuple[str, str, bool, int | None]:
        sig = signature(key, args)
        queue = self._by_sig.get(sig)
        if queue:
            idx = next((i for i in queue if self.served[i] == 0), queue[-1])
            text, err = self._serve(idx)
            return "exact", text, err, idx
        tooldef = self.bench.catalog[key]
        near = [s.index for s in self.task.steps
                if s.key == key and s.status == "success" and near_match(args, s.arguments, tooldef)]
        if near:
            idx = next((i for i in near if self.served[i] == 0), near[0])
            text, err = self._serve(idx)
            return "near", text, err, idx
        if self.allow_global and self._global is not None:
            out = self._global.get(sig)
            if out is not None:
                return "global", out, is_error_output(out), None
        if self.lenient_tool_fallback:
            rest = [s.index for s in self.task.steps
                    if s.key == key and s.status == "success" and self.served[s.index] == 0]
            if len(rest) == 1:
                text, err = self._serve(rest[0])
                return "tool_only", text, err, rest[0]
        return "miss", MISS_TEXT, True, None

    # ---- summaries ---------------------------------------------------------------------------------
    def match_counts(self) -> dict[str, int]:
        return dict(Counter(c["match"] for c in self.calls))


def _bench_global_cache(bench) -> GlobalCache:
    gc = getattr(bench, "_global_cache", None)
    if gc is None:
        gc = GlobalCache(bench.tasks)
        try:
            bench._global_cache = gc
        except AttributeError:  # pragma: no cover
            pass
    return gc
