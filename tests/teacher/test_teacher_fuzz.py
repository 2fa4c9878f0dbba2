"""Fuzzing parser -> harness -> verification (hpd.teacher.fuzz): generated model outputs (unbalanced tags, huge
arguments, deep nesting, unicode, control characters, mixed content) each end as a recorded verdict, never an
exception. A short run here; the 10,000-case run is the slow test (also: ``python benchmarks/fuzz.py``)."""

import pytest

from hpd.policy import chat
from hpd.teacher import fuzz
from hpd.teacher import types as T


@pytest.fixture(scope="module")
def items(builtin_bench):
    return fuzz.replay_items(builtin_bench, 30)


def _check(records, n):
    assert len(records) == n and [r["i"] for r in records] == list(range(n))
    for r in records:
        assert "verdict" in r or "error" in r, r          # a recorded verdict or an error result, never nothing
        if "verdict" in r:
            assert set(r["verdict"]["reasons"]) <= set(T.REASONS) and r["verdict"]["ok"] == (not r["verdict"]["reasons"])
    s = fuzz.summarize(records)
    assert s["exceptions"] == 0, s["first_errors"]
    assert set(s["by_kind"]) == set(fuzz.KINDS)
    # the outputs reach every stage: verified calls, and rejections at parse, lookup, validation and replay
    assert s["verified_ok"] > 0
    for reason in (T.PARSE_ERROR, T.TRUNCATED, T.UNKNOWN_TOOL, T.INVALID_ARGS, T.NO_RECORDED_RESPONSE, T.PREMATURE_END):
        assert s["first_reason"].get(reason, 0) > 0, (reason, s["first_reason"])
    return s


def test_generator_covers_the_hard_shapes(items):
    texts = {k: [] for k in fuzz.KINDS}
    for i in range(200):
        kind, text, _ = fuzz.model_output(0, i, items[i % len(items)])
        texts[kind].append(text)
    assert fuzz.model_output(0, 7, items[0]) == fuzz.model_output(0, 7, items[0])      # a case is reproducible
    assert max(len(t) for t in texts["huge"]) >= 20_000
    assert any(t.count("[") >= 5_000 or t.count('{"a":') >= 5_000 for t in texts["deep"])
    assert any(any(0 < ord(c) < 32 and c not in "\n" for c in t) for t in texts["control"])
    assert any(any(ord(c) > 0xFFFF for c in t) for t in texts["unicode"])
    assert any(t.count("<tool_call>") != t.count("</tool_call>") for t in texts["unbalanced"])
    assert any("<think>" in t and "<tool_call>" in t for t in texts["mixed"])


def test_short_fuzz_has_no_exceptions(items):
    _check(list(fuzz.run_fuzz(items, 600, seed=1)), 600)


def test_an_exception_is_recorded_not_raised(items, monkeypatch):
    real = chat.parse_completion

    def flaky(text):
        if "<think>" in text:
            raise RuntimeError("parser bug")
        return real(text)

    monkeypatch.setattr(chat, "parse_completion", flaky)
    records = list(fuzz.run_fuzz(items, 50, seed=2))
    errors = [r for r in records if "error" in r]
    assert errors and all(r["error"] == "RuntimeError: parser bug" and "verdict" not in r for r in errors)
    assert fuzz.summarize(records)["exceptions"] == len(errors) < 50


def test_a_harness_exception_counts(items, monkeypatch):
    from hpd.harness import loop

    monkeypatch.setattr(loop, "_js_call", lambda b: 1 / 0)
    r = fuzz.fuzz_case(0, 0, items[0], items[0].restore())            # case 0 is a valid call: the harness steps
    assert "harness raised ZeroDivisionError" in r["error"] and r["verdict"]["ok"] is False


@pytest.mark.slow
def test_ten_thousand_outputs_no_exceptions(items):
    s = _check(list(fuzz.run_fuzz(items, 10_000, seed=0)), 10_000)
    assert s["n"] == 10_000
