"""Why a study's variants differ (hpd.report.studywhy): how the episodes end, pooled over seeds, and what each
HPD cell's teacher did (teacher.json, written at registration or attached later from the run folder)."""

import json
from pathlib import Path

import pytest

from hpd.report.registry import (TEACHER_FILE, RegistryError, attach_teacher, attach_teachers, load_study,
                                 read_teacher, write_cell)
from hpd.report.studystats import markdown, study_report
from hpd.report.studywhy import behaviour
from hpd.runfolder import new_manifest, write_json, write_jsonl

KEYS = ("TS", "F1", "Step-SR", "RC", "Exact", "Action-Acc")
TEACHER = {"teacher": {"teacher": "i-warm", "first_attempt_acceptance": 0.75, "candidate_acceptance": 0.5,
                       "mean_attempts": 1.25, "n_boundaries": 10, "n_teacher": 9, "n_fallback": 1},
           "teacher_choice": {"chosen": "i-warm"},
           "defects": {"n_boundaries": 10, "n_defective": 3, "replaced": 2, "fell_back": 1}}


def _row(uid, end="natural", turns=1, calls=0, matched=0, finished=True):
    return {"uid": uid, "kind": "parallel", "domain": "Math", "difficulty": "hard", "TS": 0.0, "F1": 0.0,
            "Exact": 0.0, "Step-SR": 0.0, "matched": matched, "n_scorable": 2, "n_calls": calls, "valid_turns": turns,
            "turns": turns, "finished": finished, "protocol_failure": False, "end_reason": end}


def _cell(reg, cell, tmp, rows, teacher=None, run_folder=None):
    d = tmp / "ev" / cell.replace("/", "_")
    write_json(d / "metrics.json", {**{k: 0.0 for k in KEYS}, "n_tasks": len(rows), "n_boundaries": 1})
    write_jsonl(d / "tasks.jsonl", rows)
    return write_cell(reg, "st", cell, d, config={"cell": cell}, command="hpd demo ...", teacher=teacher,
                      extra={"run_folder": str(run_folder)} if run_folder else None)


def test_behaviour_by_hand():
    rows = [_row("a", "max_turns", turns=6, calls=6, matched=1, finished=False), _row("b", turns=2, calls=2, matched=2),
            _row("c", turns=1, calls=0, finished=False), _row("d", turns=3, calls=0)]
    b = behaviour(rows)
    assert b == {"episodes": 4, "at_turn_limit": 0.25, "finished": 0.5, "turns_per_episode": 3.0,
                 "calls_per_episode": 2.0, "call_precision": pytest.approx(3 / 8)}
    assert behaviour([])["episodes"] == 0 and behaviour([])["call_precision"] is None
    assert behaviour([_row("x")])["call_precision"] is None          # no call made: no precision, not 0
    assert behaviour([_row("s", "max_steps", turns=7)])["at_turn_limit"] == 1.0   # smolagents' budget end


def test_report_pools_behaviour_over_seeds_and_lists_teachers(tmp_path):
    reg = tmp_path / "results"
    for s in (0, 1):
        _cell(reg, f"main/defects-0.12/seed-{s}/SFT", tmp_path, [_row("a", turns=2, calls=1, matched=1)])
        _cell(reg, f"main/defects-0.12/seed-{s}/HPD", tmp_path,
              [_row("a", "max_turns", turns=6, calls=s + 3, finished=False)], teacher=TEACHER)
    doc = study_report(reg / "st", resamples=200)
    by = {r["variant"]: r for r in doc["behaviour"]}
    assert by["HPD"]["seeds"] == [0, 1] and by["HPD"]["episodes"] == 2 and by["HPD"]["at_turn_limit"] == 1.0
    assert by["HPD"]["calls_per_episode"] == 3.5 and by["HPD"]["call_precision"] == 0.0
    assert by["SFT"]["at_turn_limit"] == 0.0 and by["SFT"]["call_precision"] == 1.0
    assert [r["cell"] for r in doc["teacher"]] == [f"main/defects-0.12/seed-{s}/HPD" for s in (0, 1)]
    assert doc["teacher"][0]["defects_replaced"] == 2 and doc["teacher"][0]["n_fallback"] == 1
    md = markdown(doc)
    assert "| main | 12% | HPD | 2 | 2 | 1.000 | 0.000 | 6.00 | 3.50 | 0.000 |" in md
    assert "| main/defects-0.12/seed-0/HPD | i-warm | 0.750 | 0.500 | 1.25 | 9 / 1 | 2 / 1 of 3 |" in md


def _run_folder(path: Path, variants=("HPD",), teacher=TEACHER) -> Path:
    path.mkdir(parents=True)
    write_json(path / "manifest.json", new_manifest("hpd demo", {"x": 1}))   # running again: not what counts
    write_json(path / "results.json", {"variants": {v: {"TS": 0.0} for v in variants}, **teacher})
    return path


def test_attach_teachers_from_finished_run_folders_only(tmp_path):
    reg = tmp_path / "results"
    runs = tmp_path / "runs"
    good = _run_folder(runs / "main" / "defects-0.12" / "seed-0")
    _run_folder(runs / "main" / "defects-0.12" / "seed-1", variants=("SFT",))      # its HPD-T not evaluated yet
    _cell(reg, "main/defects-0.12/seed-0/HPD", tmp_path, [_row("a")], run_folder=good)
    _cell(reg, "main/defects-0.12/seed-0/SFT", tmp_path, [_row("a")], run_folder=good)
    _cell(reg, "main/defects-0.12/seed-1/HPD-T", tmp_path, [_row("a")],
          run_folder=runs / "main" / "defects-0.12" / "seed-1")
    _cell(reg, "main/defects-0.12/seed-2/HPD", tmp_path, [_row("a")], run_folder=tmp_path / "gone" / "main" / "defects-0.12" / "seed-2")
    got = dict(attach_teachers(reg / "st"))
    assert list(got) == [f"main/defects-0.12/seed-{s}/{v}" for s, v in ((0, "HPD"), (1, "HPD-T"), (2, "HPD"))]
    assert got["main/defects-0.12/seed-0/HPD"].startswith("attached from")
    assert "results.json holds no finished HPD-T (its variants: SFT)" in got["main/defects-0.12/seed-1/HPD-T"]
    assert "no demo results at" in got["main/defects-0.12/seed-2/HPD"]
    cells = load_study(reg / "st")
    assert cells["main/defects-0.12/seed-0/HPD"]["teacher"] == TEACHER
    assert cells["main/defects-0.12/seed-0/SFT"]["teacher"] is None
    assert dict(attach_teachers(reg / "st")).keys() == {"main/defects-0.12/seed-1/HPD-T",
                                                        "main/defects-0.12/seed-2/HPD"}   # attached once
    # a moved run tree: --runs finds the cell's folder by its <arm>/defects-<r>/seed-<s> parts
    moved = _run_folder(tmp_path / "moved" / "main" / "defects-0.12" / "seed-2")
    got = dict(attach_teachers(reg / "st", tmp_path / "moved"))
    assert got["main/defects-0.12/seed-2/HPD"] == f"attached from {moved / 'results.json'}"


def test_attach_teacher_refuses_results_without_a_teacher_and_broken_files(tmp_path):
    reg = tmp_path / "results"
    folder = _cell(reg, "main/defects-0.12/seed-0/HPD", tmp_path, [_row("a")])
    with pytest.raises(RegistryError, match="no teacher diagnostics"):
        attach_teacher(folder, {"variants": {"HPD": {}}, "teacher": None})
    assert not (folder / TEACHER_FILE).exists()
    (folder / TEACHER_FILE).write_text("{broken")
    with pytest.raises(RegistryError, match="unreadable registry teacher record"):
        read_teacher(folder)


def test_attach_teacher_cli(tmp_path):
    from typer.testing import CliRunner

    from hpd.cli import app

    reg = tmp_path / "results"
    good = _run_folder(tmp_path / "runs" / "main" / "defects-0.12" / "seed-0")
    _cell(reg, "main/defects-0.12/seed-0/HPD", tmp_path, [_row("a")], run_folder=good)
    r = CliRunner().invoke(app, ["study", "attach-teacher", str(reg / "st")])
    assert r.exit_code == 0, r.output
    assert "1 of 1 cell(s) without teacher.json attached" in r.output
    assert json.loads((reg / "st" / "main/defects-0.12/seed-0/HPD" / TEACHER_FILE).read_text()) == TEACHER
    r = CliRunner().invoke(app, ["study", "attach-teacher", str(tmp_path / "nope")])
    assert r.exit_code == 2 and "is not a folder" in r.output
