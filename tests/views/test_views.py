"""View builder: supervised tokens per view, loss masks, the explicit length policy."""

import copy

import pytest

from hpd.policy import chat
from hpd.views import (OMITTED_MARKER, RECONSTRUCT_INSTRUCTION, Renderer, ViewExample, build_view, build_views,
                       synthetic_records)


@pytest.fixture(scope="module")
def recs():
    return synthetic_records(4, seed=3)


def test_supervised_tokens_of_each_view(tok, recs):
    r = Renderer(tok)
    ex, rep = build_views(recs, r, max_length=4096)
    rec = recs[1]                       # after the tool batch: target is a final text answer
    call_rec = recs[0]                  # initial boundary: target is a tool call
    t0, t1 = ex["T"][0], ex["T"][1]
    assert tok.decode(t0.completion_ids) == chat.render_action(tok, call_rec["target"])
    dec_call = tok.decode(t0.completion_ids)
    name = call_rec["target"]["content"][0]["name"]
    assert dec_call.startswith("<tool_call>") and f'"name": "{name}"' in dec_call and dec_call.endswith("<|im_end|>")
    answer = rec["target"]["content"][0]["text"]
    assert tok.decode(t1.completion_ids) == answer + "<|im_end|>"
    i1 = ex["I"][1]
    assert i1.completion_ids == t1.completion_ids                      # I: same target as T ...
    assert rec["document"] in tok.decode(i1.prompt_ids)           # ... with the document in the prompt
    assert rec["document"] not in tok.decode(t1.prompt_ids)
    r1 = ex["R"][1]
    assert tok.decode(r1.completion_ids) == rec["document"] + "<|im_end|>"   # R: the document is the target
    rp = tok.decode(r1.prompt_ids)
    assert RECONSTRUCT_INSTRUCTION in rp and rp.endswith("<|im_start|>assistant\n<think>\n\n</think>\n\n")
    assert rec["document"] not in rp
    # the prompt is exactly what serving renders for this boundary (T) -> same ids
    assert list(t1.prompt_ids) == tok(chat.render_prompt(tok, rec["context"]), add_special_tokens=False)["input_ids"]
    # labels: loss only on completion tokens
    lab = t1.labels()
    assert lab[: len(t1.prompt_ids)] == [-100] * len(t1.prompt_ids)
    assert lab[len(t1.prompt_ids):] == list(t1.completion_ids)
    assert rep.stats("T").kept == len(recs) and not rep.any_loss


def test_reference_target_setting(tok, recs):
    rs = copy.deepcopy(recs)
    rs[0]["reference"] = {"role": "assistant", "content": [{"type": "text", "text": "REFERENCE"}], "stopReason": "stop"}
    ex, _ = build_view(rs, Renderer(tok), "T", max_length=4096, target="reference")
    assert tok.decode(ex[0].completion_ids) == "REFERENCE<|im_end|>"
    ex2, _ = build_view(rs, Renderer(tok), "T", max_length=4096, target="teacher")
    assert tok.decode(ex2[0].completion_ids) != "REFERENCE<|im_end|>"


def _long_record(base: dict, n_calls: int = 3, big: str = "lorem ipsum " * 60) -> dict:
    """A record with several tool batches carrying long outputs."""
    rec = copy.deepcopy(base)
    msgs = [rec["context"]["messages"][0]]
    for k in range(n_calls):
        msgs.append({"role": "assistant", "content": [{"type": "toolCall", "id": f"c{k}", "name": "get_weather",
                                                       "arguments": {"city": "Oslo"}}], "stopReason": "toolUse"})
        msgs.append({"role": "toolResult", "toolCallId": f"c{k}", "toolName": "get_weather",
                     "content": [{"type": "text", "text": f"out{k} " + big}], "isError": False})
    rec["context"]["messages"] = msgs
    rec["uid"] = "long"
    return rec


def test_length_policy_drops_oldest_tool_outputs_and_counts(tok, recs):
    r = Renderer(tok)
    rec = _long_record(recs[1])
    full, _ = build_view([rec], r, "T", max_length=100000)
    n_full = full[0].n_tokens
    # room for the context minus roughly one tool output
    ex, rep = build_view([rec], r, "T", max_length=n_full - 50)
    st = rep.stats("T")
    assert st.kept == 1 and st.trimmed == 1 and st.tool_outputs_omitted == 1 and ex[0].trimmed == 1
    text = tok.decode(ex[0].prompt_ids)
    assert OMITTED_MARKER in text and "out0 " not in text and "out1 " in text and "out2 " in text  # oldest first
    assert ex[0].n_tokens <= n_full - 50
    assert ex[0].completion_ids == full[0].completion_ids             # the completion is never cut
    # skip policy: the same row is skipped, and counted
    ex, rep = build_view([rec], r, "T", max_length=n_full - 50, length_policy="skip")
    assert ex == [] and rep.stats("T").skipped_too_long == 1 and rep.skipped_uids["T"] == ["long"]
    # impossible budget: skipped even after omitting every tool output
    ex, rep = build_view([rec], r, "T", max_length=60)
    assert ex == [] and rep.stats("T").skipped_too_long == 1
    assert "skipped 1 too long" in rep.summary()


def test_fewest_omissions_found_by_search_equal_the_linear_scan(tok, recs):
    """Binary search over the number of omitted outputs gives what trying k = 0, 1, 2, ... gives, also
    with outputs shorter than the marker (kept as they are, so a row never grows as k grows)."""
    from hpd.views.build import _fit
    from hpd.views.length_policy import omit_tool_outputs, omittable_indices

    r = Renderer(tok)
    rec = _long_record(recs[1], n_calls=6)
    msgs = rec["context"]["messages"]
    for k in (2, 4):   # two short outputs among long ones
        msgs[2 * k + 2]["content"] = [{"type": "text", "text": "ok"}]
    ctx = rec["context"]
    completion = r.action(rec["target"])

    def linear(max_length):
        for k in range(len(omittable_indices(ctx)) + 1):
            p, c = r.encode(r.prompt(omit_tool_outputs(ctx, k)), completion)
            if len(p) + len(c) <= max_length:
                return p, c, k
        return None

    assert len(omittable_indices(ctx)) == 4      # the two short outputs are never replaced
    every = omit_tool_outputs(ctx, 4)
    assert sum(m.get("content") == [{"type": "text", "text": OMITTED_MARKER}] for m in every["messages"]) == 4
    assert sum(m.get("content") == [{"type": "text", "text": "ok"}] for m in every["messages"]) == 2
    lens = [sum(map(len, r.encode(r.prompt(omit_tool_outputs(ctx, k)), completion))) for k in range(5)]
    assert lens == sorted(lens, reverse=True)   # monotone: never longer with more omitted
    for max_length in sorted(set(lens) | {x - 1 for x in lens} | {lens[0] + 5, 10}):
        assert _fit(r, "T", ctx, None, completion, max_length, "drop_oldest_tool_outputs") == linear(max_length)


def test_missing_document_is_counted(tok, recs):
    rs = copy.deepcopy(recs[:2])
    del rs[0]["document"]
    ex, rep = build_views(rs, Renderer(tok), ["T", "I", "R"], max_length=4096)
    assert len(ex["T"]) == 2 and len(ex["I"]) == 1 and len(ex["R"]) == 1
    assert rep.stats("I").skipped_missing == 1 and rep.stats("R").skipped_missing == 1


def test_view_example_validation():
    with pytest.raises(ValueError):
        ViewExample(view="X", prompt_ids=(1,), completion_ids=(2,))
    with pytest.raises(ValueError):
        ViewExample(view="T", prompt_ids=(), completion_ids=(2,))
    e = ViewExample(view="R", prompt_ids=(1, 2), completion_ids=(3,), uid="u")
    assert ViewExample.from_dict(e.to_dict()) == e
