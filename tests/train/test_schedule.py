"""The exact view schedule (cycle order, weights, staged phases) and the per-view data streams."""

import pytest

from hpd.train.data import ViewStream, group_padded, pack
from hpd.train.schedule import Phase, Schedule, cycle
from hpd.views import ViewExample


def test_cycle_orders():
    assert cycle({"T": 1, "I": 1, "R": 1}) == ["T", "I", "R"]
    assert cycle({"T": 2, "I": 2, "R": 2}) == ["T", "I", "R"]          # reduced by the gcd
    assert cycle({"T": 1}) == ["T"]
    assert cycle({"T": 1, "R": 1}) == ["T", "R"]
    c = cycle({"T": 5, "I": 1, "R": 5})
    assert "".join(c) == "TRTRITRTRTR"
    assert (c.count("T"), c.count("I"), c.count("R")) == (5, 1, 5)
    c = cycle({"T": 5, "I": 5, "R": 1})
    assert (c.count("T"), c.count("I"), c.count("R")) == (5, 5, 1)
    assert "TT" not in "".join(c) and "II" not in "".join(c)           # interleaved, not blocked
    with pytest.raises(ValueError):
        cycle({"T": 0})


def test_paper_schedule_is_20k_rounds_of_tir():
    s = Schedule([Phase({"T": 1, "I": 1, "R": 1}, 60000)])
    assert s.total == 60000 and s.counts() == {"T": 20000, "I": 20000, "R": 20000}
    assert [s.view_at(u) for u in range(7)] == list("TIRTIRT")
    assert s.view_at(59999) == "R" and s.locate(59999) == (0, 2)
    assert s.describe()[0]["full_cycles"] == 20000 and s.describe()[0]["partial_cycle"] == 0


def test_staged_and_subset_schedules():
    s = Schedule([Phase({"T": 1}, 3), Phase({"I": 1}, 2)])            # T -> I
    assert [s.view_at(u) for u in range(5)] == list("TTTII") and s.views() == ["T", "I"]
    s = Schedule([Phase({"T": 1}, 2), Phase({"I": 1, "R": 1}, 3)])    # cycle restarts at the phase start
    assert [s.view_at(u) for u in range(5)] == list("TTIRI") and s.counts() == {"T": 2, "I": 2, "R": 1}
    s = Schedule([Phase({"T": 5, "I": 1, "R": 5}, 13)])               # partial trailing cycle is counted
    assert s.counts() == {"T": 6, "I": 1, "R": 6}
    with pytest.raises(IndexError):
        s.view_at(13)


def _ex(i, n=5, c=2, v="T"):
    return ViewExample(view=v, prompt_ids=tuple(range(1, n + 1)), completion_ids=tuple([7] * c), uid=str(i))


def test_stream_is_resumable_and_epochs_reshuffle():
    exs = [_ex(i) for i in range(5)]
    a = ViewStream("T", exs, seed=1)
    first = [e.uid for e in a.take(7)]                                # wraps into epoch 1
    assert sorted(first[:5]) == ["0", "1", "2", "3", "4"]
    st = a.state()
    assert st == {"epoch": 1, "pos": 2, "n": 5}
    rest = [e.uid for e in a.take(6)]
    b = ViewStream("T", exs, seed=1)
    b.load_state(st)
    assert [e.uid for e in b.take(6)] == rest
    with pytest.raises(ValueError):
        b.load_state({"epoch": 0, "pos": 0, "n": 4})


def test_episode_grouped_stream_keeps_each_episode_adjacent_and_in_order():
    exs = [ViewExample(view="T", prompt_ids=(1, 2), completion_ids=(3,), uid=f"task{t}/b{k}")
           for t in range(6) for k in range(t % 3 + 1)]
    a = ViewStream("T", exs, seed=3, group_episodes=True)
    order = [e.uid for e in a.take(len(exs))]
    assert sorted(order) == sorted(e.uid for e in exs)
    episodes = [u.rsplit("/b", 1)[0] for u in order]
    runs = [ep for i, ep in enumerate(episodes) if i == 0 or episodes[i - 1] != ep]
    assert len(runs) == 6                                              # each episode is one contiguous run
    for ep in set(episodes):
        ks = [int(u.rsplit("/b", 1)[1]) for u in order if u.startswith(ep + "/")]
        assert ks == sorted(ks)                                        # boundaries in episode order
    assert runs != [f"task{t}" for t in range(6)]                      # episodes themselves are shuffled
    st = a.state()
    b = ViewStream("T", exs, seed=3, group_episodes=True)
    b.load_state(st)
    assert [e.uid for e in b.take(5)] == [e.uid for e in a.take(5)]    # exact resume


def test_packing_budgets():
    exs = [_ex(i, n=10 + i, c=3) for i in range(6)]
    rows = pack(exs, 40)
    assert [e for r in rows for e in r] == exs and all(sum(e.n_tokens for e in r) <= 40 for r in rows)
    rows = group_padded(exs, 40)
    assert sorted(e.uid for r in rows for e in r) == sorted(e.uid for e in exs)
    assert all(len(r) * max(e.n_tokens for e in r) <= 40 for r in rows)
