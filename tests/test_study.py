"""hpd.study: the grid of (defect rate, seed) demo cells, one results file with mean and sample std over
seeds, the defect sweep plot, and a study that resumes from its finished cells."""

import json

import pytest

from hpd.demo import METRIC_KEYS, DemoConfig
from hpd.study import aggregate, cell_paths, mean_std, plot_sweep, run_study


def _cell(rate, seed, sft, hpd_t, hpd):
    mk = lambda x: {k: x for k in METRIC_KEYS}   # noqa: E731
    return {"defect_rate": rate, "seed": seed, "variants": {"Base": mk(0.0), "SFT": mk(sft), "HPD-T": mk(hpd_t),
                                                            "HPD": mk(hpd)}}


def test_mean_std_and_aggregate_differences_to_sft():
    assert mean_std([1.0]) == {"mean": 1.0, "std": 0.0, "n": 1}
    m = mean_std([0.1, 0.3])
    assert m["mean"] == pytest.approx(0.2) and m["std"] == pytest.approx(0.1414213, rel=1e-5)
    cells = [_cell(0.0, 0, 0.5, 0.5, 0.4), _cell(0.0, 1, 0.7, 0.7, 0.4), _cell(0.25, 0, 0.3, 0.5, 0.6)]
    agg = aggregate(cells)
    assert list(agg) == ["0.00", "0.25"]
    assert agg["0.00"]["SFT"]["TS"]["mean"] == pytest.approx(0.6) and agg["0.00"]["SFT"]["TS"]["n"] == 2
    assert agg["0.00"]["HPD-T - SFT"]["TS"] == {"mean": 0.0, "std": 0.0, "n": 2}
    assert agg["0.00"]["HPD - SFT"]["RC"]["mean"] == pytest.approx(-0.2)
    assert agg["0.25"]["HPD - SFT"]["TS"]["mean"] == pytest.approx(0.3)


def test_sweep_plot_needs_two_rates(tmp_path):
    one = aggregate([_cell(0.12, 0, 0.5, 0.6, 0.6)])
    assert plot_sweep(one, tmp_path / "a.png") is None
    two = aggregate([_cell(0.0, 0, 0.5, 0.5, 0.5), _cell(0.25, 0, 0.3, 0.5, 0.4)])
    p = plot_sweep(two, tmp_path / "b.png")
    assert p.is_file() and p.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_sweep_plot_of_base_cells_alone_is_none(tmp_path, recwarn):
    """Base cells at two rates give no difference to draw: no plot, and no empty-legend warning."""
    base = [{"defect_rate": r, "seed": 0, "variants": {"Base": {k: 0.1 for k in METRIC_KEYS}}} for r in (0.0, 0.25)]
    assert plot_sweep(aggregate(base), tmp_path / "c.png") is None
    assert not (tmp_path / "c.png").exists() and not [w for w in recwarn if "legend" in str(w.message)]


def test_cell_folders():
    from pathlib import Path

    r = Path("/r")
    assert cell_paths(r, 0.12, 0, [0.12], [0]).cell == r
    p = cell_paths(r, 0.12, 2, [0.12], [0, 2])
    assert (p.root, p.rate, p.cell) == (r, r / "defects-0.12", r / "defects-0.12" / "seed-2")
    # the seed study and the sweep name a shared cell alike, so both can run into one root
    assert cell_paths(r, 0.12, 0, [0.0, 0.12], [0]) == cell_paths(r, 0.12, 0, [0.12], [0, 1, 2])


@pytest.mark.slow
def test_study_runs_cells_shares_base_and_resumes(tmp_path):
    cfg = DemoConfig(out=tmp_path / "s", model="tiny", n_per_domain=10, updates=2, global_batch=2, test_limit=2,
                     train_limit=4, max_new_tokens=8, teacher="oracle", variants=("Base", "SFT", "HPD-T"),
                     probe_examples=0)
    doc = run_study(cfg, seeds=[0, 1], rates=[0.0, 0.25], log=lambda s: None)
    root = tmp_path / "s"
    assert [(c["defect_rate"], c["seed"]) for c in doc["cells"]] == [(0.0, 0), (0.0, 1), (0.25, 0), (0.25, 1)]
    assert (root / "eval" / "base" / "metrics.json").is_file()               # Base evaluated once
    assert not (root / "defects-0.00" / "seed-0" / "eval" / "base").exists()
    for rate in ("0.00", "0.25"):
        assert (root / f"defects-{rate}" / "boundaries" / "done.json").is_file()   # one replay per rate
        for seed in (0, 1):
            assert (root / f"defects-{rate}" / f"seed-{seed}" / "report.html").is_file()
    saved = json.loads((root / "study.json").read_text())
    assert saved["summary"]["0.25"]["SFT"]["TS"]["n"] == 2 and "HPD-T - SFT" in saved["summary"]["0.00"]
    assert (root / "plots" / "sweep.png").is_file() and (root / "study.md").is_file()
    assert "sweep" in (root / "report.html").read_text()
    base_rows = [c["variants"]["Base"] for c in doc["cells"]]
    assert all(b == base_rows[0] for b in base_rows)                        # the same Base for every cell
    again = run_study(cfg, seeds=[0, 1], rates=[0.0, 0.25], log=lambda s: None)   # resumes: nothing recomputed
    assert again["summary"] == doc["summary"]
    # another study into the same root: its (0.25, 0) cell is the finished one, and study.json keeps every cell
    more = run_study(cfg, seeds=[0, 2], rates=[0.25], log=lambda s: None)
    assert [(c["defect_rate"], c["seed"]) for c in more["cells"]] == [(0.0, 0), (0.0, 1), (0.25, 0), (0.25, 1),
                                                                     (0.25, 2)]
    assert more["summary"]["0.25"]["SFT"]["TS"]["n"] == 3 and more["summary"]["0.00"] == doc["summary"]["0.00"]
    assert more["asked"] == {"seeds": [0, 2], "defect_rates": [0.25]}
    shared = json.loads((root / "defects-0.25" / "seed-0" / "results.json").read_text())
    assert {"train SFT", "teach", "eval SFT"} <= set(shared["resumed_stages"])    # the finished cell, not a rerun
    from dataclasses import replace

    from hpd.runfolder import RunFolderError
    with pytest.raises(RunFolderError, match="another config: updates 2"):
        run_study(replace(cfg, updates=3), seeds=[0, 1], rates=[0.0], log=lambda s: None)


@pytest.mark.slow
def test_lanes_give_the_cells_of_a_sequential_study(tmp_path):
    """Two seeds in two lane processes of one thread each: the same metrics and training losses as the same study
    run cell after cell on one thread; the shared base evaluation is made once, before the lanes start."""
    import torch

    cfg = dict(model="tiny", n_per_domain=10, updates=2, global_batch=2, test_limit=2, train_limit=4, max_new_tokens=8,
               teacher="oracle", variants=("Base", "SFT", "HPD-T"), probe_examples=0)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        seq = run_study(DemoConfig(out=tmp_path / "seq", **cfg), seeds=[0, 1], rates=[0.12], log=lambda s: None)
    finally:
        torch.set_num_threads(threads)
    lines = []
    par = run_study(DemoConfig(out=tmp_path / "par", **cfg), seeds=[0, 1], rates=[0.12], log=lines.append, lanes=2,
                    threads=1)
    assert [c["variants"] for c in par["cells"]] == [c["variants"] for c in seq["cells"]]
    for seed in (0, 1):
        loss = [json.loads((tmp_path / r / "defects-0.12" / f"seed-{seed}" / "train" / "sft" / "metrics.json")
                           .read_text())["final_loss"] for r in ("seq", "par")]
        assert loss[0] == loss[1]
    assert "== 2 cells in 2 lanes of 1 thread(s)" in lines
    assert all("eval Base" in c["timings"] for c in par["cells"])
    assert json.loads((tmp_path / "par" / "manifest.json").read_text())["config"]["lanes"] == 2
