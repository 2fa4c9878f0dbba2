"""``hpd demo --harness`` (issue 37): the harness reaches every stage that depends on it (replay + documents, teacher
verification, training records, evaluation) and names the folders it shares; Pi's records and config hashes stay
those of before the field; the figure4 study spec, and its transfer cell (a Pi-trained variant evaluated in
smolagents through ``kind: transfer``)."""

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from hpd.cli import app
from hpd.demo import HARNESS_MAX_LENGTH, DemoConfig, check_same_config, full_record
from hpd.report.registry import read_cell
from hpd.report.studyplan import load_spec
from hpd.runfolder import RunFolderError, new_manifest, write_json

pytest.importorskip("smolagents")

REPO = Path(__file__).resolve().parents[2]
TINY = ["--model", "tiny", "--n-per-domain", "10", "--train-limit", "3", "--updates", "2", "--global-batch", "2",
        "--test-limit", "2", "--max-new-tokens", "8", "--max-turns", "1", "--teacher", "oracle",
        "--probe-examples", "0"]
#: config hashes of issue 35's cells computed by the checkout before DemoConfig had a harness (commit 921de79):
#: the registry cells of a Pi run keep their identity
ISSUE35_HASHES = {"main/defects-0.12/seed-0/Base": "5d6ffc6159ac46e5",
                  "main/defects-0.12/seed-0/HPD": "e6f5bfcb5fca0d9e",
                  "main/defects-0.12/seed-0/DPO": "08244aa85c787904",
                  "bfcl/defects-0.12/seed-0/HPD": "cd3f82ab3bf40b0a"}


def _ok(args):
    r = CliRunner().invoke(app, args)
    assert r.exit_code == 0, r.output
    return r


def test_pi_record_and_issue35_config_hashes_are_unchanged():
    from hpd.harnesses.registry import HARNESS_SPECS
    from hpd.study import spec_hash

    assert list(HARNESS_MAX_LENGTH) == list(HARNESS_SPECS)
    pi, smol = DemoConfig(), DemoConfig(harness="smolagents")
    assert "harness" not in pi.to_record() and pi.max_length == 2048
    assert smol.to_record()["harness"] == "smolagents" and smol.max_length == 4096
    assert full_record(pi.to_record())["harness"] == "pi"
    with pytest.raises(ValueError, match="choose from pi, smolagents"):
        DemoConfig(harness="nope")
    spec = load_spec(REPO / "configs" / "studies" / "issue35.yaml")
    cells = {c.id: c for c in spec.cells()}
    assert {c: spec_hash(spec, cells[c], Path("/r")) for c in ISSUE35_HASHES} == ISSUE35_HASHES


def test_a_pi_run_folder_is_not_resumed_by_another_harness(tmp_path):
    """A manifest of a Pi run (no harness field, as before the field existed) refuses a smolagents run."""
    write_json(tmp_path / "manifest.json", new_manifest("hpd demo", DemoConfig(out=tmp_path).to_record()))
    check_same_config(tmp_path, DemoConfig(out=tmp_path).to_record())
    with pytest.raises(RunFolderError, match="harness 'pi' \\(asked: 'smolagents'\\)"):
        check_same_config(tmp_path, DemoConfig(out=tmp_path, harness="smolagents").to_record())


def test_demo_harness_smolagents_end_to_end(tmp_path):
    """Every harness-dependent stage runs in smolagents, in folders named for it; the evaluation rows are
    smolagents episodes; the folder refuses a Pi run."""
    out = tmp_path / "run"
    _ok(["demo", *TINY, "--harness", "smolagents", "--out", str(out), "--variants", "Base,SFT,HPD"])
    assert (out / "boundaries-smolagents" / "done.json").is_file() and not (out / "boundaries").exists()
    replay = json.loads((out / "boundaries-smolagents" / "manifest.json").read_text())
    assert replay["config"]["harness"] == "smolagents"
    targets = [json.loads(x) for x in (out / "teach" / "targets.jsonl").read_text().splitlines()]
    assert all(t["context"]["systemPrompt"].startswith("You are an expert assistant") for t in targets)
    assert any(c.get("name") == "final_answer" for t in targets for c in t["target"]["content"])
    sft = json.loads((out / "train" / "sft" / "manifest.json").read_text())
    assert sft["config"]["data"]["max_length"] == 4096
    res = json.loads((out / "results.json").read_text())
    assert res["config"]["harness"] == "smolagents" and list(res["variants"]) == ["Base", "SFT", "HPD"]
    for name in ("base-smolagents", "sft", "hpd"):
        d = out / "eval" / name
        assert json.loads((d / "manifest.json").read_text())["config"]["agent_harness"] == "smolagents"
        assert set(json.loads((d / "metrics.json").read_text())["end_reasons"]) <= {"final_answer", "max_steps",
                                                                                    "error"}
        rows = [json.loads(x) for f in sorted((d / "shards").glob("part-*.jsonl")) for x in f.read_text().splitlines()]
        assert len(rows) == 2 and {r["harness"] for r in rows} == {"smolagents"}
        assert all(r["events"][-1]["type"] == "agent_end" for r in rows)
    assert not (out / "eval" / "base").exists()
    r = CliRunner().invoke(app, ["demo", *TINY, "--out", str(out), "--variants", "Base,SFT,HPD"])
    assert r.exit_code == 2 and "harness 'smolagents' (asked: 'pi')" in r.output
    r = CliRunner().invoke(app, ["demo", *TINY, "--harness", "nope", "--out", str(tmp_path / "x")])
    assert r.exit_code == 2 and "--harness 'nope': choose from pi, smolagents" in r.output
    r = CliRunner().invoke(app, ["demo", *TINY, "--harness", "smolagents", "--baselines", "--out", str(tmp_path / "x")])
    assert r.exit_code == 2 and "--baselines runs in Pi only" in r.output


def test_figure4_spec_declares_the_cells():
    """Pi = issue 35's main arm (same flags, same hashes: its trained cells are reused), smolagents trains its own,
    and the transfer cell evaluates the main arm's HPD in smolagents."""
    from hpd.study import _from_arm_config, spec_config, spec_hash, spec_status

    spec = load_spec(REPO / "configs" / "studies" / "figure4.yaml")
    issue35 = load_spec(REPO / "configs" / "studies" / "issue35.yaml")
    cells = {c.id: c for c in spec.cells()}
    assert list(cells) == [f"{a}/defects-0.12/seed-0/{v}" for a in ("main", "smolagents")
                           for v in ("Base", "SFT", "HPD")] + ["pi-to-smolagents/defects-0.12/seed-0/HPD"]
    root = Path("/r")
    theirs = {c.id: c for c in issue35.cells()}
    for v in ("Base", "SFT", "HPD"):
        cid = f"main/defects-0.12/seed-0/{v}"
        assert spec_hash(spec, cells[cid], root) == spec_hash(issue35, theirs[cid], root)
    smol = spec_config(spec, "smolagents", 0.12, 0, root)
    main = spec_config(spec, "main", 0.12, 0, root)
    assert (smol.harness, smol.max_length, main.harness) == ("smolagents", 4096, "pi")
    assert {k: v for k, v in smol.to_record().items() if k not in ("harness", "max_length", "out")} == \
        {k: v for k, v in main.to_record().items() if k not in ("max_length", "out")}      # the same budget
    t = cells["pi-to-smolagents/defects-0.12/seed-0/HPD"]
    assert (t.kind, spec.group(t.group).from_arm, spec.group(t.group).harness) == ("transfer", "main", "smolagents")
    cfg = _from_arm_config(spec, t, root)
    assert cfg["source_config_hash"] == spec_hash(spec, cells["main/defects-0.12/seed-0/HPD"], root)
    assert (cfg["harness"], cfg["trained_harness"]) == ("smolagents", "pi")
    st = {r["cell"]: r for r in spec_status(spec, root, Path("/nowhere"))["cells"]}
    assert "needs the trained HPD in /r/main/defects-0.12/seed-0/train/hpd" in st[t.id]["detail"]
    assert st[t.id]["group_command"] == st[t.id]["command"]
    assert "--harness smolagents" in st["smolagents/defects-0.12/seed-0/SFT"]["group_command"]


def test_every_shipped_study_spec_loads_and_hashes():
    from hpd.study import spec_hash

    for f in sorted((REPO / "configs" / "studies").glob("*.yaml")):
        spec = load_spec(f)
        assert all(len(spec_hash(spec, c, Path("/r"))) == 16 for c in spec.cells()), f


TINY_SPEC = """\
study: tinyfig4
flags: {model: tiny, n-per-domain: 10, updates: 2, global-batch: 2, test-limit: 2, train-limit: 3,
        max-new-tokens: 8, max-turns: 1, probe-examples: 0, teacher: oracle}
groups:
  - {name: pi, arm: main, variants: [Base, HPD]}
  - {name: smol, arm: smolagents, flags: {harness: smolagents}, variants: [Base]}
  - {name: transfer, kind: transfer, arm: pi-to-smolagents, from_arm: main, harness: smolagents, variants: [HPD],
     label: "trained in Pi, evaluated in smolagents"}
"""


def test_transfer_cell_evaluates_the_pi_trained_variant_in_smolagents(tmp_path):
    from hpd.report.harness_table import harness_table
    from hpd.study import spec_hash

    f = tmp_path / "spec.yaml"
    f.write_text(TINY_SPEC)
    spec = load_spec(f)
    root, reg = tmp_path / "runs", tmp_path / "results"
    base = ["study", "run", str(f), "--root", str(root), "--registry", str(reg)]
    transfer = "pi-to-smolagents/defects-0.12/seed-0/HPD"
    r = CliRunner().invoke(app, [*base, "--cells", transfer])
    assert r.exit_code == 2 and "run the main cell of HPD in this --root first" in r.output
    _ok([*base, "--cells", f"main/defects-0.12/seed-0/HPD,{transfer}"])
    cell = read_cell(reg / "tinyfig4" / transfer)
    t = next(c for c in spec.cells() if c.id == transfer)
    assert cell["manifest"]["config_hash"] == spec_hash(spec, t, root)
    assert cell["manifest"]["label"] == "trained in Pi, evaluated in smolagents"
    assert cell["manifest"]["command"] == f"hpd study run {f} --root {root} --registry {reg} --cells {transfer}"
    ev = root / "pi-to-smolagents" / "defects-0.12" / "seed-0" / "eval" / "hpd"
    man = json.loads((ev / "manifest.json").read_text())
    assert man["config"]["agent_harness"] == "smolagents"
    assert man["config"]["model"] == str(root / "main" / "defects-0.12" / "seed-0" / "train" / "hpd" / "model")
    assert not (root / "pi-to-smolagents" / "defects-0.12" / "seed-0" / "train").exists()      # nothing trained
    pi = read_cell(reg / "tinyfig4" / "main" / "defects-0.12" / "seed-0" / "HPD")["metrics"]
    line = next(x for x in harness_table(reg / "tinyfig4").splitlines() if "| HPD | pi (main) |" in x)
    assert line.split(" | ")[3:9] == [f"{pi['TS']:.3f}", f"{pi['F1']:.3f}", f"{pi['RC']:.3f}",
                                      f"{cell['metrics']['TS']:.3f}", f"{cell['metrics']['F1']:.3f}",
                                      f"{cell['metrics']['RC']:.3f}"]
    r = _ok(["study", "status", str(root), "--spec", str(f), "--registry", str(reg)])
    assert f"done      {transfer}" in r.output
