"""Categories agree with bfcl-eval's own lists; names, groups, aliases, skips with reasons; the seeded sample."""

import pytest


def test_categories_are_bfcls_own(bfcl):
    from bfcl_eval.constants import category_mapping as cm

    from hpd.bfcl import data

    assert data.NON_LIVE == cm.NON_LIVE_CATEGORY and data.LIVE == cm.LIVE_CATEGORY
    assert data.MULTI_TURN == cm.MULTI_TURN_CATEGORY
    assert set(data.SCORED) | set(data.SKIPPED) == set(cm.ALL_CATEGORIES)
    assert set(data.SKIPPED) == set(cm.AGENTIC_CATEGORY) | set(cm.NON_SCORING_CATEGORY)
    assert all(len(r) > 20 for r in data.SKIPPED.values())


def test_parse_categories(bfcl):
    from hpd.bfcl import data

    assert data.parse_categories(None) == (data.SCORED, {})
    scored, skipped = data.parse_categories("simple,multi_turn_base,web_search,irrelevance")
    assert scored == ["simple_python", "irrelevance", "multi_turn_base"]
    assert set(skipped) == {"web_search_base", "web_search_no_snippet"} and "SerpAPI" in skipped["web_search_base"]
    assert data.parse_categories("live")[0] == data.LIVE
    assert data.parse_categories("all")[1] == data.SKIPPED
    with pytest.raises(data.CategoryError, match="unknown BFCL category 'simpel'"):
        data.parse_categories("simple,simpel")


def test_load_and_sample(bfcl):
    from hpd.bfcl import data

    cases = data.load_cases("simple_python")
    assert len(cases) == 400 and cases[0].id == "simple_python_0" and cases[0].answer["id"] == "simple_python_0"
    assert "Python 3 syntax" in cases[0].entry["function"][0]["description"]
    assert "Python 3 syntax" not in cases[0].eval_entry["function"][0]["description"]
    a = data.sample_cases(cases, 7, seed=3)
    assert [c.id for c in a] == [c.id for c in data.sample_cases(cases, 7, seed=3)]
    assert len(a) == 7 and [c.id for c in a] == [c.id for c in cases if c in a]          # BFCL's order kept
    assert [c.id for c in a] != [c.id for c in data.sample_cases(cases, 7, seed=4)]
    assert len(data.sample_cases(cases, 1000, 0)) == 400
    rel = data.load_cases("live_relevance")
    assert rel[0].answer is None and len(rel) == 16
    mt = data.load_cases("multi_turn_miss_func")[0]
    assert mt.entry["missed_function"] and mt.answer["ground_truth"]
