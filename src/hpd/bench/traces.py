"""Users' own harness traces -> a TRAJECT-Bench-layout folder (``hpd data import``), so replay, teach, train,
eval and ``hpd demo --data`` run on them.

Formats read (``fmt``):

* ``pi-session``: one file = one session = one trace. JSON Lines, one record per line: a Pi ``AgentMessage``
  (``{"role": ...}``: what ``hpd eval --harness pi`` writes to ``<out>/sessions/``), or a pi coding-agent
  session entry (``{"type": "message", "message": {...}}``; other entry types are skipped; with
  ``id``/``parentId`` links the active branch, the one ending at the last message, is read). A whole-file JSON
  list of messages or ``{"messages": [...]}`` (Pi's ``agent_end``) is read the same way.
* ``openai-chat``: JSON Lines, one record per line: ``{"messages": [...], "tools"?: [...]}`` (a whole
  conversation, the fine-tuning shape) or ``{"request": {"messages", "tools"?}, "response": {"choices": [...]}}``
  (a logged chat-completions call; the conversation is the request's messages plus the first choice's
  message). A record whose sent messages are a strict prefix of another record's sent messages in the same file
  is an earlier call of that episode and is merged into it, as is a repeat of the same request (the last one is
  kept; ``merged`` in the report).

A trace must hold: exactly one user message (the query; a later user message is refused: a TRAJECT task has
one query), a result for every tool call, no failed (``error``/``aborted``) assistant turn, and a final
assistant turn with text and no tool calls (the reference answer). Anything else is a :class:`TraceError`
whose one line names the file, the record index (line number from 0, or the message index in a whole-file JSON)
and the reason.

Mapping to TRAJECT (docs/traject-bench.md sec 2): a trace whose tool calls all sit in one assistant turn is a
parallel task (``parallel/<domain>/simple_ver.json``), any other a sequential task
(``sequential/<domain>/traj_query.json``; each call becomes one step, so a batched turn is replayed one call per
turn). Every call is a step: arguments split into ``required parameters`` / ``optional parameters`` by the
declared schema, the recorded result text as ``executed_output``, ``execution_status`` ``failed`` when the
result was an error. Tools: the trace's declarations (Pi ``toolsAdded``, OpenAI ``tools``) become catalog
entries in ``tools/<domain>_tool.json`` with TRAJECT parameter types (string STRING, number NUMBER, integer
INTEGER, boolean BOOLEAN, array ARRAY, object OBJECT, a string ``enum`` ENUM with the options in the
description); a call to an undeclared name stays a step off the catalog (unscorable, as in TRAJECT). A trace
that declares no tools (coding-agent sessions, logs without ``tools``) gets them inferred from its calls (one
property per argument name, its JSON type; required = names in every call). The first declaration of a name wins;
a later different one is counted in ``tool_conflicts``. Lost in the mapping: the trace's system prompt (episodes
use hpd's), nested property schemas (``items``, inner ``properties``) and ``thinking`` blocks.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable

FORMATS = ("pi-session", "openai-chat")
_JSON_TO_TRAJECT = {"string": "STRING", "number": "NUMBER", "integer": "INTEGER", "boolean": "BOOLEAN",
                    "array": "ARRAY", "object": "OBJECT"}


class TraceError(ValueError):
    """A trace that cannot be imported: ``<file>: record <i>: <reason>``."""

    def __init__(self, file: str | Path, record: int, reason: str):
        super().__init__(f"{file}: record {record}: {reason}")
        self.file, self.record, self.reason = str(file), record, reason


@dataclass
class Call:
    name: str
    arguments: dict
    output: str = ""
    is_error: bool = False
    answered: bool = False


@dataclass
class Trace:
    """One episode of a user's harness: the query, tool calls per assistant turn, the final answer."""

    file: str
    record: int
    query: str = ""
    tools: list[dict] = field(default_factory=list)       # declared: {name, description, parameters}
    turns: list[list[Call]] = field(default_factory=list)
    final_answer: str = ""


# ------------------------------------------------------------------------------------------------ reading
def _text(content: Any) -> str:
    if content is None or isinstance(content, str):
        return content or ""
    if isinstance(content, list):
        return "".join(p.get("text", "") for p in content if isinstance(p, dict) and p.get("type") == "text")
    return str(content)


class _Builder:
    """Folds one conversation's messages (Pi or OpenAI roles) into a :class:`Trace`."""

    def __init__(self, file: str, record: int):
        self.t = Trace(file=file, record=record)
        self.calls: dict[str, Call] = {}
        self.last_record = record
        self.last_text: str | None = None

    def fail(self, reason: str, record: int | None = None):
        raise TraceError(self.t.file, self.last_record if record is None else record, reason)

    def user(self, content: Any, i: int) -> None:
        if self.t.query or self.t.turns:
            self.fail("a second user message: a TRAJECT task has one query (split the trace)", i)
        self.t.query = _text(content).strip()
        if not self.t.query:
            self.fail("the user message has no text", i)

    def assistant(self, calls: list[tuple[str, str, dict]], text: str, i: int, stop: str | None = None) -> None:
        if not self.t.query:
            self.fail("an assistant message before the user's query", i)
        if stop in ("error", "aborted"):
            self.fail(f"a failed assistant turn (stopReason {stop})", i)
        self.check_answered(i)
        if calls:
            turn = [Call(name, args) for _, name, args in calls]
            for (cid, _, _), c in zip(calls, turn):
                self.calls[cid] = c
            self.t.turns.append(turn)
            self.last_text = None
        else:
            self.last_text = text

    def result(self, call_id: str, content: Any, is_error: bool, i: int) -> None:
        c = self.calls.get(call_id)
        if c is None:
            self.fail(f"a tool result for an unknown call id {call_id!r}", i)
        c.output, c.is_error, c.answered = _text(content), bool(is_error), True

    def check_answered(self, i: int) -> None:
        missing = [cid for cid, c in self.calls.items() if not c.answered]
        if missing:
            self.fail(f"tool call {missing[0]!r} has no result", i)

    def finish(self) -> Trace:
        if not self.t.query:
            self.fail("no user message (the query)")
        self.check_answered(self.last_record)
        if not (self.last_text or "").strip():
            self.fail("no final answer: the trace does not end with an assistant turn of text without tool calls")
        self.t.final_answer = self.last_text.strip()
        return self.t


def _pi_call(block: dict, b: _Builder, i: int) -> tuple[str, str, dict]:
    args = block.get("arguments")
    if not isinstance(block.get("name"), str) or not isinstance(args, dict):
        b.fail("a toolCall block without a name or an arguments object", i)
    return str(block.get("id")), block["name"], args


def _pi_messages(records: list[tuple[int, dict]], file: str) -> Trace:
    b = _Builder(file, records[0][0] if records else 0)
    for i, m in records:
        b.last_record = i
        role = m.get("role")
        if role == "system":
            b.t.tools.extend(t for t in m.get("toolsAdded") or [] if isinstance(t, dict))
        elif role == "user":
            b.user(m.get("content"), i)
        elif role == "assistant":
            blocks = [x for x in m.get("content") or [] if isinstance(x, dict)]
            calls = [_pi_call(x, b, i) for x in blocks if x.get("type") == "toolCall"]
            b.assistant(calls, _text([x for x in blocks if x.get("type") == "text"]), i, m.get("stopReason"))
        elif role == "toolResult":
            b.result(str(m.get("toolCallId")), m.get("content"), m.get("isError"), i)
        else:
            b.fail(f"unknown message role {role!r}", i)
    return b.finish()


def _active_branch(entries: list[tuple[int, dict]]) -> list[tuple[int, dict]]:
    """Coding-agent session entries: the chain of ``parentId`` links ending at the last message entry."""
    msgs = [(i, e) for i, e in entries if e.get("type") == "message"]
    if not msgs or not any("parentId" in e for _, e in entries):
        return msgs
    by_id = {e.get("id"): (i, e) for i, e in entries if e.get("id") is not None}
    chain, cur = [], msgs[-1]
    while cur is not None:
        chain.append(cur)
        cur = by_id.get(cur[1].get("parentId"))
    return [(i, e) for i, e in reversed(chain) if e.get("type") == "message"]


def _json_lines(path: Path) -> list[tuple[int, Any]]:
    text = path.read_text(encoding="utf-8")
    stripped = text.lstrip()
    if stripped.startswith("["):
        try:
            return list(enumerate(json.loads(text)))
        except ValueError as e:
            raise TraceError(path, 0, f"not JSON: {e}") from None
    rows = []
    for i, line in enumerate(text.splitlines()):
        if not line.strip():
            continue
        try:
            rows.append((i, json.loads(line)))
        except ValueError as e:
            raise TraceError(path, i, f"not JSON: {e}") from None
    if len(rows) == 1 and isinstance(rows[0][1], dict) and isinstance(rows[0][1].get("messages"), list):
        return list(enumerate(rows[0][1]["messages"]))
    return rows


def read_pi_session(path: str | Path) -> list[Trace]:
    """The one trace of a Pi session file (see module doc); :class:`TraceError` if it cannot be imported."""
    path = Path(path)
    records = _json_lines(path)
    for i, r in records:
        if not isinstance(r, dict):
            raise TraceError(path, i, "a record that is not a JSON object")
    if any("role" not in r for _, r in records):
        records = [(i, e["message"]) for i, e in _active_branch(records) if isinstance(e.get("message"), dict)]
    if not records:
        raise TraceError(path, 0, "no messages")
    return [_pi_messages(records, str(path))]


def _openai_conversation(rec: Any, path: Path, i: int) -> tuple[list, list, int]:
    """``(conversation, tools, n)``: the first ``n`` messages are what the client sent (the merge key)."""
    if not isinstance(rec, dict):
        raise TraceError(path, i, "a record that is not a JSON object")
    if isinstance(rec.get("request"), dict):
        req, resp = rec["request"], rec.get("response") or {}
        choices = resp.get("choices") if isinstance(resp, dict) else None
        if not choices or not isinstance(choices[0], dict) or not isinstance(choices[0].get("message"), dict):
            raise TraceError(path, i, "'response.choices[0].message' is missing")
        sent = req.get("messages")
        if not isinstance(sent, list):
            raise TraceError(path, i, "'request.messages' must be a list of objects")
        msgs, tools, n = sent + [{"role": "assistant", **choices[0]["message"]}], req.get("tools"), len(sent)
    else:
        msgs, tools = rec.get("messages"), rec.get("tools")
        n = len(msgs) if isinstance(msgs, list) else 0
    if not isinstance(msgs, list) or not all(isinstance(m, dict) for m in msgs):
        raise TraceError(path, i, "'messages' must be a list of objects")
    return msgs, tools or [], n


def _openai_trace(msgs: list, tools: list, path: Path, i: int) -> Trace:
    b = _Builder(str(path), i)
    for t in tools:
        fn = t.get("function") if isinstance(t, dict) else None
        if not isinstance(fn, dict) or not isinstance(fn.get("name"), str):
            b.fail("a 'tools' entry without function.name")
        b.t.tools.append({"name": fn["name"], "description": fn.get("description") or "",
                          "parameters": fn.get("parameters") or {"type": "object", "properties": {}}})
    for k, m in enumerate(msgs):
        role = m.get("role")
        if role in ("system", "developer"):
            continue
        if role == "user":
            b.user(m.get("content"), i)
        elif role == "assistant":
            calls = []
            for tc in m.get("tool_calls") or []:
                fn = (tc or {}).get("function") or {}
                try:
                    args = json.loads(fn.get("arguments") or "{}")
                except (TypeError, ValueError):
                    b.fail(f"messages[{k}]: tool call {tc.get('id')!r} has arguments that are not JSON")
                if not isinstance(args, dict) or not isinstance(fn.get("name"), str):
                    b.fail(f"messages[{k}]: tool call {tc.get('id')!r} needs a name and an arguments object")
                calls.append((str(tc.get("id")), fn["name"], args))
            b.assistant(calls, _text(m.get("content")), i)
        elif role == "tool":
            b.result(str(m.get("tool_call_id")), m.get("content"), False, i)
        else:
            b.fail(f"messages[{k}]: unknown role {role!r}")
    return b.finish()


def read_openai_chat(path: str | Path) -> tuple[list[Trace], list[TraceError], int]:
    """``(traces, errors, merged)`` of an OpenAI chat log (see module doc): one trace per record that is not an
    earlier call of another record's episode; each bad record is one :class:`TraceError`."""
    path = Path(path)
    convs, errors = [], []
    for i, rec in _json_lines(path):
        try:
            msgs, tools, n = _openai_conversation(rec, path, i)
        except TraceError as e:
            errors.append(e)
            continue
        convs.append((i, msgs, tools, tuple(json.dumps(m, sort_keys=True) for m in msgs[:n])))
    prefixes = {key[:n] for _, _, _, key in convs for n in range(1, len(key))}
    last = {key: i for i, _, _, key in convs}
    traces, merged = [], 0
    for i, msgs, tools, key in convs:
        if key in prefixes or last[key] != i:   # an earlier call of a later record's episode, or a repeat
            merged += 1
            continue
        try:
            traces.append(_openai_trace(msgs, tools, path, i))
        except TraceError as e:
            errors.append(e)
    return traces, errors, merged


# ------------------------------------------------------------------------------------------------ writing
def _traject_params(schema: dict) -> tuple[list[dict], list[dict]]:
    props = schema.get("properties") if isinstance(schema, dict) else None
    props = props if isinstance(props, dict) else {}
    req_names = set(schema.get("required") or []) if isinstance(schema, dict) else set()
    req, opt = [], []
    for name, p in props.items():
        p = p if isinstance(p, dict) else {}
        jt = p.get("type")
        jt = next((x for x in jt if x != "null"), "string") if isinstance(jt, list) else (jt or "string")
        desc = str(p.get("description") or "")
        ptype = _JSON_TO_TRAJECT.get(jt, "STRING")
        if isinstance(p.get("enum"), list) and jt == "string":
            ptype, desc = "ENUM", f"{desc} One of: {', '.join(map(str, p['enum']))}.".strip()
        entry = {"name": name, "type": ptype, "description": desc, "default": p.get("default", "")}
        (req if name in req_names else opt).append(entry)
    return req, opt


def infer_tools(traces: Iterable[Trace]) -> list[dict]:
    """Declarations for tools only ever seen called: one property per argument name (its JSON type),
    required = the names every call supplies."""
    from hpd.bench.catalog import json_type_of_value

    seen: dict[str, list[dict]] = {}
    for t in traces:
        for turn in t.turns:
            for c in turn:
                seen.setdefault(c.name, []).append(c.arguments)
    out = []
    for name, calls in seen.items():
        props: dict[str, dict] = {}
        for args in calls:
            for k, v in args.items():
                props.setdefault(k, {"type": json_type_of_value(v) if v is not None else "string"})
        required = [k for k in props if all(k in a for a in calls)]
        out.append({"name": name, "description": "", "parameters": {"type": "object", "properties": props,
                                                                    "required": required}})
    return out


def catalog_entry(decl: dict, domain: str) -> dict:
    """The 11-key TRAJECT ``tools/<Domain>_tool.json`` entry of a declaration ``{name, description, parameters}``."""
    req, opt = _traject_params(decl.get("parameters") or {})
    name = decl["name"]
    return {"parent tool name": name, "parent tool description": decl.get("description") or "",
            "required_parameters": req, "optional_parameters": opt, "code": "", "tool name": name,
            "tool description": decl.get("description") or "", "API name": name, "domain name": domain,
            "output_info": {"output_info_summary": "recorded output of an imported trace", "output_format": "text"},
            "connected tools": []}


def task_entry(t: Trace, decls: dict[str, dict], fmt: str) -> dict:
    """A TRAJECT task entry (parallel when every call is in one turn, else sequential); see module doc."""
    steps = []
    for turn in t.turns:
        for c in turn:
            required = set((decls.get(c.name, {}).get("parameters") or {}).get("required") or [])
            split = ([{"name": k, "value": v} for k, v in c.arguments.items() if k in required],
                     [{"name": k, "value": v} for k, v in c.arguments.items() if k not in required])
            steps.append({"tool name": c.name, "tool description": decls.get(c.name, {}).get("description", ""),
                          "required parameters": split[0], "optional parameters": split[1],
                          "executed_output": c.output, "execution_status": "failed" if c.is_error else "success"})
    source = {"format": fmt, "file": t.file, "record": t.record}
    if len(t.turns) == 1:
        return {"query": t.query, "tool list": steps, "tool count": len(steps), "trajectory_type": "parallel",
                "final_answer": t.final_answer, "source": source}
    return {"query": t.query, "tool list": steps, "trajectory_type": "sequential",
            "final_answer": {"answer": t.final_answer, "reason": ""}, "sequence_name": f"imported {len(steps)} calls",
            "source": source}


def read_traces(files: Iterable[str | Path], fmt: str) -> tuple[list[Trace], list[TraceError], int]:
    """Every trace of ``files`` in format ``fmt``: ``(traces, errors, merged records)``."""
    if fmt not in FORMATS:
        raise ValueError(f"unknown format {fmt!r}; choose from {', '.join(FORMATS)}")
    traces, errors, merged = [], [], 0
    for f in files:
        if not Path(f).is_file():
            errors.append(TraceError(f, 0, "no such file"))
            continue
        try:
            if fmt == "pi-session":
                traces.extend(read_pi_session(f))
            else:
                tr, er, mg = read_openai_chat(f)
                traces.extend(tr)
                errors.extend(er)
                merged += mg
        except TraceError as e:
            errors.append(e)
        except (OSError, UnicodeDecodeError) as e:
            errors.append(TraceError(f, 0, f"cannot read: {e}"))
    return traces, errors, merged


def write_traject(traces: list[Trace], out: str | Path, *, domain: str = "Imported", fmt: str = "pi-session") -> dict:
    """Write ``traces`` as a TRAJECT-layout folder under ``out``; returns the counts for ``import.json``."""
    from hpd.runfolder import write_json

    out = Path(out)
    decls: dict[str, dict] = {}
    conflicts = n_inferred = 0
    for d in (d for t in traces for d in t.tools if isinstance(d.get("name"), str)):
        if d["name"] not in decls:
            decls[d["name"]] = d
        elif decls[d["name"]] != d:
            conflicts += 1
    for d in infer_tools([t for t in traces if not t.tools]):
        if d["name"] not in decls:
            decls[d["name"]] = d
            n_inferred += 1
    entries = [task_entry(t, decls, fmt) for t in traces]
    par = [e for e in entries if e["trajectory_type"] == "parallel"]
    seq = [e for e in entries if e["trajectory_type"] == "sequential"]
    write_json(out / "tools" / f"{domain}_tool.json", [catalog_entry(d, domain) for d in decls.values()])
    if par:
        write_json(out / "parallel" / domain / "simple_ver.json", par)
    if seq:
        write_json(out / "sequential" / domain / "traj_query.json", seq)
    return {"tasks": len(entries), "parallel": len(par), "sequential": len(seq), "tools": len(decls),
            "tools_inferred": n_inferred, "tool_conflicts": conflicts,
            "steps": sum(len(e["tool list"]) for e in entries),
            "failed_steps": sum(s["execution_status"] == "failed" for e in entries for s in e["tool list"])}
