"""The control document writes argument values as ``JSON.stringify`` does (the model reads it next to Pi's
JSON), and its records hold the numbers the text shows, so render -> parse stays exact."""

from hpd.document import ControlDocument, parse, render
from hpd.document.schema import ActionCall, EndRule, NextAction

END = EndRule(allowed=False, rule="r", final_turn="f")


def test_next_action_arguments_are_js_json():
    args = {"b": 1e3, "2": -0.0, "big": 7.2e16, "tiny": 1e-7, "inf": float("inf"), "s": "\ud800x"}
    d = ControlDocument(privilege="oracle", kind="initial", index=0, turn=0, execution="parallel", turns_left=None,
                        tail="user", tools=[], end=END, steps_left=0, complete=True, plan=[],
                        next_action=NextAction(calls=[ActionCall(name="t", arguments=args)]))
    text = render(d)
    assert 'call "t" {"2":0,"b":1000,"big":72000000000000000,"tiny":1e-7,"inf":null,"s":"\\ud800x"}' in text
    assert d.next_action.calls[0].arguments == {"2": 0, "b": 1000, "big": 72000000000000000, "tiny": 1e-7,
                                                "inf": None, "s": "\ud800x"}
    assert parse(text) == d
