"""The demo's time estimate (hpd.demo_estimate): the arithmetic on given calibration numbers, checked by hand;
the progress correction on a fake clock; the end-of-run stage table; and a tiny demo that prints all three."""

import json
from dataclasses import replace

import pytest

from hpd import demo_estimate as de
from hpd.demo import Demo, DemoConfig
from hpd.report.results import stage_table, text_table

CAL = de.Calibration(train_tokens_per_s=1000.0, gen_tokens_per_s=100.0, prefill_tokens_per_s=2000.0)
WORK = de.Work(train_tasks=10, train_boundaries=20, test_tasks=4, test_turns=8.0, test_boundaries=8,
               row_tokens={"T": 500.0, "I": 800.0, "R": 700.0}, prompt_tokens={"T": 400.0, "I": 600.0})
CFG = DemoConfig(model="tiny", updates=10, global_batch=4, group_episodes=False, max_new_tokens=100, teach_k=2,
                 teach_attempts=5, n_probe=48, teacher="auto")


def test_stage_estimates_by_hand():
    """train = 4 s + updates x batch x tokens per row / train tok/s; generation = prompts x prompt tokens / prefill
    tok/s + turns x (0.5 x max_new_tokens) / generated tok/s, + 1 s."""
    est = de.estimate(["data", "split", "base model", "replay + documents", "train SFT",
                       "train teacher warm-up (I view)", "choose teacher", "teach", "train HPD-T", "train HPD",
                       "eval Base", "train DPO"], CFG, WORK, CAL)
    assert est == {
        "data": 2.0, "split": 1.0, "base model": 3.0,
        "replay + documents": 0.5,                 # 10 train tasks x 0.05 s
        "train SFT": 24.0,                         # 4 + 10 x 4 x 500 / 1000
        "train teacher warm-up (I view)": 10.4,    # 4 + round(10 / 4) = 2 updates x 4 x 800 / 1000
        "choose teacher": 54.0,                    # 2 x (1 + 20 x 600 / 2000 + 20 x 2 x 50 / 100)
        "teach": 57.0,                             # 1 + 20 x 600 / 2000 + 20 x 2 x 5 x 0.5 x 50 / 100
        "train HPD-T": 24.0,
        "train HPD": 30.7,                         # 4 + 10 x 4 x (500 + 800 + 700) / 3 / 1000
        "eval Base": 12.2,                         # 1 + (8 + 8) x (400 / 2000 + 50 / 100): a prefill per turn
        "train DPO": None,                         # the baselines are not estimated
    }
    grouped = replace(CFG, group_episodes=True)    # an episode's shared prompt computed once: half the tokens
    assert de.stage_seconds("train SFT", grouped, WORK, CAL) == 14.0
    assert de.stage_seconds("teach", replace(CFG, teacher="oracle"), WORK, CAL) == 1.0
    assert de.total(est) == pytest.approx(218.8) and de.total(est, ["teach"]) == pytest.approx(161.8)
    line = de.headline(est, CAL, done=["data", "split"])
    assert line == ("estimated total: ~3.6 min (calibrated: 1,000 train tokens/s, 100 generated tokens/s); "
                    "2 of 12 stages already done; not estimated: train DPO")     # (218.8 - 3) s


def test_generation_rates_survive_a_longer_call_that_ran_no_slower():
    """1 token in 1.0 s and 1 + 4 tokens in 3.0 s: 0.5 s a step over 32 rows, 0.5 s of prefill for 32 x 16
    prompt tokens. When the longer call ran no slower (load), every one of its steps counts as decoding."""
    assert de.generation_rates(1.0, 3.0, steps=4, batch=32, prompt=16, train_tps=100) == (64.0, 1024.0)
    gen, prefill = de.generation_rates(1.0, 0.9, steps=4, batch=32, prompt=16, train_tps=100)
    assert gen == pytest.approx(32 / 0.18) and prefill == pytest.approx(32 * 16 / 0.82)
    gen, prefill = de.generation_rates(0.1, 1.0, steps=4, batch=32, prompt=16, train_tps=100)
    assert gen == pytest.approx(32 / 0.225) and prefill == 300       # no prefill time left: 3 x train tokens/s


def test_predicted_counts_before_the_data():
    """12 n tasks for --n-per-domain n, 90 % train (capped), 2.5 boundaries a task, 10 % held out (capped)."""
    w = de.predict_work(DemoConfig(model="smollm2", n_per_domain=30, train_sample=260, test_limit=24, eval_turns=6))
    assert (w.train_tasks, w.train_boundaries, w.test_tasks, w.test_turns, w.test_boundaries) == (260, 650, 24, 60.0, 60)
    assert w.row_tokens == de.TOKENS_GUESS["real"] and not w.measured
    w = de.predict_work(DemoConfig(model="tiny", n_per_domain=10))
    assert (w.train_tasks, w.test_tasks) == (108, 12)


def test_progress_is_the_estimate_corrected_by_what_was_measured():
    now = [0.0]
    tr = de.Tracker({"a": 10.0, "b": 30.0, "c": 60.0}, clock=lambda: now[0])    # P = 0.1 x 100 s = 10 s
    tr.start("a")
    now[0] = 5.0
    assert tr.left() == pytest.approx(95.0)                 # f = 1: 30 + 60 + (10 - 5)
    now[0] = 20.0
    tr.finish("a", 20.0)                                    # took twice its estimate
    assert tr.factor() == pytest.approx(1.5)                # (20 + 10) / (10 + 10)
    tr.start("b")
    assert tr.left() == pytest.approx(135.0)                # 1.5 x (60 + 30)
    now[0] = 30.0
    tr.within(1, 3)                                         # the stage's own progress: 10 s for a third
    assert tr.left() == pytest.approx(110.0)                # 1.5 x 60 + 10 x (2/3) / (1/3)
    assert tr.line() == "[2/3] b | elapsed 30s | left ~1m50s"
    tr.finish("b", 30.0)
    tr.finish("c", 50.0, resumed=True)                      # found finished: it costs nothing, is not measured
    assert tr.left() == 0.0 and tr.position() == (3, 3)
    assert de.Tracker({"a": 1.0, "b": 2.0}, done=["a"]).left() == pytest.approx(2.0)
    assert (de.duration(42), de.duration(192), de.duration(3900)) == ("42s", "3m12s", "1h05m")


def test_end_of_run_stage_table():
    rows = stage_table({"data": 12.0, "train SFT": 30.25, "eval SFT": 4.0}, resumed=["data"],
                       est={"data": 2.0, "train SFT": 24.0, "eval SFT": None, "train HPD": 30.7})
    assert rows == [["stage", "seconds", "estimate"],
                    ["data", "resumed (took 12.0 s when it ran)", "2.0"],
                    ["train SFT", "30.2", "24.0"],
                    ["eval SFT", "4.0", "-"],
                    ["train HPD", "not run", "30.7"],
                    ["total (this run)", "34.2", "24.0"]]          # what ran here, and its estimates
    lines = text_table(rows)
    assert lines[0].startswith("stage ") and len({len(x) for x in lines}) == 1


def test_tiny_demo_prints_estimate_progress_and_stage_table(tmp_path, monkeypatch):
    """Before the first stage the estimate line, a progress line per stage, the table at the end; results.json keeps
    the calibration and each stage's estimate; a rerun shows the stages as resumed."""
    monkeypatch.setenv("HPD_RESULTS_DIR", str(tmp_path / "no-results"))
    cfg = DemoConfig(out=tmp_path / "run", model="tiny", n_per_domain=10, train_limit=3, updates=1, global_batch=2,
                     test_limit=1, max_new_tokens=8, eval_turns=1, teacher="oracle", probe_examples=0,
                     variants=("Base", "SFT"))
    lines: list[str] = []
    res = Demo(cfg, log=lines.append).run()
    first = next(i for i, x in enumerate(lines) if x.startswith("> "))
    assert lines[first - 1].startswith("estimated total: ~") and "train tokens/s" in lines[first - 1]
    assert sum(x.startswith("  progress [") for x in lines) == 7          # data split base replay train eval x2
    assert any(x.startswith("  estimated again from ") for x in lines)
    assert "    eval Base: 1/1 episodes" in lines and "    eval SFT: 1/1 episodes" in lines    # an evaluation's progress
    table = lines[lines.index("time by stage:") + 1:]
    assert table[0].split() == ["stage", "seconds", "estimate"] and table[-1].split()[:3] == ["total", "(this", "run)"]
    est = res["estimate"]
    assert est["calibration"]["train_tokens_per_s"] > 0 and est["work"]["measured"]
    assert set(est["stages"]) == {"data", "split", "base model", "replay + documents", "train SFT", "eval Base",
                                  "eval SFT"}
    saved = json.loads((cfg.out / "results.json").read_text())
    assert saved["estimate"]["stages"] == est["stages"]
    assert saved["committed"] == {"root": str(tmp_path / "no-results"), "studies": []}
    lines.clear()
    Demo(cfg, log=lines.append).run()                                   # everything resumes: no calibration
    assert not any(x.startswith("estimated total") for x in lines)
    assert any("resumed (took" in x and x.strip().startswith("train SFT") for x in lines)


def test_terminal_line_draws_the_tracker_and_logs_above_it():
    import io

    buf = io.StringIO()
    now = [0.0]
    tr = de.Tracker({"a": 10.0, "b": 30.0}, clock=lambda: now[0])
    with de.TerminalLine(every=60, file=buf) as line:
        tr.start("a")
        line.on_progress(tr)
        line.log("> a ...")
        now[0] = 4.0
    out = buf.getvalue()
    assert "hpd demo [1/2] a | elapsed 0s | left ~40s" in out and "> a ..." in out
    assert "hpd demo [1/2] a | elapsed 4s | left ~36s" in out           # drawn once more at the end


def test_choose_threads_takes_one_when_all_cores_run_slower(monkeypatch):
    """Another process busy on a core: the probe on all threads is slower than on one, so 1 is chosen and said.
    On a quiet machine, or with OMP_NUM_THREADS set by the user, the count stays."""
    import torch

    before = torch.get_num_threads()
    try:
        torch.set_num_threads(2)
        slow_on_two = {2: 0.9, 1: 0.05}
        assert de.choose_threads({}, probe=slow_on_two.get)[0] == 1 and torch.get_num_threads() == 1
        torch.set_num_threads(2)
        n, why = de.choose_threads({}, probe={2: 0.9, 1: 0.05}.get)
        assert "18.0x slower on 2 threads" in why
        torch.set_num_threads(2)
        assert de.choose_threads({}, probe={2: 0.03, 1: 0.05}.get) == (2, None) and torch.get_num_threads() == 2
        calls = []
        assert de.choose_threads({"OMP_NUM_THREADS": "2"}, probe=lambda t: calls.append(t) or 1.0) == (2, None)
        assert calls == []
    finally:
        torch.set_num_threads(before)


def test_thread_probe_times_real_work():
    s = de.thread_probe(1, n=20)
    assert 0 < s < 5
