from hpd.harness import assistant_message, text, tool_call
from hpd.teacher.rank import differences, rank, score_parts
from hpd.teacher.types import Proposal

REF = assistant_message([tool_call("r", "weather", {"city": "Paris", "days": 2})])


def P(msg, a=1, i=0):
    return Proposal(message=msg, attempt=a, index=i)


def test_order_tool_then_args_then_text():
    same = assistant_message([tool_call("a", "Weather ", {"city": "paris", "days": 2.0})])
    half = assistant_message([tool_call("b", "weather", {"city": "Paris", "days": 3})])
    other = assistant_message([tool_call("c", "time", {"city": "Paris", "days": 2})])
    assert score_parts(same, REF) == [1.0, 1.0, 0.0]
    assert score_parts(half, REF)[0] == 1.0 and 0 < score_parts(half, REF)[1] < 1
    assert score_parts(other, REF)[0] == 0.0
    ranked = rank([P(other, 1, 0), P(half, 1, 1), P(same, 2, 0)], REF)
    assert [p.message for p, _ in ranked] == [same, half, other]
    assert differences(same, REF) == [] and differences(half, REF) == ["args"] and differences(other, REF) == ["tool"]


def test_ties_break_by_candidate_order():
    a = assistant_message([tool_call("a", "weather", {"city": "Paris", "days": 2})])
    b = assistant_message([tool_call("b", "weather", {"city": "Paris", "days": 2})])
    ranked = rank([P(b, 2, 1), P(a, 1, 1), P(a, 2, 0)], REF)
    assert [(p.attempt, p.index) for p, _ in ranked] == [(1, 1), (2, 0), (2, 1)]


def test_final_turns_ranked_by_answer_f1():
    ref = assistant_message([text("It is sunny in Paris today")])
    good = assistant_message([text("sunny in Paris")])
    bad = assistant_message([text("no idea")])
    ranked = rank([P(bad, 1, 0), P(good, 1, 1)], ref)
    assert ranked[0][0].message is good
    assert differences(good, ref) == ["answer_text"]
    assert differences(assistant_message([text(" It is sunny in  Paris today")]), ref) == []
