"""The Python front door (hpd.api): replay -> teach -> train -> evaluate -> report as functions over run folders, on
the built-in benchmark and the tiny model; ``import hpd`` stays light."""

import json
import subprocess
import sys

import hpd.api as hpd


def test_import_hpd_loads_no_stage():
    code = "import sys, hpd; print(sorted(m for m in sys.modules if m.startswith('hpd')))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "['hpd']"
    assert hpd.__all__ == ["replay", "teach", "train", "evaluate", "report", "demo", "metrics"]


def test_the_stages_as_functions(builtin_dir, tiny_dir, tmp_path):
    r = hpd.replay(builtin_dir, tmp_path / "bds", limit=4, pool_k=3)
    assert r["manifest"]["status"] == "complete" and r["stats"]["n_tasks"] == 4
    t = hpd.teach(tmp_path / "bds", tmp_path / "teach", teacher="oracle")
    assert len(t.records) == r["stats"]["n_boundaries"] and (tmp_path / "teach" / "targets.jsonl").is_file()
    adapter = hpd.train("configs/tiny-cpu.yaml", tmp_path / "teach", tmp_path / "train",
                        overrides=[f"model.path={tiny_dir}", "schedule.phases.0.updates=2", "batch.global_batch=2",
                                   "checkpoint.every=2", "logging.probe_examples=0", "logging.curves_png=false"])
    assert adapter == tmp_path / "train" / "adapter" and (adapter / "adapter_config.json").is_file()
    m = hpd.evaluate(tiny_dir, builtin_dir, tmp_path / "eval", adapter=adapter, limit=2, max_turns=2,
                     max_new_tokens=8, dtype="float32")
    assert m["n_tasks"] == 2 and hpd.metrics(tmp_path / "eval") == json.loads(json.dumps(m))
    ref = hpd.evaluate("reference", builtin_dir, tmp_path / "ref", limit=2)
    assert ref["TS"] == 1.0
    rep = hpd.report(tmp_path / "report", {"HPD": tmp_path / "eval", "Reference": tmp_path / "ref"})
    (stem, s), = rep.items()
    assert s["rows"] == 2 and not s["missing"] and (tmp_path / "report" / f"{stem}.md").is_file()
