"""Argument sources, token lengths and field scoring."""

from hpd.document import estimate_tokens, field_accuracy, render, score_fields, token_length
from hpd.document.sources import arg_sources

from .test_render_parse import _doc


def test_arg_sources_query_step_default_unknown():
    query = "Find hotels in Dillingham for 2 guests"
    steps = [
        ({"city": "Dillingham", "page": 1}, "{'cityid': 'C123456', 'name': 'Dillingham'}"),
        ({"cityid": "C123456", "guests": 2, "currency": "EUR"}, "{'hotelid': 'H99'}"),
        ({"hotelid": "H99", "note": "zzz-not-anywhere"}, ""),
    ]
    defaults = [{"page": 1}, {"currency": "USD"}, None]
    src = arg_sources(query, steps, defaults)
    assert src[0] == {"city": "query", "page": "default"}
    assert src[1] == {"cityid": "step:1", "guests": "query", "currency": "unknown"}
    assert src[2] == {"hotelid": "step:2", "note": "unknown"}
    # parallel tasks: no chaining through earlier outputs
    assert arg_sources(query, steps, defaults, chain=False)[2]["hotelid"] == "unknown"


def test_short_values_match_whole_tokens_only():
    src = arg_sources("ids 12 and 7", [({"a": "2", "b": 7, "c": "12"}, "")])
    assert src[0] == {"a": "unknown", "b": "query", "c": "query"}


def test_token_length_estimate_and_tokenizer():
    assert estimate_tokens("abcdefgh, ab c!") == 6  # abcd efgh , ab c !
    assert estimate_tokens("") == 0

    class Tok:
        def encode(self, text, add_special_tokens=True):
            assert add_special_tokens is False
            return list(range(len(text.split())))

    assert token_length("a b c", Tok()) == (3, "tokenizer")
    assert token_length("a b c") == (estimate_tokens("a b c"), "estimate")


def test_score_fields():
    gold = _doc("oracle")
    text = render(gold)
    s = score_fields(text, gold)
    assert all(s.values()) and field_accuracy(text, gold) == 1.0
    wrong = text.replace("turns_left=3", "turns_left=4").replace("steps_left=2", "steps_left=oops")
    s2 = score_fields(wrong, gold)
    assert s2["turns_left"] is False and s2["steps_left"] is False and s2["tools"] is True and s2["next_action"] is True
    assert 0 < field_accuracy(wrong, gold) < 1
    assert field_accuracy("nothing here", gold) == 0.0
