"""The demo report's sections: the study's committed results from a registry (hpd.report.committed) built with the
registry writer, the one line when there is none, and the teacher's Table 3, the defect accounting and the time
by stage in results.md."""

from pathlib import Path

from hpd.report.committed import committed_results, results_root
from hpd.report.registry import git_info, write_cell
from hpd.report.results import committed_section, results_markdown, write_results_report
from hpd.runfolder import write_json, write_jsonl

KEYS = ("TS", "F1", "Step-SR", "RC", "Exact", "Action-Acc")


def _cell(root: Path, tmp: Path, cell: str, ts: float) -> None:
    ev = tmp / "ev" / cell.replace("/", "_")
    write_json(ev / "metrics.json", {**{k: ts for k in KEYS}, "n_tasks": 2, "n_boundaries": 4})
    write_jsonl(ev / "tasks.jsonl", [{"uid": "t1", "TS": ts}])
    write_cell(root, "s1", cell, ev, config={"cell": cell}, command=f"hpd demo ({cell})", seed=0, dtype="float32")


def _registry(tmp_path: Path) -> Path:
    root = tmp_path / "results"
    for seed, sft, hpd in ((0, 0.0, 1.0), (1, 1.0, 1.0)):
        _cell(root, tmp_path, f"main/defects-0.12/seed-{seed}/SFT", sft)
        _cell(root, tmp_path, f"main/defects-0.12/seed-{seed}/HPD", hpd)
    _cell(root, tmp_path, "main/defects-0.25/seed-0/SFT", 0.25)        # one seed: not the main table's rate
    return root


def _doc(committed: dict | None = None) -> dict:
    diag = {"teacher": "base-doc", "n_boundaries": 10, "candidates_per_attempt": 2, "first_attempt_acceptance": 0.4,
            "candidate_acceptance": 0.25, "mean_attempts": 2.5, "attempts_to_full_coverage": None, "max_attempts": 5,
            "coverage_by_attempt": [0.4, 0.6, 0.7, 0.7, 0.8], "n_teacher": 8, "n_fallback": 2, "n_dropped": 0,
            "rejection_reasons": {"schema": 5, "tool_error": 3}, "rejection_reasons_all": {"schema": 6, "tool_error": 3}}
    defects = {"n_boundaries": 10, "n_defective": 2, "share": 0.2, "by_kind": {"schema": 1, "repeat": 1},
               "replaced": 1, "fell_back": 1, "per_kind": {"schema": {"replaced": 1, "fell_back": 0},
                                                           "repeat": {"replaced": 0, "fell_back": 1}}}
    doc = {"variants": {"SFT": {k: 0.5 for k in KEYS}}, "seed": 0, "model": {"name": "tiny"}, "teacher": diag,
           "defects": defects, "timings": {"train SFT": 30.0}, "resumed_stages": [],
           "estimate": {"stages": {"train SFT": 24.0}, "calibration": {"train_tokens_per_s": 1000.0,
                                                                       "gen_tokens_per_s": 100.0}}}
    if committed is not None:
        doc["committed"] = committed
    return doc


def test_committed_results_main_table_with_commit_and_date(tmp_path):
    doc = committed_results(_registry(tmp_path))
    (st,) = doc["studies"]
    assert st["study"] == "s1" and st["n_cells"] == 5 and st["main_rate"] == 0.12     # the rate with most seeds
    rows = {r["variant"]: r for r in st["rows"]}
    assert list(rows) == ["SFT", "HPD"] and rows["SFT"]["seeds"] == [0, 1]
    assert rows["SFT"]["metrics"]["TS"]["mean"] == 0.5
    assert abs(rows["SFT"]["metrics"]["TS"]["std"] - 0.7071) < 1e-4                   # sample std of 0 and 1
    assert rows["HPD"]["metrics"]["TS"] == {"mean": 1.0, "std": 0.0, "n": 2}
    commit = git_info()["commit"]                                      # None outside a git checkout
    assert st["commits"] == ([commit] if commit else []) and st["first"][:4] == st["last"][:4] >= "2024"
    html = committed_section(doc)
    md = results_markdown(_doc(doc))
    for text in (html, md):
        assert "Committed study results" in text and "s1, defects 12%" in text
        assert "0.500 ± 0.707" in text and "1.000 ± 0.000" in text
        assert f"run {st['first'][:10]} at commit {(commit or 'unknown')[:10]}" in text


def test_no_committed_study_is_one_line(tmp_path, monkeypatch):
    doc = committed_results(tmp_path / "results")                  # no such folder
    assert doc == {"root": str(tmp_path / "results"), "studies": []}
    assert committed_section(doc) == "<h2>Committed study results</h2><p>no committed study results in results/</p>"
    md = results_markdown(_doc(doc))
    assert md.rstrip().endswith("## Committed study results\n\nno committed study results in results/")
    assert committed_section(None) == "" and "Committed study results" not in results_markdown(_doc())
    monkeypatch.setenv("HPD_RESULTS_DIR", str(tmp_path / "elsewhere"))
    assert results_root() == tmp_path / "elsewhere"
    monkeypatch.delenv("HPD_RESULTS_DIR")
    assert results_root() == Path(__file__).resolve().parents[2] / "results"     # the checkout's, found from the package


def test_results_md_has_table3_defects_and_time_by_stage(tmp_path):
    write_results_report(tmp_path, _doc({"root": "results", "studies": []}))
    md = (tmp_path / "results.md").read_text()
    assert "| SFT | 0.500 |" in md
    assert "## Teacher (Table 3): base-doc" in md and "| first-attempt acceptance | 0.400 |" in md
    assert "| coverage by attempt 5 | 0.800 |" in md and "| attempts to full coverage | not reached in 5 |" in md
    assert "| targets: reference fallbacks | 2 |" in md and "| schema | 5 | 6 |" in md
    assert "2 of 10 train boundaries (20.0%)" in md and "| repeat | 1 | 0 | 1 |" in md and "| all | 2 | 1 | 1 |" in md
    assert "| train SFT | 30.0 | 24.0 |" in md
    html = (tmp_path / "report.html").read_text()
    assert 'id="table3"' in html and 'id="rejections"' in html and "1,000 train tokens/s" in html
