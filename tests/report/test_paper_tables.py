"""`hpd report` over fabricated run folders with known metrics: every mean, std and percentage below is
worked out by hand; missing and incomplete runs give one line each; a real `hpd eval` folder reads too."""

import json
import math

import pytest
from typer.testing import CliRunner

from hpd.cli import app
from hpd.eval.variant import evaluate_variant
from hpd.eval.reference import ReferencePolicy
from hpd.report.paper import ReportError, read_spec, write_report
from hpd.report.runs import RunProblem, load_run, schedule_text
from hpd.report.tables import table_spec
from hpd.runfolder import finish_manifest, new_manifest, validate_manifest, write_json

runner = CliRunner()
KEYS = ("TS", "F1", "Step-SR", "RC", "Exact", "Action-Acc")


def fake_eval(folder, ts, *, adapter=None, status="complete", **other):
    """An evaluation folder as `hpd eval` leaves it: manifest + metrics.json (TS given, the rest 0.5)."""
    folder.mkdir(parents=True)
    man = new_manifest("hpd eval", {"policy": "fake"},
                       inputs={"adapter": {"path": str(adapter), "sha256": None}} if adapter else {})
    write_json(folder / "manifest.json", finish_manifest(man) if status == "complete" else man)
    if status == "complete":
        write_json(folder / "metrics.json", {**{k: 0.5 for k in KEYS}, "TS": ts, **other,
                                             "n_tasks": 10, "n_boundaries": 31})
    return folder


def fake_train(folder, phases, seed=42):
    """A training run folder: manifest whose config holds the schedule, an adapter below it."""
    (folder / "adapter").mkdir(parents=True)
    man = new_manifest("hpd train", {"seed": seed, "schedule": {"phases": phases}})
    write_json(folder / "manifest.json", finish_manifest(man))
    return folder / "adapter"


def test_seeds_table_mean_and_std_by_hand(tmp_path):
    runs = [(f"HPD/{s}", fake_eval(tmp_path / f"hpd-{s}", ts))
            for s, ts in zip(range(715, 720), (0.20, 0.25, 0.30, 0.35, 0.40))]
    runs += [(f"SFT/{s}", fake_eval(tmp_path / f"sft-{s}", ts)) for s, ts in zip(range(715, 718), (0.10, 0.20, 0.30))]
    s = write_report({"seeds": runs}, tmp_path / "rep")
    assert s == {"table5-seeds": {"rows": 8, "missing": []}}
    doc = json.loads((tmp_path / "rep" / "table5-seeds.json").read_text())
    hpd, sft = doc["aggregate"]["HPD"]["TS"], doc["aggregate"]["SFT"]["TS"]
    # HPD: mean 0.30; deviations -.1 -.05 0 .05 .1 -> sum of squares 0.025 / (5 - 1) -> std sqrt(0.00625) = 0.0790569
    assert hpd["mean"] == pytest.approx(0.30) and hpd["std"] == pytest.approx(0.0790569, abs=1e-7) and hpd["n"] == 5
    # SFT: mean 0.20; deviations -.1 0 .1 -> 0.02 / 2 -> std 0.1
    assert sft["mean"] == pytest.approx(0.20) and sft["std"] == pytest.approx(0.10)
    assert doc["aggregate"]["HPD"]["F1"] == {"mean": 0.5, "std": 0.0, "n": 5}
    md = (tmp_path / "rep" / "table5-seeds.md").read_text()
    assert "| HPD | mean ± std (5) | 30.00 ± 7.91 | 50.00 ± 0.00 |" in md
    assert "| SFT | mean ± std (3) | 20.00 ± 10.00 |" in md and "| HPD | 717 | 30.00 | 50.00 |" in md
    for f in ("table5-seeds.png", "table5-seeds-spread.png"):
        assert (tmp_path / "rep" / "plots" / f).stat().st_size > 1000
    man = json.loads((tmp_path / "rep" / "manifest.json").read_text())
    assert validate_manifest(man) == [] and man["status"] == "complete" and man["missing"] == []


def test_missing_and_incomplete_runs_give_one_line_each(tmp_path):
    ok = fake_eval(tmp_path / "base", 0.0309)
    running = fake_eval(tmp_path / "hpd", None, status="running")
    r = runner.invoke(app, ["report", "--table", "1", "--out", str(tmp_path / "rep"), "--run", f"Base={ok}",
                            "--run", f"SFT={tmp_path / 'nope'}", "--run", f"HPD={running}",
                            "--run", f"DPO={tmp_path}"])
    assert r.exit_code == 1 and "Traceback" not in r.output
    lines = [x for x in r.output.splitlines() if x.startswith("missing: ")]
    assert lines == [f"missing: run 'SFT': no folder {tmp_path / 'nope'}",
                     f"missing: run 'HPD': {running} is an unfinished run (manifest status 'running'); rerun its "
                     "command to finish it",
                     f"missing: run 'DPO': {tmp_path} is not a run folder (no metrics.json, results.json or study.json)"]
    doc = json.loads((tmp_path / "rep" / "table1-methods.json").read_text())
    assert [r_["row"] for r_ in doc["rows"]] == ["Base"] and doc["rows"][0]["TS"] == 0.0309 and len(doc["missing"]) == 3
    md = (tmp_path / "rep" / "table1-methods.md").read_text()
    assert "| Base | 3.09 | 50.00 |" in md and "- run 'SFT': no folder" in md
    (tmp_path / "bad").mkdir()
    write_json(tmp_path / "bad" / "manifest.json", finish_manifest(new_manifest("hpd eval", {})))
    write_json(tmp_path / "bad" / "metrics.json", {"TS": 0.1, "F1": 0.2})
    with pytest.raises(RunProblem, match=r"metrics.json: no 'Step-SR', 'RC', 'Exact'"):
        load_run("X", tmp_path / "bad")


def test_schedules_and_checkpoints_from_the_training_run(tmp_path):
    staged = fake_train(tmp_path / "train" / "t-then-i", [{"views": {"T": 1}, "updates": 20000},
                                                          {"views": {"I": 1}, "updates": 20000}])
    weights = fake_train(tmp_path / "train" / "w5-1-5", [{"views": {"T": 5, "I": 1, "R": 5}, "updates": 20000}])
    ck = tmp_path / "train" / "w5-1-5" / "checkpoints" / "update-0040000" / "adapter"
    ck.mkdir(parents=True)
    runs = [("T->I", fake_eval(tmp_path / "e1", 0.1, adapter=staged)),
            ("5:1:5", fake_eval(tmp_path / "e2", 0.2, adapter=weights))]
    write_report({"components": runs, "checkpoints": [("40k", fake_eval(tmp_path / "e3", 0.3, adapter=ck))]},
                 tmp_path / "rep")
    comp = json.loads((tmp_path / "rep" / "table2-components.json").read_text())
    assert [r["info"]["schedule"] for r in comp["rows"]] == ["T x 20000 -> I x 20000", "T:I:R 5:1:5 x 20000"]
    assert [r["info"]["updates"] for r in comp["rows"]] == [40000, 20000]
    md = (tmp_path / "rep" / "table2-components.md").read_text()
    assert "| T->I | T x 20000 -> I x 20000 | 40000 | 10.00 |" in md
    cks = json.loads((tmp_path / "rep" / "table6-checkpoints.json").read_text())
    assert cks["rows"][0]["info"]["checkpoint"] == 40000 and cks["rows"][0]["info"]["updates"] == 20000
    assert schedule_text([{"views": {"T": 1, "I": 1}, "updates": 40000}]) == "T:I 1:1 x 40000"


def test_demo_and_study_folders(tmp_path):
    demo = tmp_path / "demo"
    demo.mkdir()
    write_json(demo / "results.json", {"seed": 0, "variants": {
        "Base": {**{k: 0.0 for k in KEYS}, "n_tasks": 24}, "HPD": {**{k: 0.25 for k in KEYS}, "n_tasks": 24}}})
    rows = load_run("0.6B", demo)
    assert [(r.group, r.row, r.metrics["TS"]) for r in rows] == [("0.6B", "Base", 0.0),
                                                                  ("0.6B", "HPD", 0.25)]
    study = tmp_path / "study"
    study.mkdir()
    cells = [{"defect_rate": 0.12, "seed": s, "folder": f"seed-{s}",
              "variants": {"SFT": {**{k: 0.5 for k in KEYS}, "TS": ts}}} for s, ts in ((0, 0.1), (1, 0.3), (2, 0.8))]
    from hpd.study import aggregate as study_aggregate

    write_json(study / "study.json", {"defect_rates": [0.12], "seeds": [0, 1, 2], "cells": cells,
                                      "summary": study_aggregate(cells)})
    write_report({"5": [(None, study)], "sizes": [("0.6B", demo)]}, tmp_path / "rep")
    doc = json.loads((tmp_path / "rep" / "table5-seeds.json").read_text())
    assert [r["row"] for r in doc["rows"]] == ["seed 0", "seed 1", "seed 2"]
    # mean (0.1 + 0.3 + 0.8) / 3 = 0.4; deviations -.3 -.1 .4 -> 0.26 / 2 = 0.13 -> std 0.360555
    assert doc["aggregate"]["SFT"]["TS"]["mean"] == pytest.approx(0.4)
    assert doc["aggregate"]["SFT"]["TS"]["std"] == pytest.approx(math.sqrt(0.13))
    # = the study's own summary
    assert doc["aggregate"]["SFT"]["TS"] == pytest.approx(study_aggregate(cells)["0.12"]["SFT"]["TS"])
    sizes = (tmp_path / "rep" / "table8-sizes.md").read_text()
    assert "| 0.6B | HPD | 25.00 |" in sizes and "| group | model |" in sizes


def test_a_real_eval_folder_and_a_spec_file(bench, tmp_path):
    evaluate_variant(bench, bench.tasks[:4], ReferencePolicy(), tmp_path / "ref", pool_k=20)
    spec = tmp_path / "spec.yaml"
    spec.write_text(f"tables:\n  methods:\n    Reference: {tmp_path / 'ref'}\n  7: ['{tmp_path / 'ref'}']\n")
    req = read_spec(spec)
    assert set(req) == {"methods", "7"}
    r = runner.invoke(app, ["report", "--spec", str(spec), "--out", str(tmp_path / "rep")])
    assert r.exit_code == 0, r.output
    doc = json.loads((tmp_path / "rep" / "table1-methods.json").read_text())
    assert doc["rows"][0]["TS"] == 1.0 and doc["rows"][0]["n_tasks"] == 4 and doc["rows"][0]["Action-Acc"] == 1.0
    assert json.loads((tmp_path / "rep" / "table7-weights.json").read_text())["rows"][0]["row"] == "ref"


@pytest.mark.parametrize("args,msg", [
    (["--table", "9", "--run", "x"], "unknown table '9'"),
    (["--table", "seeds"], "no runs given"),
    (["--table", "1", "--spec", "s.yaml"], "either --table"),
])
def test_bad_requests_are_one_line(args, msg, tmp_path):
    r = runner.invoke(app, ["report", "--out", str(tmp_path / "o"), *args])
    assert r.exit_code == 2 and msg in r.output and "Traceback" not in r.output, r.output


def test_bad_spec_file(tmp_path):
    (tmp_path / "s.yaml").write_text("tables:\n  methods: 3\n")
    with pytest.raises(ReportError, match=r"s.yaml: tables.methods: expected a mapping"):
        read_spec(tmp_path / "s.yaml")
    assert table_spec("table6").number == 6 and table_spec("weights").number == 7


def test_every_table_has_distinct_column_headers():
    from hpd.report.tables import TABLES

    for spec in TABLES.values():
        head = [spec.row_header, *spec.info]
        assert len(head) == len(set(head)), spec.key
