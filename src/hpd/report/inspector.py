"""The boundary inspector: one self-contained static HTML file per run.

Per task it shows the query and every boundary: the native context (collapsible, rendered only when
opened), the control document (a selector switches privilege level), the reference action and its
compliance, and -- when a later stage stored them on the record -- teacher ``candidates``,
``verdicts`` and the chosen ``target``. Tasks are paginated (client-side, from one embedded JSON
block) and searchable by task uid; ``#<task uid>`` in the URL opens that task.

Data model embedded in the page (:func:`inspector_data`)::

    {"title", "run": {...manifest subset...}, "privileges": [...], "privilege": default level,
     "tools": {tool id: declaration},                    # deduplicated across tasks
     "tasks": [{"uid", "kind", "query", "systemPrompt", "tools": [tool ids], "messages": [...],
                "boundaries": [{"uid", "index", "kind", "n_messages" | "messages", "documents": {p: text},
                                "doc_tokens": {p: n}, "reference", "reference_meta", "state": {...summary},
                                "candidates"?, "verdicts"?, "target"?}]}],
     "n_tasks_total", "n_tasks_shown"}

A boundary's native context is ``systemPrompt`` + the task's ``tools`` + ``messages[:n_messages]`` of
its task (boundaries of one episode share the transcript prefix); a boundary whose messages are not a
prefix of its task's transcript carries its own ``messages``. ``max_tasks`` caps the tasks embedded (the
header says how many of how many) so a full-benchmark run stays loadable.
"""

from __future__ import annotations

import hashlib
import json
from importlib import resources
from pathlib import Path
from typing import Iterable

from hpd.boundary.store import iter_records
from hpd.runfolder import write_text

OPTIONAL_SLOTS = ("candidates", "verdicts", "target")
PLACEHOLDER = "/*__HPD_DATA__*/"


def _tool_id(decl: dict) -> str:
    return hashlib.sha1(json.dumps(decl, sort_keys=True, ensure_ascii=False).encode()).hexdigest()[:12]


def _query(messages: list[dict]) -> str:
    for m in messages:
        if m.get("role") == "user":
            c = m.get("content")
            if isinstance(c, str):
                return c
            return "".join(b.get("text", "") for b in c or [] if isinstance(b, dict))
    return ""


def _state_summary(state: dict) -> dict:
    h = state.get("harness", {})
    r = state.get("reference", {})
    return {
        "turn_index": h.get("turn_index"), "turns_left": h.get("turns_left"), "tail_role": h.get("tail_role"),
        "calls_made": len(state.get("calls", [])),
        "errors_made": sum(1 for c in state.get("calls", []) if not c.get("ok")),
        "observed": r.get("observed"), "remaining": r.get("remaining"), "consumed": r.get("consumed"),
        "end_complies": r.get("end_complies"), "matches": state.get("env", {}).get("matches"),
    }


def inspector_data(records: Iterable[dict], *, max_tasks: int | None = None, run: dict | None = None,
                   privilege: str | None = None, title: str = "hpd boundary inspector") -> dict:
    """Group boundary records by task into the page's data model (see module docstring)."""
    tools: dict[str, dict] = {}
    tasks: list[dict] = []
    by_uid: dict[str, dict] = {}
    privileges: list[str] = []
    n_total = 0
    pending: dict[str, list[dict]] = {}
    order: list[str] = []
    seen: set[str] = set()
    for r in records:
        tu = r["task_uid"]
        if tu not in seen:
            seen.add(tu)
            n_total += 1
            if max_tasks is None or len(order) < max_tasks:
                pending[tu] = []
                order.append(tu)
        if tu in pending:
            pending[tu].append(r)
    for tu in order:
        recs = sorted(pending[tu], key=lambda r: r["index"])
        last_ctx = max((r["context"] for r in recs), key=lambda c: len(c.get("messages", [])))
        msgs = last_ctx.get("messages", [])
        tids = []
        for d in last_ctx.get("tools", []):
            tid = _tool_id(d)
            tools.setdefault(tid, d)
            tids.append(tid)
        task = {"uid": tu, "kind": tu.split("/", 1)[0], "query": _query(msgs),
                "systemPrompt": last_ctx.get("systemPrompt", ""), "tools": tids, "messages": msgs, "boundaries": []}
        for r in recs:
            ctx = r["context"]
            bm = ctx.get("messages", [])
            b = {"uid": r.get("uid"), "index": r["index"], "kind": r.get("kind")}
            if bm == msgs[:len(bm)] and ctx.get("systemPrompt", "") == task["systemPrompt"] and \
                    [_tool_id(d) for d in ctx.get("tools", [])] == tids:
                b["n_messages"] = len(bm)
            else:
                b["context"] = ctx
            docs = r.get("documents") or {}
            for p in docs:
                if p not in privileges:
                    privileges.append(p)
            b["documents"] = {p: d.get("text", "") for p, d in docs.items()}
            b["doc_tokens"] = {p: d.get("n_tokens") for p, d in docs.items()}
            b["reference"] = r.get("reference")
            b["reference_meta"] = r.get("reference_meta", {})
            b["state"] = _state_summary(r.get("state") or {})
            for k in OPTIONAL_SLOTS:
                if r.get(k) is not None:
                    b[k] = r[k]
            task["boundaries"].append(b)
        tasks.append(task)
        by_uid[tu] = task
    order_p = [p for p in ("runtime", "plan", "oracle") if p in privileges] + \
        [p for p in privileges if p not in ("runtime", "plan", "oracle")]
    default = privilege if privilege in order_p else ("plan" if "plan" in order_p else (order_p[0] if order_p else None))
    return {"title": title, "run": run or {}, "privileges": order_p, "privilege": default, "tools": tools,
            "tasks": tasks, "n_tasks_total": n_total, "n_tasks_shown": len(tasks)}


def render_html(data: dict) -> str:
    """The page: the template with ``data`` embedded as JSON (``<`` escaped so no tag can close early)."""
    template = resources.files("hpd.report").joinpath("inspector.html").read_text(encoding="utf-8")
    blob = json.dumps(data, ensure_ascii=False, separators=(",", ":")).replace("<", "\\u003c")
    blob = blob.replace("\u2028", "\\u2028").replace("\u2029", "\\u2029")
    return template.replace(PLACEHOLDER, blob)


def sample_uids(uids: list[str], k: int | None) -> list[str]:
    """``k`` task uids spread evenly over ``uids`` (all when ``k`` is None or >= len), order kept."""
    if k is None or k >= len(uids):
        return list(uids)
    if k <= 0:
        return []
    return [uids[(i * len(uids)) // k] for i in range(k)]


def _stored_records(replay_out: Path, keep: set[str] | None) -> Iterable[dict]:
    """Stored records, parsing only lines of kept tasks (the uid is the first key of every line)."""
    from hpd.boundary.store import shard_files

    dec = json.JSONDecoder()
    for f in shard_files(replay_out):
        with f.open(encoding="utf-8") as fh:
            for line in fh:
                if keep is not None and line.startswith('{"uid":'):
                    uid, _ = dec.raw_decode(line, 7)
                    if uid.rsplit("/b", 1)[0] not in keep:
                        continue
                if line.strip():
                    yield json.loads(line)


def write_inspector(replay_out, path=None, *, max_tasks: int | None = 1000, privilege: str | None = None,
                    records: Iterable[dict] | None = None) -> Path:
    """Write ``inspector.html`` for a replay output folder (or for ``records``); returns its path.

    With more than ``max_tasks`` stored tasks, an evenly spread sample of them is embedded (the shard
    summaries list every task, so the sample covers every kind and domain in proportion).
    """
    replay_out = Path(replay_out)
    path = Path(path) if path else replay_out / "inspector.html"
    run = {}
    mp = replay_out / "manifest.json"
    if mp.is_file():
        m = json.loads(mp.read_text(encoding="utf-8"))
        run = {k: m.get(k) for k in ("command", "config_hash", "code_version", "pi_version", "inputs", "n_tasks",
                                      "n_boundaries", "privileges", "doc_version") if k in m}
    if records is None:
        uids: list[str] = []
        for mf in sorted((replay_out / "boundaries").glob("shard-*.meta.json")):
            uids.extend(json.loads(mf.read_text(encoding="utf-8")).get("tasks", []))
        keep = set(sample_uids(uids, max_tasks)) if uids else None
        records = _stored_records(replay_out, keep) if keep is not None else iter_records(replay_out)
        n_total = len(uids) or None
    else:
        n_total = None
    data = inspector_data(records, max_tasks=max_tasks, run=run, privilege=privilege)
    if n_total is not None:
        data["n_tasks_total"] = n_total
    return write_text(path, render_html(data))
