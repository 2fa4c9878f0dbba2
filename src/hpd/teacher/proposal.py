"""Teachers: who proposes candidate actions at a boundary.

A teacher answers a batch of :class:`Request` s (one per boundary in flight, each with its attempt
number, K and a per-request seed) with K :class:`~hpd.teacher.types.Proposal` s per request.

* :class:`PolicyTeacher`: any :mod:`hpd.policy.backends` Policy (hf / vllm / openai). The prompt is
  the **I view**: ``render_prompt(tokenizer, ctx, document=<control document at the configured
  privilege>)``; sampling is temperature 1 over the full vocabulary (``top_k=0``, ``top_p=1``:
  enforced, the values are recorded in the manifest), ``n=K`` from one batched ``Policy.act`` call
  for all boundaries in flight (chat-native backends such as the OpenAI one render the same
  context + document as a chat request). Completions go through :func:`hpd.policy.chat.parse_action`.
* Scripted teachers for tests and ablations (no model):
  - :class:`OracleTeacher`: reads the exact next action from the control document rendered at
    privilege ``oracle`` (parsed back with :func:`hpd.document.parse`), K identical copies;
  - :class:`ReferencePerturbedTeacher`: the reference action with one argument value changed
    (string -> appended marker, number -> +7919, bool -> negated; a call without arguments gets an
    unknown argument) in the first call, preferring an essential argument (not one of the replay's
    ignorable names like ``limit``/``page``, whose changes a ``near`` match legitimately accepts);
    final turns get their answer emptied;
  - :class:`GarbageTeacher`: random text / random tool names / non-JSON tool calls, seeded;
  - :class:`ReferenceTeacher`: the reference action verbatim (sanity baseline).

Seeding: each request carries ``seed = derive_seed(run_seed, boundary_id, attempt)``, so what a
boundary gets never depends on which other boundaries share its batch (needed for exact resume).
"""

from __future__ import annotations

import copy
import hashlib
import random
from dataclasses import dataclass
from typing import Any, Protocol, Sequence

from hpd.harness.messages import assistant_message, text as text_block, tool_call

from hpd.bench.match import IGNORABLE

from .canon import tool_calls
from .item import TeachItem
from .types import Proposal

TEACHERS = ("hf", "vllm", "openai", "oracle", "reference", "reference-perturbed", "garbage")


def derive_seed(seed: int, boundary_id: str, attempt: int) -> int:
    """Per-(run seed, boundary, attempt) seed in [0, 2**31): independent of batch composition."""
    h = hashlib.sha256(f"{seed}\x1f{boundary_id}\x1f{attempt}".encode()).digest()
    return int.from_bytes(h[:4], "big") & 0x7FFFFFFF


@dataclass
class Request:
    item: TeachItem
    attempt: int
    k: int
    seed: int


class Teacher(Protocol):
    name: str

    def propose(self, requests: Sequence[Request]) -> list[list[Proposal]]: ...


def _copy_msg(msg: dict) -> dict:
    return assistant_message(copy.deepcopy(msg.get("content") or []), stop_reason=msg.get("stopReason"))


def _fresh_ids(msg: dict, prefix: str) -> dict:
    msg = copy.deepcopy(msg)
    i = 0
    for b in msg.get("content") or []:
        if isinstance(b, dict) and b.get("type") == "toolCall":
            b["id"] = f"{prefix}_{i}"
            i += 1
    return msg


class ReferenceTeacher:
    """Proposes the reference action verbatim (K copies)."""

    name = "reference"

    def propose(self, requests):
        out = []
        for r in requests:
            m = _copy_msg(r.item.reference)
            out.append([Proposal(message=_fresh_ids(m, f"t{r.attempt}c{j}"), attempt=r.attempt, index=j) for j in range(r.k)])
        return out


class OracleTeacher:
    """Reads the exact next action from the oracle-level control document (no model)."""

    name = "oracle"

    def _action(self, item: TeachItem) -> dict | None:
        if item.oracle_action is not None:
            return item.oracle_action()
        from hpd.document.parse import parse  # the document's own parser
        doc = parse(item.document("oracle"))
        na = getattr(doc, "next_action", None)
        if na is None:
            return None
        if na.calls:
            return assistant_message([tool_call(f"o{i}", c.name, dict(c.arguments)) for i, c in enumerate(na.calls)])
        return assistant_message([text_block(na.final or "")])

    def propose(self, requests):
        out = []
        for r in requests:
            act = self._action(r.item)
            if act is None:
                act = assistant_message([text_block("")])
            out.append([Proposal(message=_fresh_ids(act, f"t{r.attempt}c{j}"), attempt=r.attempt, index=j) for j in range(r.k)])
        return out


def perturb(msg: dict, rng: random.Random | None = None) -> dict:
    """The reference action with one argument value changed (see module docstring)."""
    m = copy.deepcopy(msg)
    calls = tool_calls(m)
    if not calls:
        for b in m.get("content") or []:
            if b.get("type") == "text":
                b["text"] = ""
        return m
    c = calls[0]
    args = c.get("arguments") or {}
    keys = [k for k, v in args.items() if v not in (None, "")]
    essential = [k for k in keys if k.strip().lower() not in IGNORABLE]
    keys = essential or keys
    if not keys:
        c["arguments"] = {**args, "hpd_unknown_argument": "x"}
        return m
    k = sorted(keys)[0] if rng is None else rng.choice(sorted(keys))
    v = args[k]
    if isinstance(v, bool):
        args[k] = not v
    elif isinstance(v, (int, float)):
        args[k] = v + 7919
    elif isinstance(v, str):
        args[k] = v + " zq"
    elif isinstance(v, list):
        args[k] = list(v) + ["zq"]
    else:
        args[k] = "zq"
    c["arguments"] = args
    return m


class ReferencePerturbedTeacher:
    """The reference action with one argument changed (deterministic: the alphabetically first
    non-empty argument of the first call)."""

    name = "reference-perturbed"

    def propose(self, requests):
        out = []
        for r in requests:
            m = perturb(_copy_msg(r.item.reference))
            out.append([Proposal(message=_fresh_ids(m, f"t{r.attempt}c{j}"), attempt=r.attempt, index=j) for j in range(r.k)])
        return out


_WORDS = "lorem ipsum dolor sit amet consectetur adipiscing elit sed do eiusmod tempor".split()


class GarbageTeacher:
    """Seeded random actions: free text that ends the run early, calls to made-up tools, real tool
    names with random argument values, or broken ``<tool_call>`` markup.

    Where the contract allows ending, any non-empty text is a valid final turn to the harness
    (verification does not judge answer quality; ranking does), so there the free-text kind emits
    a whitespace-only answer: garbage, not a plausible answer."""

    name = "garbage"

    def _one(self, rng: random.Random, item: TeachItem, tag: str) -> tuple[str, dict]:
        tools = [t.get("name") for t in (item.context.get("tools") or []) if t.get("name")]
        kind = rng.randrange(4)
        words = " ".join(rng.choice(_WORDS) for _ in range(rng.randint(3, 9)))
        if kind == 0 or not tools:
            if item.can_end:
                return " ", assistant_message([text_block(" ")])
            return words, assistant_message([text_block(words)])
        if kind == 1:
            name = "tool_" + "".join(rng.choice("abcdefghijklmnop") for _ in range(8))
            return "", assistant_message([tool_call(f"{tag}_0", name, {"q": words})])
        if kind == 2:
            name = rng.choice(tools)
            args = {rng.choice(["query", "id", "q", "name", "value"]): words + f" {rng.randrange(10**6)}"}
            return "", assistant_message([tool_call(f"{tag}_0", name, args)])
        raw = "<tool_call>{not json " + words + "</tool_call>"
        return raw, assistant_message([text_block(raw)])

    def propose(self, requests):
        out = []
        for r in requests:
            rng = random.Random(r.seed)
            props = []
            for j in range(r.k):
                raw, msg = self._one(rng, r.item, f"t{r.attempt}c{j}")
                props.append(Proposal(message=msg, text=raw, attempt=r.attempt, index=j))
            out.append(props)
        return out


class PolicyTeacher:
    """A model teacher over any Policy backend (see module docstring)."""

    def __init__(self, policy: Any, tokenizer: Any, *, privilege: str = "plan", max_new_tokens: int = 256,
                 temperature: float = 1.0, enable_thinking: bool = False, name: str = "policy"):
        self.policy = policy
        self.tokenizer = tokenizer
        self.privilege = privilege
        self.max_new_tokens = max_new_tokens
        self.temperature = temperature
        self.enable_thinking = enable_thinking
        self.name = name
        # Full vocabulary: enforced, not configurable (recorded in the manifest).
        self.top_k = 0
        self.top_p = 1.0

    def prompt(self, item: TeachItem) -> str:
        from hpd.policy.chat import render_prompt
        return render_prompt(self.tokenizer, item.context, document=item.document(self.privilege),
                             enable_thinking=self.enable_thinking)

    def sampling(self) -> dict:
        return {"temperature": self.temperature, "top_k": self.top_k, "top_p": self.top_p,
                "max_new_tokens": self.max_new_tokens}

    def propose(self, requests):
        """One batched ``Policy.act`` for every request (render -> generate n=K -> parse_action); each
        prompt carries its own seed, so a boundary's candidates do not depend on its batch."""
        if not requests:
            return []
        k = max(r.k for r in requests)
        cands = self.policy.act(
            [r.item.context for r in requests], n=k,
            documents=[r.item.document(self.privilege) or None for r in requests],
            enable_thinking=self.enable_thinking, id_prefixes=[f"t{r.attempt}" for r in requests],
            seed=[r.seed for r in requests], **self.sampling())
        out = []
        for r, row in zip(requests, cands):
            out.append([Proposal(message=c.message, text=c.generation.text, attempt=r.attempt, index=j)
                        for j, c in enumerate(row[: r.k])])
        return out
