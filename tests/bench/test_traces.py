"""hpd.bench.traces: users' traces (Pi sessions, OpenAI chat logs) -> TRAJECT layout. Hand-written traces of
both formats import into a folder the loader reads back (tools, steps, outputs, answers, kinds); every kind of
bad trace is one line naming the file, the record index and the reason."""

from __future__ import annotations

import json

import pytest

from hpd.bench.loader import load_bench
from hpd.bench.traces import TraceError, read_openai_chat, read_pi_session, read_traces, write_traject

WEATHER = {"name": "get_weather", "description": "Weather of a city.",
           "parameters": {"type": "object", "properties": {
               "city": {"type": "string", "description": "city name"},
               "unit": {"type": "string", "enum": ["C", "F"]},
               "days": {"type": "integer"}, "tags": {"type": "array", "items": {"type": "string"}}},
               "required": ["city"]}}


def _jsonl(path, rows):
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def _pi(query="Weather in Oslo and Rome?", final="Oslo 3C, Rome 18C."):
    call = lambda i, city: {"type": "toolCall", "id": f"c{i}", "name": "get_weather", "arguments": {"city": city, "days": 1}}
    result = lambda i, out, err=False: {"role": "toolResult", "toolCallId": f"c{i}", "toolName": "get_weather",
                                        "content": [{"type": "text", "text": out}], "isError": err}
    return [{"role": "system", "content": "sys", "toolsAdded": [WEATHER]},
            {"role": "user", "content": query},
            {"role": "assistant", "content": [call(0, "Oslo"), call(1, "Rome")], "stopReason": "toolUse"},
            result(0, "3C"), result(1, "ERROR: rate limited", True),
            {"role": "assistant", "content": [call(2, "Rome")], "stopReason": "toolUse"}, result(2, "18C"),
            {"role": "assistant", "content": [{"type": "text", "text": final}], "stopReason": "stop"}]


def _openai_record(query="Weather in Paris?", answer="Paris: 12C."):
    tc = {"id": "t0", "type": "function", "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'}}
    req = {"messages": [{"role": "system", "content": "sys"}, {"role": "user", "content": query},
                        {"role": "assistant", "content": None, "tool_calls": [tc]},
                        {"role": "tool", "tool_call_id": "t0", "content": "12C"}],
           "tools": [{"type": "function", "function": WEATHER}]}
    first = {"request": {**req, "messages": req["messages"][:2]},
             "response": {"choices": [{"message": {"role": "assistant", "content": None, "tool_calls": [tc]}}]}}
    last = {"request": req, "response": {"choices": [{"message": {"role": "assistant", "content": answer}}]}}
    return first, last


def test_pi_session_and_openai_log_import(tmp_path):
    s1 = _jsonl(tmp_path / "s1.jsonl", _pi())
    # a coding-agent session: entries with id/parentId, an abandoned branch, no tool declarations
    msgs = _pi("Weather in Lima?", "Lima 20C.")[1:]
    entries = [{"type": "session", "version": 3, "id": "root"}]
    parent = "root"
    for k, m in enumerate(msgs):
        entries.append({"type": "message", "id": f"e{k}", "parentId": parent, "message": m})
        parent = f"e{k}"
    entries.insert(3, {"type": "message", "id": "dead", "parentId": "e0",
                       "message": {"role": "assistant", "content": [{"type": "text", "text": "abandoned"}]}})
    s2 = _jsonl(tmp_path / "s2.jsonl", entries)
    first, last = _openai_record()
    log = _jsonl(tmp_path / "chat.jsonl", [first, last, {"messages": [
        {"role": "user", "content": "Say hi"}, {"role": "assistant", "content": "hi"}]}])

    pi, errors, _ = read_traces([s1, s2], "pi-session")
    oa, errors2, merged = read_openai_chat(log)
    assert errors == errors2 == [] and merged == 1 and len(pi) == 2 and len(oa) == 2
    assert [len(t) for t in pi[0].turns] == [2, 1] and pi[1].final_answer == "Lima 20C." and not pi[1].tools

    out = tmp_path / "data"
    counts = write_traject(pi + oa, out, domain="Mine")
    assert counts["tasks"] == 4 and counts["parallel"] == 1 and counts["sequential"] == 3
    assert counts["tools_inferred"] == 0 and counts["failed_steps"] == 2   # get_weather is declared by s1
    bench = load_bench(out)
    by_q = {t.query: t for t in bench.tasks}
    oslo = by_q["Weather in Oslo and Rome?"]
    assert oslo.kind == "sequential" and oslo.final_answer == "Oslo 3C, Rome 18C."
    assert [(s.output, s.status, s.scorable) for s in oslo.steps] == [
        ("3C", "success", True), ("ERROR: rate limited", "failed", False), ("18C", "success", True)]
    assert oslo.steps[0].required_names == ["city"] and oslo.steps[0].arguments == {"city": "Oslo", "days": 1}
    paris = by_q["Weather in Paris?"]
    assert paris.kind == "parallel" and paris.final_answer == "Paris: 12C." and paris.steps[0].output == "12C"
    assert by_q["Say hi"].steps == [] and by_q["Say hi"].n_boundaries == 1
    # the declared schema survives the TRAJECT type mapping
    schema = bench.catalog.schema(oslo.steps[0].key)
    props = schema["properties"]
    assert schema["required"] == ["city"] and props["days"]["type"] == "integer" and props["tags"]["type"] == "array"
    assert "One of: C, F." in props["unit"]["description"]


def test_tools_are_inferred_when_none_are_declared(tmp_path):
    rows = [m for m in _pi() if m["role"] != "system"]
    out = tmp_path / "d"
    counts = write_traject(read_pi_session(_jsonl(tmp_path / "s.jsonl", rows)), out)
    assert counts["tools_inferred"] == 1
    schema = load_bench(out).catalog.schema("get_weather")
    assert schema == {"type": "object", "properties": {"city": {"type": "string"}, "days": {"type": "integer"}},
                      "required": ["city", "days"]}


def _bad_pi(tmp_path):
    ok = _pi()
    return {
        "second user": ok[:7] + [{"role": "user", "content": "and Paris?"}] + ok[7:],
        "no result": ok[:4] + ok[5:],
        "failed turn": ok[:7] + [{"role": "assistant", "content": [], "stopReason": "error"}],
        "no final": ok[:7],
        "no query": [ok[0]] + ok[2:],
    }


@pytest.mark.parametrize("case, record, reason", [
    ("second user", 7, "a second user message"),
    ("no result", 4, "tool call 'c1' has no result"),
    ("failed turn", 7, "a failed assistant turn (stopReason error)"),
    ("no final", 6, "no final answer"),
    ("no query", 1, "an assistant message before the user's query"),
])
def test_bad_pi_session_is_one_line(tmp_path, case, record, reason):
    f = _jsonl(tmp_path / "bad.jsonl", _bad_pi(tmp_path)[case])
    with pytest.raises(TraceError) as e:
        read_pi_session(f)
    msg = str(e.value)
    assert "\n" not in msg and msg.startswith(f"{f}: record {record}: ") and reason in msg


def test_bad_openai_records_are_one_line_each(tmp_path):
    first, last = _openai_record()
    bad_args = json.loads(json.dumps(last))
    bad_args["request"]["messages"][2]["tool_calls"][0]["function"]["arguments"] = "{city: Paris"
    lines = [json.dumps(last), "{not json", json.dumps({"request": {"messages": []}, "response": {}}),
             json.dumps(bad_args), json.dumps({"messages": [{"role": "user", "content": "q"},
                                                            {"role": "assistant", "tool_calls": [
                                                                {"id": "x", "function": {"name": "f", "arguments": "{}"}}]}]})]
    f = tmp_path / "log.jsonl"
    f.write_text("\n".join(lines) + "\n")
    traces, errors, _ = read_traces([f, tmp_path / "missing.jsonl"], "openai-chat")
    assert traces == [] and len(errors) == 2   # a line that is not JSON stops reading that file
    assert str(errors[0]) .startswith(f"{f}: record 1: not JSON")
    assert str(errors[1]) == f"{tmp_path / 'missing.jsonl'}: record 0: no such file"
    f.write_text("\n".join(lines[:1] + lines[2:]) + "\n")
    traces, errors, _ = read_traces([f], "openai-chat")
    assert len(traces) == 1 and [str(e).split(": record ")[1] for e in errors] == [
        "1: 'response.choices[0].message' is missing",
        "2: messages[2]: tool call 't0' has arguments that are not JSON",
        "3: tool call 'x' has no result"]
