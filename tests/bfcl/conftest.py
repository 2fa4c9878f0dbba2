"""BFCL test material: a scripted *oracle* policy that answers from BFCL's possible answers (or, per entry, a wrong
value, a malformed call, a text reply or a hostile call), so scoring paths are exercised with known outcomes."""

from __future__ import annotations

import ast
import importlib
import inspect
import json
import os
import zlib

import pytest

from hpd.policy.backends.base import Generation, Policy

MODES = ("good", "good", "wrong", "malformed", "text")


def require_bfcl() -> None:
    """bfcl-eval missing: fail in CI (it is installed there), skip elsewhere, with the reason."""
    from hpd.bfcl import lib

    try:
        lib.load()
        lib.official_handler_class()
    except Exception as e:  # BFCLUnavailable, or openai missing for the official handler
        if os.environ.get("CI"):
            pytest.fail(f"bfcl-eval unusable in CI: {e}", pytrace=False)
        pytest.skip(f"bfcl-eval unusable: {e}")


@pytest.fixture(scope="session")
def bfcl():
    require_bfcl()
    from hpd import bfcl as mod

    return mod


def mode_by_hash(case_id: str) -> str:
    return MODES[zlib.crc32(case_id.encode()) % len(MODES)]


def _tool_call(name: str, args) -> str:
    return f"<tool_call>\n{json.dumps({'name': name, 'arguments': args})}\n</tool_call>"


def ast_answer(answer: list[dict]) -> list[tuple[str, dict]]:
    """A possible answer ``[{fn: {param: [allowed...]}}]`` -> calls with the first allowed non-empty value."""
    calls = []
    for call in answer:
        (fn, params), = call.items()
        args = {}
        for p, allowed in params.items():
            vals = [v for v in allowed if v != ""]
            if vals:
                args[p] = vals[0]
        calls.append((fn.replace(".", "_"), args))
    return calls


def _method_params(classes: list[str], name: str) -> list[str]:
    from bfcl_eval.constants.executable_backend_config import CLASS_FILE_PATH_MAPPING

    for cls in classes:
        klass = getattr(importlib.import_module(CLASS_FILE_PATH_MAPPING[cls]), cls)
        if hasattr(klass, name):
            return [p for p in inspect.signature(getattr(klass, name)).parameters if p != "self"]
    return []


def gt_calls(call_strings: list[str], classes: list[str]) -> list[tuple[str, dict]]:
    """Ground-truth strings such as ``sort('a.pdf')`` -> ``(name, {param: value})`` (positional args by signature)."""
    out = []
    for s in call_strings:
        node = ast.parse(s, mode="eval").body
        name = node.func.id
        args = {k.arg: ast.literal_eval(k.value) for k in node.keywords}
        for p, a in zip(_method_params(classes, name), node.args):
            args[p] = ast.literal_eval(a)
        out.append((name, args))
    return out


def _user_segments(prompt: str) -> list[str]:
    return [seg for seg in prompt.split("<|im_start|>user\n")[1:]]


class OraclePolicy(Policy):
    """Answers a rendered BFCL prompt by finding its entry (the longest first-question text inside the prompt) and
    replying according to ``mode(case_id)``: ``good``, ``wrong`` (a changed value / a dropped call), ``malformed``,
    ``text`` or ``hostile`` (multi-turn: the right calls plus ``__import__('os').system(...)``)."""

    name = "oracle"

    def __init__(self, cases, tokenizer, mode=mode_by_hash, hostile_path: str | None = None):
        self.cases = {c.id: c for cs in cases.values() for c in cs}
        self.tokenizer = tokenizer
        self.mode = mode
        self.hostile_path = hostile_path
        self.keys = sorted(((self._first_text(c), c.id) for c in self.cases.values()), key=lambda k: -len(k[0]))

    @staticmethod
    def _first_text(case) -> str:
        turn = case.entry["question"][0]
        return [m["content"] for m in turn if m["role"] == "user"][-1]

    def _case(self, prompt: str):
        for text, cid in self.keys:
            if text and text in prompt:
                return self.cases[cid]
        return None

    def generate(self, prompts, n=1, temperature=1.0, top_k=0, top_p=1.0, max_new_tokens=256, seed=None,
                 logprobs=False):
        return [[Generation(text=self.reply(p), token_ids=[1, 2, 3])] for p in prompts]

    def reply(self, prompt: str) -> str:
        case = self._case(prompt)
        if case is None:
            return "I do not know this question."
        if case.category.startswith("multi_turn"):
            return self._multi_turn(case, prompt)
        mode = self.mode(case.id)
        if case.category.endswith("irrelevance"):
            return "None of these functions fit." if mode != "wrong" else _tool_call("any_function", {})
        if case.answer is None:   # live_relevance: any call is right
            fn = case.entry["function"][0]["name"].replace(".", "_")
            return _tool_call(fn, {}) if mode != "text" else "No call."
        calls = ast_answer(case.answer["ground_truth"])
        if mode == "text":
            return "I would call a function here."
        if mode == "malformed":
            return f'<tool_call>\n{{"name": "{calls[0][0]}", "arguments": [1, 2]}}\n</tool_call>'
        if mode == "wrong":
            name, args = calls[0]
            calls[0] = (name, {k: "wrong-value-123" for k in args} or {"unexpected": 1})
        return "\n".join(_tool_call(n, a) for n, a in calls)

    def _multi_turn(self, case, prompt: str) -> str:
        segs = _user_segments(prompt)
        turns = [s for s in segs if not s.startswith("<tool_response>")]
        t = len(turns) - 1
        if segs and segs[-1].startswith("<tool_response>"):
            return "Done."
        gt = case.answer["ground_truth"][t] if t < len(case.answer["ground_truth"]) else []
        mode = self.mode(case.id)
        if not gt or (mode == "text" and t == 0):
            return "I need more information to do that."
        if mode == "malformed" and t == 0:
            return '<tool_call>\n{"name": "cd", "arguments": [1]}\n</tool_call>'
        calls = gt_calls(gt, case.entry["involved_classes"])
        if mode == "wrong" and t == 0:
            calls = calls[:-1] or [("ls", {})]
        text = "\n".join(_tool_call(n, a) for n, a in calls)
        if mode == "hostile" and t == 0:
            text += "\n" + _tool_call("__import__('os').system", {"command": f"touch {self.hostile_path}"})
        return text


@pytest.fixture(name="OraclePolicy")
def oracle_policy_class():
    """The scripted policy class above, as a fixture: ``from conftest import`` would resolve to whichever
    tests/**/conftest.py Python imported first under that module name."""
    return OraclePolicy
