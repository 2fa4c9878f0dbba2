"""The README's headline table comes from the results registry: the generator's numbers equal the registry's, and
the committed README's block is exactly what the committed registry gives."""

import json
from pathlib import Path

import pytest

from hpd.report.headline import (BEGIN, END, HeadlineError, headline, markers, named_blocks, read_block,
                                 replace_block, update_readme)
from hpd.report.registry import write_cell

REPO = Path(__file__).resolve().parents[2]


def _variant(run: Path, ts: list[int], rc: float) -> Path:
    """A finished evaluation folder with per-task TS values (the registry copies metrics and task rows)."""
    run.mkdir(parents=True)
    rows = [{"uid": f"t{i}", "kind": "parallel", "domain": "d", "TS": t, "F1": 0.5, "RC": rc} for i, t in enumerate(ts)]
    metrics = {"TS": sum(ts) / len(ts), "F1": 0.5, "Step-SR": 0.0, "RC": rc, "Exact": 0.0, "Action-Acc": 0.25,
               "n_tasks": len(ts), "n_boundaries": 8}
    (run / "metrics.json").write_text(json.dumps(metrics))
    (run / "tasks.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    return run


def _registry(tmp_path: Path) -> Path:
    root = tmp_path / "results"
    for seed, (sft, hpd) in enumerate([([0, 0, 1, 0], [1, 1, 1, 0]), ([0, 1, 0, 0], [1, 1, 0, 0])]):
        for name, ts, rc in (("SFT", sft, 0.5), ("HPD", hpd, 0.75)):
            run = _variant(tmp_path / "runs" / f"{seed}-{name}", ts, rc)
            write_cell(root, "s", f"main/defects-0.12/seed-{seed}/{name}", run,
                       config={"variant": name, "seed": seed}, command="test")
    return root / "s"


def test_headline_numbers_are_the_registrys(tmp_path):
    text = headline(_registry(tmp_path))
    assert "| main | 12% | SFT | 2 | 0.250 ± 0.000 |" in text          # TS 1/4 at both seeds
    assert "| main | 12% | HPD | 2 | 0.625 ± 0.177 |" in text          # 3/4 and 2/4: mean 0.625, std 0.1768
    assert "HPD − SFT" in text or "HPD - SFT" in text
    assert "+0.375" in text                                          # (2 + 1) / 8 paired TS gain


def test_empty_registry_says_so_and_markers_are_required(tmp_path):
    assert "No cell of the study `none`" in headline(tmp_path / "none")
    with pytest.raises(HeadlineError, match="no <!-- results:begin -->"):
        replace_block("# title\n", "x")
    readme = tmp_path / "README.md"
    readme.write_text(f"# hpd\n{BEGIN}\nold\n{END}\nrest\n")
    block = update_readme(readme, _registry(tmp_path))
    assert read_block(readme.read_text()) == block and readme.read_text().endswith(f"{END}\nrest\n")


def test_a_named_block_takes_its_study_and_leaves_the_other(tmp_path):
    readme = tmp_path / "README.md"
    b, e = markers("s")
    readme.write_text(f"{BEGIN}\nkeep\n{END}\n{b}\nold\n{e}\n")
    assert named_blocks(readme.read_text()) == ["s"]
    block = update_readme(readme, _registry(tmp_path))
    text = readme.read_text()
    assert read_block(text) == "keep" and read_block(text, "s") == block and "| main | 12% | HPD | 2 |" in block
    with pytest.raises(HeadlineError, match="no <!-- results:other:begin -->"):
        replace_block(text, "x", study="other")


def test_the_readme_blocks_equal_the_committed_registry(monkeypatch):
    """What `hpd report --study results/<study> --readme README.md --out DIR` writes is what the README holds: the
    unnamed block is issue 35's, each named block its study's (Figure 4's: the table by harness)."""
    text = (REPO / "README.md").read_text(encoding="utf-8")
    block = read_block(text)
    assert block is not None, "README.md lost its <!-- results:begin --> ... <!-- results:end --> block"
    monkeypatch.chdir(REPO)
    assert block == headline(Path("results") / "issue35")
    assert "figure4" in named_blocks(text)
    for study in named_blocks(text):
        assert read_block(text, study) == headline(Path("results") / study), study
    assert "| smolagents TS |" in read_block(text, "figure4")
