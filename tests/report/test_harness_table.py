"""Figure 4's table (hpd.report.harness_table) from a results registry: rows = variant and the harness it was trained
in, columns = the harness it was evaluated in; the numbers are the registry's, the transfer row has both harnesses."""

import json

import pytest

from hpd.report.harness_table import KEYS, harness_rows, harness_table
from hpd.report.registry import load_study, write_cell
from hpd.runfolder import write_json, write_jsonl

PI, SMOL = {}, {"harness": "smolagents"}
TRANSFER = {"kind": "transfer", "harness": "smolagents", "trained_harness": "pi", "from_arm": "main"}
#: cell -> (config, TS, F1, RC)
CELLS = {
    "main/defects-0.12/seed-0/Base": (PI, 0.125, 0.25, 0.5),
    "main/defects-0.12/seed-0/SFT": (PI, 0.25, 0.5, 0.75),
    "main/defects-0.12/seed-0/HPD": (PI, 0.375, 0.625, 0.875),
    "main/defects-0.12/seed-1/HPD": (PI, 0.5, 0.75, 1.0),
    "smolagents/defects-0.12/seed-0/Base": (SMOL, 0.0, 0.125, 0.25),
    "smolagents/defects-0.12/seed-0/SFT": (SMOL, 0.0625, 0.1875, 0.3125),
    "smolagents/defects-0.12/seed-0/HPD": (SMOL, 0.1875, 0.3125, 0.4375),
    "pi-to-smolagents/defects-0.12/seed-0/HPD": (TRANSFER, 0.09375, 0.21875, 0.34375),
}


@pytest.fixture
def registry(tmp_path):
    root = tmp_path / "results"
    for cell, (cfg, ts, f1, rc) in CELLS.items():
        run = tmp_path / "runs" / cell.replace("/", "_")
        write_json(run / "metrics.json", {"TS": ts, "F1": f1, "Step-SR": ts, "RC": rc, "Exact": ts, "Action-Acc": f1,
                                          "n_tasks": 4})
        write_jsonl(run / "tasks.jsonl", [{"uid": "t1", "TS": ts}])
        variant = cell.rsplit("/", 1)[1]
        write_cell(root, "fig", cell, run, config={**cfg, "variant": variant}, command="test")
    bfcl = tmp_path / "runs" / "bfcl"
    write_json(bfcl / "metrics.json", {"aggregates": {"overall": 0.5}, "n_entries": 2})
    write_cell(root, "fig", "bfcl/defects-0.12/seed-0/HPD", bfcl, config={"kind": "bfcl"}, command="test")
    return root / "fig"


def _table(text: str) -> dict[tuple[str, str], list[str]]:
    """(variant, trained in) -> the value cells of a markdown row."""
    rows = {}
    for line in text.splitlines()[2:]:
        cols = [c.strip() for c in line.strip("|").split("|")]
        rows[(cols[1], cols[2])] = cols[3:]
    return rows


def test_table_numbers_are_the_registrys(registry):
    text = harness_table(registry)
    head = [c.strip() for c in text.splitlines()[0].strip("|").split("|")]
    assert head == ["defects", "variant", "trained in (arm)", *(f"{h} {k}" for h in ("pi", "smolagents") for k in KEYS),
                    "seeds"]
    rows = _table(text)
    assert list(rows) == [("Base", "–"), ("SFT", "pi (main)"), ("SFT", "smolagents (smolagents)"),
                          ("HPD", "pi (main)"), ("HPD", "smolagents (smolagents)")]     # no BFCL row
    cells = load_study(registry)

    def got(cell):
        m = cells[cell]["metrics"]
        return [f"{m[k]:.3f}" for k in KEYS]

    assert rows[("Base", "–")] == got("main/defects-0.12/seed-0/Base") + got("smolagents/defects-0.12/seed-0/Base") \
        + ["0"]
    assert rows[("SFT", "pi (main)")] == got("main/defects-0.12/seed-0/SFT") + ["–"] * 3 + ["0"]
    assert rows[("SFT", "smolagents (smolagents)")] == ["–"] * 3 + got("smolagents/defects-0.12/seed-0/SFT") + ["0"]
    # the transfer row: Pi-trained HPD in Pi (two seeds: mean ± sample std) and its transfer cell in smolagents
    two = [(cells[f"main/defects-0.12/seed-{s}/HPD"]["metrics"][k]) for s in (0, 1) for k in KEYS]
    pi = [f"{(a + b) / 2:.3f} ± {abs(a - b) / 2 ** 0.5:.3f}" for a, b in zip(two[:3], two[3:])]
    assert rows[("HPD", "pi (main)")] == pi + got("pi-to-smolagents/defects-0.12/seed-0/HPD") + ["0,1"]
    assert rows[("HPD", "smolagents (smolagents)")] == ["–"] * 3 + got("smolagents/defects-0.12/seed-0/HPD") + ["0"]
    r = next(r for r in harness_rows(cells) if (r["variant"], r["trained"]) == ("HPD", "pi"))
    assert r["evaluated"]["smolagents"]["arms"] == ["pi-to-smolagents"] and r["evaluated"]["pi"]["seeds"] == [0, 1]


def test_empty_registry_says_so(tmp_path):
    assert harness_table(tmp_path / "none").startswith("No evaluated cell of the study `none`")


def test_hpd_report_study_prints_the_figure4_table(registry, tmp_path):
    from typer.testing import CliRunner

    from hpd.cli import app

    out = tmp_path / "rep"
    r = CliRunner().invoke(app, ["report", "--study", str(registry), "--out", str(out), "--resamples", "200"])
    assert r.exit_code == 0, r.output
    assert "## By harness (Figure 4)" in r.output and harness_table(registry) in r.output
    doc = json.loads((out / "study_report.json").read_text())
    assert [(x["variant"], x["trained"]) for x in doc["harnesses"]][:2] == [("Base", None), ("SFT", "pi")]
    # one harness only: no such section
    one = tmp_path / "one"
    for cell in ("main/defects-0.12/seed-0/SFT", "main/defects-0.12/seed-0/HPD"):
        write_cell(one, "s", cell, load_study(registry)[cell]["folder"], config={"variant": "x"}, command="t")
    r = CliRunner().invoke(app, ["report", "--study", str(one / "s"), "--out", str(tmp_path / "r1"),
                                 "--resamples", "200"])
    assert r.exit_code == 0, r.output
    assert "By harness" not in r.output
