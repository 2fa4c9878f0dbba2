"""Reading a TRAJECT-Bench task file entry by entry, and the checks that name a malformed entry.

A task file is a JSON list of task dicts (``hpd.bench.loader``). This module reads it item by item, so a
broken file is named down to the record: every problem is a :class:`BadEntry` with the file, the record
index and the field (a path such as ``tool list[2].tool name``), printed as one line::

    parallel/Music/hard_ver.json#51 field 'tool list[2].tool name': missing

Kinds of problem (``BadEntry.kind``):

* ``not-utf8``: the record's bytes are not UTF-8 (the field holding them is named);
* ``bad-json``: the record is not valid JSON (the reader cannot resynchronise: the rest of the file is lost);
* ``truncated``: the file ends inside the record (or before the list's closing ``]``);
* ``missing-field`` / ``wrong-type``: a field the loader reads is absent or has another JSON type
  (:func:`check_task`: ``query`` string, ``tool list`` / ``tool_list`` list of step dicts with a
  ``tool name`` string, parameter lists of ``{"name": str, ...}``, ``final_answer`` string or dict,
  ``execution_status`` and ``trajectory_type`` strings when present);
* ``unknown-tool``: a step's tool is missing from the catalog. The published data holds such steps
  (docs/traject-bench.md sec 2.3: they are unscorable steps, most of them recorded "not found" failures),
  so this kind is a problem only when the loader is asked for ``strict_catalog``.

What ``hpd demo``, ``hpd eval`` and ``hpd replay`` do with them (stop, or ``--skip-bad``): docs/reliability.md.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any, Iterator

_WS = re.compile(r"[ \t\n\r]*")
_ESCAPED = re.compile("[\udc80-\udcff]")      # bytes that were not UTF-8 (read with surrogateescape)
PARAM_KEYS = ("required parameters", "required_parameters", "optional parameters", "optional_parameters")


@dataclass(frozen=True)
class BadEntry:
    """One malformed entry: ``file`` (relative to the data folder), record ``index``, ``field`` path
    (None for a record that does not parse), ``kind`` and ``problem`` (see module docstring)."""

    file: str
    index: int
    field: str | None
    kind: str
    problem: str

    def line(self, root: Any = None) -> str:
        """``<file>#<index> field '<field>': <problem>`` (the file under ``root`` when given)."""
        f = f"{str(root).rstrip('/')}/{self.file}" if root is not None else self.file
        return f"{f}#{self.index}" + (f" field {self.field!r}" if self.field else "") + f": {self.problem}"

    def to_record(self) -> dict:
        return {"file": self.file, "index": self.index, "field": self.field, "kind": self.kind,
                "problem": self.problem}


class BadEntryError(ValueError):
    """A malformed entry stops the stage: the message is the one line (``entry.line``)."""

    def __init__(self, entry: BadEntry, message: str | None = None):
        super().__init__(message or entry.line())
        self.entry = entry


def skipped_lines(bad: list[BadEntry], limit: int = 5) -> list[str]:
    """What ``--skip-bad`` skipped: a count, then the first ``limit`` entries (file#index field: problem)."""
    if not bad:
        return []
    more = [f"... and {len(bad) - limit} more (manifest.json: bad_entries)"] if len(bad) > limit else []
    return [f"skipped {len(bad)} malformed entries (--skip-bad):", *(e.line() for e in bad[:limit]), *more]


class NotAList(Exception):
    """The file is not a JSON list (a non-task file such as ``sequence.json`` may be any JSON)."""


def read_text(raw: bytes) -> str:
    """The file's text; bytes that are not UTF-8 stay in it as lone surrogates (found per record later)."""
    return raw.decode("utf-8", errors="surrogateescape")


def items(text: str, rel: str) -> Iterator[tuple[int, Any, str]]:
    """``(index, value, raw text)`` of each item of the JSON list in ``text``, in order. The first item that
    does not parse raises :class:`BadEntryError` (``bad-json`` / ``truncated``); a document that is not a list
    raises :class:`NotAList`."""
    dec = json.JSONDecoder()
    end = len(text.rstrip())
    i = _WS.match(text, 0).end()
    if text[i:i + 1] != "[":
        raise NotAList(rel)
    i = _WS.match(text, i + 1).end()
    if text[i:i + 1] == "]":
        return
    n = 0
    while True:
        if i >= end:
            raise BadEntryError(BadEntry(rel, n, None, "truncated", f"truncated: the file ends before record {n}"))
        try:
            obj, j = dec.raw_decode(text, i)
        except json.JSONDecodeError as e:
            if e.pos >= end or e.msg.startswith("Unterminated string"):   # the text stops inside the record
                raise BadEntryError(BadEntry(rel, n, None, "truncated",
                                             f"truncated: the file ends inside record {n}")) from None
            raise BadEntryError(BadEntry(rel, n, None, "bad-json", f"not valid JSON at line {e.lineno} column "
                                         f"{e.colno} ({e.msg}); the rest of the file is unreadable")) from None
        yield n, obj, text[i:j]
        n += 1
        i = _WS.match(text, j).end()
        c = text[i:i + 1]
        if c == "]":
            return
        if c != ",":
            kind = "truncated" if i >= end else "bad-json"
            raise BadEntryError(BadEntry(rel, n, None, kind, "truncated: the list is not closed" if i >= end else
                                         f"not valid JSON after record {n - 1} (expected ',' or ']')"))
        i = _WS.match(text, i + 1).end()


def non_utf8_field(obj: Any, raw: str, path: str = "") -> str | None:
    """The field path whose text held bytes that are not UTF-8 (``<record>`` if only the layout did), or
    None when the record's text is clean."""
    if not _ESCAPED.search(raw):
        return None
    return _escaped_path(obj, path) or "<record>"


def _escaped_path(obj: Any, path: str) -> str | None:
    if isinstance(obj, str):
        return path if _ESCAPED.search(obj) else None
    if isinstance(obj, dict):
        for k, v in obj.items():
            sub = f"{path}.{k}" if path else str(k)
            if _ESCAPED.search(str(k)):
                return sub
            hit = _escaped_path(v, sub)
            if hit:
                return hit
    if isinstance(obj, list):
        for j, v in enumerate(obj):
            hit = _escaped_path(v, f"{path}[{j}]")
            if hit:
                return hit
    return None


def _type_name(v: Any) -> str:
    return "null" if v is None else {dict: "object", list: "array", str: "string", bool: "boolean"}.get(
        type(v), "number" if isinstance(v, (int, float)) else type(v).__name__)


def check_task(e: Any) -> tuple[str, str, str] | None:
    """The first problem of a task entry as ``(kind, field, problem)``, or None (see module docstring)."""
    if not isinstance(e, dict):
        return "wrong-type", "<record>", f"a task must be an object, not {_type_name(e)}"
    if "query" not in e:
        return "missing-field", "query", "missing"
    if not isinstance(e["query"], str):
        return "wrong-type", "query", f"must be a string, not {_type_name(e['query'])}"
    key = "tool list" if "tool list" in e else "tool_list"
    if key not in e:
        return "missing-field", "tool list", "missing"
    if not isinstance(e[key], list):
        return "wrong-type", key, f"must be a list, not {_type_name(e[key])}"
    for j, s in enumerate(e[key]):
        bad = _check_step(s, f"{key}[{j}]")
        if bad:
            return bad
    if "final_answer" not in e:
        return "missing-field", "final_answer", "missing"
    if not isinstance(e["final_answer"], (str, dict)):
        return "wrong-type", "final_answer", f"must be a string or an object, not {_type_name(e['final_answer'])}"
    if e.get("trajectory_type") is not None and not isinstance(e["trajectory_type"], str):
        return "wrong-type", "trajectory_type", f"must be a string, not {_type_name(e['trajectory_type'])}"
    return None


def _check_step(s: Any, at: str) -> tuple[str, str, str] | None:
    if not isinstance(s, dict):
        return "wrong-type", at, f"a step must be an object, not {_type_name(s)}"
    name_key = "tool name" if "tool name" in s else "tool_name"
    if name_key not in s:
        return "missing-field", f"{at}.tool name", "missing"
    if not isinstance(s[name_key], str) or not s[name_key].strip():
        return "wrong-type", f"{at}.{name_key}", f"must be a non-empty string, not {s[name_key]!r}"
    for k in PARAM_KEYS:
        v = s.get(k)
        if v is None or isinstance(v, dict):
            continue
        if not isinstance(v, list):
            return "wrong-type", f"{at}.{k}", f"must be a list, not {_type_name(v)}"
        for i, p in enumerate(v):
            if not isinstance(p, dict):
                return "wrong-type", f"{at}.{k}[{i}]", f"a parameter must be an object, not {_type_name(p)}"
            if "name" not in p:
                return "missing-field", f"{at}.{k}[{i}].name", "missing"
            if not isinstance(p["name"], str):
                return "wrong-type", f"{at}.{k}[{i}].name", f"must be a string, not {_type_name(p['name'])}"
    status = s.get("execution_status")
    if status is not None and not isinstance(status, str):
        return "wrong-type", f"{at}.execution_status", f"must be a string, not {_type_name(status)}"
    return None
