"""Fuzzing of the teach path: generated model outputs through parser -> harness -> verification.

:func:`model_output` writes one completion a model could emit at a boundary (case ``i`` of a seed is
reproducible on its own). Each case is one of :data:`KINDS`:

* ``call`` / ``mutated_call``: the boundary's reference action in the Qwen3 format, as is or cut, spliced or
  with a character changed (valid calls, near misses, broken JSON);
* ``unbalanced``: ``<tool_call>``/``</tool_call>``/``<think>``/``</think>`` opened, closed, nested or
  repeated without their partners, end-of-turn tokens in the middle;
* ``huge``: a 20k..200k-character string argument, a 5,000-item array or 2,000 keys;
* ``deep``: arrays/objects nested 50..20,000 deep (past Python's recursion limit);
* ``unicode`` / ``control``: emoji, combining marks, right-to-left text, ``\\u2028``, escaped lone surrogates;
  raw control characters (NUL..US, DEL) inside and outside JSON strings;
* ``numbers``: ``1e3``, ``-0``, ``1e400``, ``NaN``, integers above 2^53;
* ``mixed``: thinking, text and tool calls (valid and broken) in random order;
* ``noise``: random fragments of the protocol's markup and JSON.

:func:`run_fuzz` parses each output with :mod:`hpd.policy.chat` (the unguarded parser, so a parser bug
is an exception, not a swallowed fallback), verifies it with :func:`hpd.teacher.verify.verify` (which
steps a fork of the boundary harness) and records every case: ``{"i", "kind", "item", "chars",
"verdict"}`` or ``{"i", "kind", "item", "chars", "error"}``. An exception anywhere, including one the
verifier caught from the harness (``harness raised ...``), is an ``error`` record and counts in
``exceptions``.
"""

from __future__ import annotations

import json
import random
from collections import Counter
from typing import Any, Iterable

from hpd.policy import chat
from hpd.teacher.canon import tool_calls
from hpd.teacher.item import TeachItem
from hpd.teacher.verify import verify

KINDS = ("call", "mutated_call", "unbalanced", "huge", "deep", "unicode", "control", "numbers", "mixed", "noise")
FRAGMENTS = ("<tool_call>", "</tool_call>", "<think>", "</think>", "<|im_end|>", "<|endoftext|>", "<tool_response>",
             '{"name": ', '"arguments": ', "{", "}", "[", "]", '"', "\\", "\\u12", ":", ",", "\n", " ", "null", "1e999",
             "NaN", "-0", '{"a": 1}', "\x00", "é", "🙂", "\u2028")
UNICODE = ("é", "🙂", "👩‍👩‍👧", "e\u0301", "שלום", "\u202e", "\u2028", "\ufeff", "\\ud800", "\\udfff", "漢字", "\U0001f600")
NUMBERS = ("1e3", "-0", "-0.0", "1e400", "-1e400", "1e-400", "12345678901234567890", "9007199254740993", "1.5e0",
           "0.1", "NaN", "Infinity", "1e21", "01", "1.", ".5", "+1", "0x10")


def _call_text(name: Any, args_text: str) -> str:
    return f'<tool_call>\n{{"name": {json.dumps(name, ensure_ascii=False)}, "arguments": {args_text}}}\n</tool_call>'


def _reference_calls(item: TeachItem) -> list[tuple[str, dict]]:
    return [(c.get("name", ""), c.get("arguments", {})) for c in tool_calls(item.reference)]


def _tool_names(item: TeachItem) -> list[str]:
    return [t.get("name", "") for t in item.context.get("tools") or [] if isinstance(t, dict)] or ["tool"]


def _valid_calls(rng: random.Random, item: TeachItem) -> str:
    calls = _reference_calls(item) or [(rng.choice(_tool_names(item)), {})]
    return "\n".join(_call_text(n, json.dumps(a, ensure_ascii=False)) for n, a in calls)


def _mutate(rng: random.Random, s: str) -> str:
    if not s:
        return s
    op, k = rng.randrange(4), rng.randrange(len(s))
    if op == 0:
        return s[:k]
    if op == 1:
        return s[:k] + rng.choice(FRAGMENTS) + s[k:]
    if op == 2:
        return s[:k] + s[k + 1:]
    return s[:k] + chr(rng.randrange(32, 0x250)) + s[k + 1:]


def _unbalanced(rng: random.Random, item: TeachItem) -> str:
    call = _valid_calls(rng, item)
    forms = [
        "<tool_call>\n" + call, call.replace("</tool_call>", ""), "</tool_call>" + call, "<think>" + call,
        "</think>" + call, call + "</think>", "<tool_call>" + call + "</tool_call>", call.replace("<tool_call>", "", 1),
        "<think><think>x</think>" + call, call + "<|im_end|>" + call, "<tool_call><tool_call></tool_call>",
        "<think>" * rng.randrange(1, 5) + "text" + "</tool_call>" * rng.randrange(1, 5),
    ]
    return rng.choice(forms)


def _huge(rng: random.Random, item: TeachItem) -> str:
    name = rng.choice(_tool_names(item))
    form = rng.randrange(3)
    if form == 0:
        args = {"q": "x" * rng.randrange(20_000, 200_000)}
    elif form == 1:
        args = {"items": [rng.randrange(10 ** 6) for _ in range(5_000)]}
    else:
        args = {f"k{j}": j for j in range(2_000)}
    return _call_text(name, json.dumps(args))


def _deep(rng: random.Random, item: TeachItem) -> str:
    depth = rng.choice((50, 200, 400, 450, 990, 5_000, 20_000))
    body = ("[" * depth + "1" + "]" * depth) if rng.random() < 0.5 else ('{"a":' * depth + "1" + "}" * depth)
    if rng.random() < 0.3:
        body = body[: len(body) // 2]  # unclosed
    return _call_text(rng.choice(_tool_names(item)), '{"q": ' + body + "}")


def _unicode(rng: random.Random, item: TeachItem) -> str:
    u = "".join(rng.choice(UNICODE) for _ in range(rng.randrange(1, 12)))
    name = rng.choice(_tool_names(item) + [u])
    return rng.choice(UNICODE) + _call_text(name, '{"q": "' + u + '"}') + u


def _control(rng: random.Random, item: TeachItem) -> str:
    c = "".join(chr(rng.choice(list(range(32)) + [127])) for _ in range(rng.randrange(1, 6)))
    name = rng.choice(_tool_names(item))
    return c + _call_text(name, '{"q": "a' + c + 'b"' + c + "}") + c


def _numbers(rng: random.Random, item: TeachItem) -> str:
    calls = _reference_calls(item) or [(rng.choice(_tool_names(item)), {"n": 1})]
    name, args = rng.choice(calls)
    keys = list(args) or ["n"]
    parts = [f"{json.dumps(k, ensure_ascii=False)}: {rng.choice(NUMBERS)}" for k in rng.sample(keys, rng.randrange(1, len(keys) + 1))]
    return _call_text(name, "{" + ", ".join(parts) + "}")


def _mixed(rng: random.Random, item: TeachItem) -> str:
    pieces = []
    for _ in range(rng.randrange(1, 7)):
        r = rng.randrange(5)
        if r == 0:
            pieces.append(f"<think>{rng.choice(['plan', '', 'x' * 50, '</tool_call>'])}</think>")
        elif r == 1:
            pieces.append(rng.choice(["Answer: 42.", "", "\n\n", "Let me call a tool."]))
        elif r == 2:
            pieces.append(_valid_calls(rng, item))
        elif r == 3:
            pieces.append(_mutate(rng, _valid_calls(rng, item)))
        else:
            pieces.append(rng.choice(FRAGMENTS))
    return "".join(pieces)


def _noise(rng: random.Random, item: TeachItem) -> str:
    return "".join(rng.choice(FRAGMENTS) if rng.random() < 0.7 else chr(rng.randrange(0x20, 0x3000))
                   for _ in range(rng.randrange(0, 60)))


_MAKERS = {"call": _valid_calls, "mutated_call": lambda rng, it: _mutate(rng, _valid_calls(rng, it)),
           "unbalanced": _unbalanced, "huge": _huge, "deep": _deep, "unicode": _unicode, "control": _control,
           "numbers": _numbers, "mixed": _mixed, "noise": _noise}


def model_output(seed: int, i: int, item: TeachItem) -> tuple[str, str, bool]:
    """Case ``i`` of ``seed`` at ``item``'s boundary: ``(kind, completion text, truncated)``."""
    rng = random.Random(f"{seed}:{i}")
    kind = KINDS[i % len(KINDS)]
    prefix = rng.choice(["", "", "<think>\nLet me think.\n</think>\n\n", "Calling.\n"])
    return kind, prefix + _MAKERS[kind](rng, item), rng.random() < 0.1


def parse(text: str, truncated: bool) -> dict:
    """:func:`hpd.policy.chat.parse_action` without its catch-all, so a parser bug raises here."""
    parsed = chat.parse_completion(text)
    return chat.assistant_message(chat.parsed_to_blocks(parsed, id_prefix="fuzz"),
                                  chat.stop_reason_for(parsed, "length" if truncated else "stop"), model="fuzz")


def fuzz_case(seed: int, i: int, item: TeachItem, base: Any) -> dict:
    """One case through parser -> harness -> verification, recorded as a verdict or an error."""
    kind, text, truncated = model_output(seed, i, item)
    rec: dict = {"i": i, "kind": kind, "item": item.id, "chars": len(text), "truncated": truncated}
    try:
        v = verify(parse(text, truncated), item, base, text=text)
    except Exception as exc:  # noqa: BLE001 - the point of the fuzz: record, never stop
        rec["error"] = f"{type(exc).__name__}: {exc}"[:300]
        return rec
    if "harness raised" in v.detail:
        rec["error"] = v.detail[:300]
    rec["verdict"] = v.to_dict()
    return rec


def run_fuzz(items: list[TeachItem], n: int, seed: int = 0) -> Iterable[dict]:
    """``n`` cases over ``items`` (case ``i`` at ``items[i % len(items)]``), one record each, in order."""
    if not items:
        raise ValueError("fuzzing needs at least one boundary")
    bases: dict[int, Any] = {}
    for i in range(n):
        k = (i // len(KINDS)) % len(items)
        if k not in bases:
            bases[k] = items[k].restore()
        yield fuzz_case(seed, i, items[k], bases[k])


def replay_items(bench: Any, n_tasks: int = 40) -> list[TeachItem]:
    """Boundaries to fuzz at: a spread of ``n_tasks`` tasks of ``bench`` plus every task with an unscorable
    step (recorded failures, off-catalog calls), replayed with live forks (:func:`hpd.boundary.replay_task`)."""
    from hpd.boundary import ReplayConfig, replay_task
    from hpd.teacher.boundaries import items_from_boundaries

    tasks = list(bench.tasks[:: max(1, len(bench.tasks) // max(1, n_tasks))][:n_tasks])
    tasks += [t for t in bench.tasks if any(not st.scorable for st in t.steps) and t not in tasks][:n_tasks]
    cfg = ReplayConfig()
    return items_from_boundaries([b for t in tasks for b in replay_task(t, bench, cfg, keep_forks=True, compile_docs=False)])


def summarize(records: Iterable[dict]) -> dict:
    """Counts over fuzz records: ``n``, ``exceptions``, ``verified_ok``, ``by_kind``, ``first_reason``
    (the first rejection reason of each verdict, ``ok`` when verified), ``first_errors`` (up to 5)."""
    n = exc = ok = 0
    kinds: Counter = Counter()
    reasons: Counter = Counter()
    first_errors: list[dict] = []
    for r in records:
        n += 1
        kinds[r["kind"]] += 1
        if "error" in r:
            exc += 1
            if len(first_errors) < 5:
                first_errors.append(r)
        v = r.get("verdict")
        if v is not None:
            ok += bool(v["ok"])
            reasons.update(v["reasons"][:1] or ["ok"])
    return {"n": n, "exceptions": exc, "verified_ok": ok, "by_kind": dict(sorted(kinds.items())),
            "first_reason": dict(sorted(reasons.items())), "first_errors": first_errors}
