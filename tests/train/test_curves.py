"""Figure 8's curves (hpd.train.curves): the running mean and 10-90% band on hand-checkable numbers."""

import json

import pytest

from hpd.train.curves import loss_curves, running_band, write_curves
from hpd.train.schedule import Phase, Schedule


def test_running_band_by_hand():
    # windows (u - 2, u]: [4], [4, 2], [2, 6], [6, 8]
    b = running_band([0, 1, 2, 3], [4.0, 2.0, 6.0, 8.0], [2, 2, 2, 2])
    assert b["mean"] == [4.0, 3.0, 4.0, 7.0]
    assert b["n"] == [1, 2, 2, 2]
    # numpy's linear percentile of [2, 6]: 2 + 0.1 * 4 and 2 + 0.9 * 4
    assert b["p10"][2] == pytest.approx(2.4) and b["p90"][2] == pytest.approx(5.6)
    assert b["p10"][0] == b["p90"][0] == 4.0


def test_window_is_cycles_times_the_phase_cycle_length():
    # T:I:R = 1:1:1 -> cycle length 3; 2 cycles = the last 6 updates. T trains at updates 0, 3, 6, 9.
    sched = Schedule([Phase({"T": 1, "I": 1, "R": 1}, 12)])
    rows = [{"update": u, "view": sched.view_at(u), "loss": float(u)} for u in range(12)]
    c = loss_curves(rows, sched, window_cycles=2)
    assert c["T"]["update"] == [1, 4, 7, 10]                # 1-based: "after N updates"
    assert c["T"]["mean"] == [0.0, 1.5, 4.5, 7.5]           # (3+0)/2, (6+3)/2, (9+6)/2
    assert c["R"]["mean"][-1] == (11 + 8) / 2 and set(c) == {"T", "I", "R"}
    # a staged phase has its own cycle: {T:1} then {I:1}, 1 cycle = 1 update
    st = Schedule([Phase({"T": 1}, 3), Phase({"I": 1}, 3)])
    rows = [{"update": u, "view": st.view_at(u), "loss": float(u)} for u in range(6)]
    c = loss_curves(rows, st, window_cycles=1)
    assert c["T"]["mean"] == [0.0, 1.0, 2.0] and c["I"]["mean"] == [3.0, 4.0, 5.0]


def test_write_curves_json_png_and_evaluation_points(tmp_path):
    sched = Schedule([Phase({"T": 1, "R": 1}, 4)])
    lines = ["update,phase,view,loss,supervised_tokens,tokens,examples,lr,grad_norm,tokens_per_s,elapsed_s"]
    lines += [f"{u},0,{sched.view_at(u)},{1.0 + u},1,1,1,0.1,,1,1" for u in range(4)]
    (tmp_path / "metrics.csv").write_text("\n".join(lines) + "\n")
    ev = tmp_path / "evals" / "update-00000002"
    ev.mkdir(parents=True)
    (ev / "metrics.json").write_text(json.dumps({"TS": 0.25, "F1": 0.5, "n_tasks": 4}))
    doc = write_curves(tmp_path, sched, window_cycles=200)
    assert doc["loss"]["T"]["mean"] == [1.0, 2.0] and doc["loss"]["R"]["mean"] == [2.0, 3.0]
    assert doc["evaluation"] == {"step": [2], "TS": [0.25], "F1": [0.5], "n_tasks": [4]}
    assert json.loads((tmp_path / "curves.json").read_text()) == doc and doc["png"] == "curves.png"
    assert (tmp_path / "curves.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    (tmp_path / "curves.png").unlink()
    assert write_curves(tmp_path, sched, png=False)["png"] is None and not (tmp_path / "curves.png").exists()
