"""The demo as the standing end-to-end test: every stage runs on the built-in benchmark (small settings),
results.json carries the six metrics per variant, the same seed reproduces the run, a different seed
changes it, a killed run resumes, and the HTML report opens in headless Chromium without errors."""

import json
import math
import shutil
import subprocess

import pytest

from hpd.demo import METRIC_KEYS, VARIANTS, Demo, DemoConfig
from hpd.report.runs import read_results
from hpd.runfolder import validate_manifest
from hpd.train.logger import read_csv

SMALL = dict(model="tiny", n_per_domain=10, updates=6, global_batch=4, test_limit=4, train_limit=10, max_new_tokens=24,
             teacher="oracle")


def _run(out, seed=0, **kw):
    return Demo(DemoConfig(out=out, seed=seed, **{**SMALL, **kw}), log=lambda s: None).run()


@pytest.fixture(scope="module")
def demo_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("demo") / "run"
    return out, _run(out)


def test_read_results_refuses_unfinished_or_missing_runs(tmp_path):
    from hpd.runfolder import RunFolderError, finish_manifest, new_manifest, write_json

    with pytest.raises(RunFolderError, match=r"^no demo results at .*results.json$"):
        read_results(tmp_path)
    man = new_manifest("hpd demo", {})
    write_json(tmp_path / "manifest.json", man)
    write_json(tmp_path / "results.json", {"variants": {}})
    with pytest.raises(RunFolderError, match=r"unfinished demo run \(manifest status 'running'\)"):
        read_results(tmp_path)
    write_json(tmp_path / "manifest.json", finish_manifest(man))
    assert read_results(tmp_path) == {"variants": {}}


@pytest.mark.slow
def test_demo_end_to_end(demo_run):
    out, res = demo_run
    saved = json.loads((out / "results.json").read_text())
    assert read_results(out) == saved
    assert list(saved["variants"]) == list(VARIANTS)
    for v, m in saved["variants"].items():
        for k in METRIC_KEYS:
            assert 0.0 <= m[k] <= 1.0, (v, k, m)
        assert m["n_tasks"] == 4 and m["n_boundaries"] > 0
    assert saved["teacher"]["n_boundaries"] > 0 and saved["teacher"]["teacher"] == "oracle"
    # the oracle teacher's verified targets are the (compliant) reference actions on the built-in benchmark
    assert saved["teacher"]["first_attempt_acceptance"] == 1.0
    # defect accounting: every defective train reference was either replaced by a verified action or fell back
    d = saved["defects"]
    assert d["n_boundaries"] == saved["teacher"]["n_boundaries"] and d["n_defective"] == sum(d["by_kind"].values())
    assert d["replaced"] + d["fell_back"] + d["dropped"] == d["n_defective"]
    assert set(saved["timings"]) >= {"data", "train SFT", "teach", "train HPD", "eval HPD"}
    for f in ("results.md", "report.html", "plots/metrics.png", "boundaries/inspector.html", "teach/diagnostics.json",
              "train/hpd/metrics.json", "eval/hpd/metrics.json", "eval/hpd/tasks.jsonl", "manifest.json"):
        assert (out / f).is_file(), f
    man = json.loads((out / "manifest.json").read_text())
    assert man["status"] == "complete" and man["pi_version"].endswith("@1.6.0")
    # every stage of the demo writes the one manifest schema
    mans = sorted(out.rglob("manifest.json"))
    assert {m.parent.relative_to(out).as_posix() for m in mans} == {
        ".", "boundaries", "teach", "train/sft", "train/hpd-t", "train/hpd", "eval/base", "eval/sft", "eval/hpd-t",
        "eval/hpd"}
    for m in mans:
        assert validate_manifest(json.loads(m.read_text())) == [], m
    hpd_m = json.loads((out / "train/hpd/metrics.json").read_text())
    assert hpd_m["updates_per_view"] == {"T": 2, "I": 2, "R": 2}      # same budget: 6 updates, 1:1:1


@pytest.mark.slow
def test_demo_same_seed_reproduces_other_seed_differs_and_resume(demo_run, tmp_path):
    out, res = demo_run
    # a killed run: drop the last stages' outputs and rerun -> the finished stages are reused, same numbers
    again = tmp_path / "again"
    shutil.copytree(out, again)
    shutil.rmtree(again / "eval" / "hpd")
    (again / "results.json").unlink()
    res2 = _run(again)
    assert res2["variants"] == res["variants"]
    # the resumed run reports the time each finished stage took when it ran, and re-times the redone one
    assert "train SFT" in res2["resumed_stages"] and "eval HPD" not in res2["resumed_stages"]
    for stage in ("train SFT", "teach", "eval SFT", "replay + documents"):
        assert res2["timings"][stage] == res["timings"][stage], stage
    # same seed from scratch: identical training losses and metrics; another seed: different losses
    fresh = _run(tmp_path / "fresh")
    assert fresh["variants"] == res["variants"]
    def loss(d):
        return json.loads((d / "train/sft/metrics.json").read_text())["final_loss"]

    assert loss(tmp_path / "fresh") == loss(out)
    other = _run(tmp_path / "seed1", seed=1)
    assert loss(tmp_path / "seed1") != loss(out)
    assert list(other["variants"]) == list(VARIANTS)


@pytest.mark.slow
@pytest.mark.chromium
@pytest.mark.skipif(shutil.which("chromium") is None, reason="headless Chromium not installed (make chromium)")
def test_demo_report_opens_in_chromium(demo_run, tmp_path):
    out, _ = demo_run
    flags = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
             "--disable-component-update", "--no-first-run", f"--user-data-dir={tmp_path / 'prof'}",
             "--enable-logging=stderr", "--v=0", "--virtual-time-budget=3000", "--dump-dom"]
    p = subprocess.run(["chromium", *flags, (out / "report.html").resolve().as_uri()], capture_output=True,
                       text=True, timeout=120)
    assert p.returncode == 0, p.stderr[-2000:]
    assert [ln for ln in p.stderr.splitlines() if ":CONSOLE" in ln] == []
    assert 'id="results"' in p.stdout and "HPD-T" in p.stdout and "Action-Acc" in p.stdout
    assert "boundaries/inspector.html" in p.stdout
    for section in ('id="coverage"', 'id="defects"', 'id="timings"', "Held-out transcripts"):
        assert section in p.stdout, section
    assert p.stdout.count('class="ep"') == 3 * 4        # three held-out episodes for each of the 4 variants


@pytest.mark.slow
def test_demo_baselines_add_seven_row_table(tmp_path):
    """--baselines: DPO (pairs from the teach stage: the tiny base model reading the document proposes actions
    the harness rejects) and GRPO, GSPO, GiGPO (from the SFT model) are trained with their shipped tiny configs
    (the cell's paths, seed and budget written over them) and evaluated beside the others."""
    cell = tmp_path / "cell"
    res = _run(cell, teacher="base-doc", teach_attempts=1, baselines=True, baseline_updates=2)
    assert list(res["variants"]) == ["Base", "SFT", "DPO", "GRPO", "GSPO", "GiGPO", "HPD-T", "HPD"]
    for v in ("DPO", "GRPO", "GSPO", "GiGPO"):
        m = res["variants"][v]
        assert all(0.0 <= m[k] <= 1.0 for k in METRIC_KEYS) and m["n_tasks"] == 4, (v, m)
        run = cell / "train" / v.lower()
        man = json.loads((run / "manifest.json").read_text())
        assert validate_manifest(man) == [] and man["status"] == "complete", v
        assert json.loads((run / "metrics.json").read_text())["updates"] == 2, v
        assert (cell / "eval" / v.lower() / "metrics.json").is_file()
        assert f"train {v}" in res["timings"]
    # the RL methods start from the SFT model, DPO from the base model
    assert str(cell / "train" / "sft" / "model") in json.dumps(json.loads((cell / "train/grpo/manifest.json").read_text()))
    assert json.loads((cell / "train/dpo/metrics.json").read_text())["pairs"]["n_pairs"] > 0
    assert "GiGPO" in (cell / "results.md").read_text() and "GiGPO" in (cell / "report.html").read_text()
    # a baseline named in --variants runs alone: DPO needs the teach stage, not SFT (hpd study run's DPO cell)
    only = tmp_path / "dpo-only"
    res = _run(only, teacher="base-doc", teach_attempts=1, baselines=True, baseline_updates=2, variants=("Base", "DPO"))
    assert list(res["variants"]) == ["Base", "DPO"] and res["variants"]["DPO"]["n_tasks"] == 4
    assert sorted(p.name for p in (only / "train").iterdir()) == ["dpo"] and (only / "teach" / "done.json").is_file()
    # --dpo-start sft: SFT first, then DPO from it (the tiny model's SFT is a whole model: full fine-tuning), whose
    # reference is then the SFT model: before its first update the policy is the reference, so the loss is log 2
    sft = tmp_path / "dpo-from-sft"
    res = _run(sft, teacher="base-doc", teach_attempts=1, baselines=True, baseline_updates=2, variants=("SFT", "DPO"),
               dpo_start="sft")
    assert list(res["variants"]) == ["SFT", "DPO"] and sorted(p.name for p in (sft / "train").iterdir()) == ["dpo", "sft"]
    man = json.loads((sft / "train" / "dpo" / "manifest.json").read_text())
    assert man["config"]["model"]["path"] == str(sft / "train" / "sft" / "model")
    assert abs(read_csv(sft / "train" / "dpo" / "metrics.csv")[0]["loss"] - math.log(2)) < 1e-3   # float noise ~1e-4


def test_stages_needed_by_what_is_left_to_run(tmp_path):
    """DPO's pairs need the teach stage and not SFT; GRPO, GSPO and GiGPO start from SFT and need no teach stage;
    HPD-T and HPD need both. With a registry, a registered SFT is trained again only for an RL baseline."""
    def needed(variants, registered=(), registry=True, baselines=True, dpo_start="base"):
        d = Demo(DemoConfig(out=tmp_path, model="tiny", variants=variants, baselines=baselines, dpo_start=dpo_start),
                 log=lambda s: None, registry=object() if registry else None, estimate=False)
        d.registered = {v: {} for v in registered}
        return d.stages_needed(), d.baselines_to_run()

    table = ("Base", "SFT", "HPD-T", "HPD")
    assert needed(table, registered=("Base", "SFT", "HPD-T", "HPD", "GRPO", "GSPO", "GiGPO")) == ((False, True), ["DPO"])
    assert needed(table, registered=("Base", "SFT", "HPD-T", "HPD", "DPO")) == ((True, False), ["GRPO", "GSPO", "GiGPO"])
    assert needed(table, registered=table) == ((True, True), ["DPO", "GRPO", "GSPO", "GiGPO"])
    assert needed(table, registered=("Base", "SFT"), baselines=False) == ((False, True), [])
    assert needed(("Base",), registry=False) == ((True, True), ["DPO", "GRPO", "GSPO", "GiGPO"])
    assert needed(("Base", "SFT"), registry=False, baselines=False) == ((True, False), [])
    # the baselines --variants names are the only ones a run trains (hpd study run: one baseline cell)
    assert needed(table + ("DPO",), registered=table) == ((False, True), ["DPO"])
    assert needed(("DPO",), registry=False) == ((False, True), ["DPO"])
    assert needed(("Base", "GRPO", "GiGPO"), registry=False) == ((True, False), ["GRPO", "GiGPO"])
    # --dpo-start sft: DPO starts from the SFT adapter, so it needs SFT as well as its pairs
    assert needed(("DPO",), registry=False, dpo_start="sft") == ((True, True), ["DPO"])
    assert needed(table + ("DPO",), registered=table, dpo_start="sft") == ((True, True), ["DPO"])
    with pytest.raises(ValueError, match="dpo_start 'sf'"):
        DemoConfig(out=tmp_path, model="tiny", dpo_start="sf")


def test_dpo_start_sets_the_dpo_baselines_start_and_leaves_old_records_alone(tmp_path):
    """--dpo-start sft points DPO's config at the cell's SFT adapter (or whole SFT model); the default leaves it on
    the base model and out of the config record, so registered cells keep their identity."""
    from hpd.demo import registry_config
    from hpd.methods.baselines import method_config

    sft = tmp_path / "sft"
    sft.mkdir()
    (sft / "adapter_config.json").write_text("{}")
    paths = dict(base=tmp_path / "base", sft=sft, data_dir=tmp_path, split_file=tmp_path / "split.json",
                 teach_dir=tmp_path / "teach", boundaries_dir=tmp_path / "b")
    base_cfg = DemoConfig(out=tmp_path, model="smollm2")
    from_sft = DemoConfig(out=tmp_path, model="smollm2", dpo_start="sft")
    assert method_config("dpo", base_cfg, kind="real", **paths).model.adapter is None
    assert method_config("dpo", base_cfg, kind="real", **paths).model.path == str(tmp_path / "base")
    assert method_config("dpo", from_sft, kind="real", **paths).model.adapter == str(sft)
    assert "dpo_start" not in base_cfg.to_record() and from_sft.to_record()["dpo_start"] == "sft"
    assert registry_config(base_cfg, "DPO") != registry_config(from_sft, "DPO")
    from typer.testing import CliRunner

    from hpd.cli import app

    r = CliRunner().invoke(app, ["demo", "--model", "tiny", "--dpo-start", "sf", "--out", str(tmp_path / "x")])
    assert r.exit_code == 2 and r.output.strip() == "error: --dpo-start 'sf': choose from base, sft", r.output
    assert "--dpo-start" in CliRunner().invoke(app, ["demo", "--help"]).output


def test_held_out_spreads_over_kinds_domains_and_distinct_trajectories(tmp_path):
    """A capped evaluation alternates kinds, lets the domains take turns, and shows every parallel trajectory of a
    domain once (alternating hard and simple phrasing) before any simple/hard twin; uncapped = split order."""
    from collections import Counter

    from hpd.bench.builtin import generate
    from hpd.bench.loader import load_bench
    from hpd.bench.split import make_split, select
    from hpd.demo import held_out

    bench = load_bench(generate(tmp_path / "data", seed=0, n_per_domain=30))
    test = select(bench.tasks, make_split(bench.tasks, seed=0), "test")
    assert held_out(test, None) == test and held_out(test, len(test) + 5) == test
    picked = held_out(test, 24)
    assert len(picked) == len({t.uid for t in picked}) == 24
    assert [t.kind for t in picked[:4]] == ["parallel", "sequential"] * 2
    par = [t for t in picked if t.kind == "parallel"]
    seq = [t for t in picked if t.kind == "sequential"]
    assert len(par) == len(seq) == 12
    avail = Counter(t.domain for t in test if t.kind == "parallel")
    assert set(Counter(t.domain for t in par)) == set(avail)                   # every domain the split has
    assert max(Counter(t.domain for t in par).values()) - min(Counter(t.domain for t in par).values()) <= 1
    groups = [(t.domain, t.index) for t in par]
    n_traj = len({(t.domain, t.index) for t in test if t.kind == "parallel"})
    assert len(set(groups)) == min(len(par), n_traj)                             # no twin while a trajectory is left
    assert {"simple" in t.path for t in par} == {True, False}
    assert set(Counter(t.domain for t in seq)) == {t.domain for t in test if t.kind == "sequential"}


def test_variant_trainer_config_carries_the_lr_schedule(tmp_path):
    """--lr-decay / --warmup reach every variant's trainer config, which the trainer validates; a run shorter than
    the warm-up keeps one update at the full LR."""
    from hpd.demo import config_for_model, train_config
    from hpd.train.config import TrainConfig

    cfg = config_for_model("smollm2", out=tmp_path, lr_decay="linear", warmup_updates=5)
    tc = TrainConfig(**train_config(cfg, "sft", {"T": 1}, "reference", tmp_path))
    assert (tc.optim.decay, tc.optim.warmup_updates, tc.optim.lr) == ("linear", 5, cfg.lr)
    short = TrainConfig(**train_config(cfg, "warm", {"I": 1}, "reference", tmp_path, updates=3))
    assert short.optim.warmup_updates == 2 and short.total_updates == 3


def test_variants_subset_then_more_rows_resume(tmp_path):
    """``hpd demo --variants Base,SFT`` trains and evaluates only those rows (no teacher, no HPD); the same folder
    rerun with ``--variants Base,SFT,HPD-T`` adds the teacher and HPD-T and resumes SFT and its evaluation."""
    from typer.testing import CliRunner

    from hpd.cli import app

    out = tmp_path / "run"
    args = ["demo", "--model", "tiny", "--out", str(out), "--n-per-domain", "10", "--train-limit", "3", "--updates", "2",
            "--global-batch", "2", "--test-limit", "1", "--max-new-tokens", "8", "--max-turns", "1",
            "--teacher", "oracle", "--probe-examples", "0"]
    r = CliRunner().invoke(app, [*args, "--variants", "SFT, Base"])
    assert r.exit_code == 0, r.output
    res = json.loads((out / "results.json").read_text())
    assert list(res["variants"]) == ["Base", "SFT"] and res["config"]["variants"] == ["Base", "SFT"]
    assert not (out / "teach").exists() and not (out / "train" / "hpd-t").exists()
    r = CliRunner().invoke(app, [*args, "--variants", "Base,SFT,HPD-T"])
    assert r.exit_code == 0, r.output
    res = json.loads((out / "results.json").read_text())
    assert list(res["variants"]) == ["Base", "SFT", "HPD-T"]
    assert {"train SFT", "eval SFT"} <= set(res["resumed_stages"]) and "train HPD-T" not in res["resumed_stages"]
    assert not (out / "train" / "hpd").exists()


@pytest.mark.slow
def test_a_restored_teach_folder_skips_the_teacher(tmp_path):
    """A finished teach folder copied into a fresh run folder with timings.json, as the study's runner restores
    one from its archive (docs/experiments/2026-12-04-issue35-study/run-cell.sh): the rerun trains and evaluates
    HPD-T on the same targets to the same metrics without the i-warm teacher's warm-up (its weights are not
    copied), and reports the teacher stages' stored times as resumed."""
    from typer.testing import CliRunner

    from hpd.cli import app
    from hpd.runfolder import RunFolderError
    from hpd.teacher.run import FinishedTeacher

    args = ["demo", "--model", "tiny", "--n-per-domain", "10", "--train-limit", "3", "--updates", "2",
            "--global-batch", "2", "--test-limit", "1", "--max-new-tokens", "8", "--max-turns", "1",
            "--teacher", "i-warm", "--probe-examples", "0", "--variants", "Base,HPD-T"]
    a, b = tmp_path / "a", tmp_path / "b"
    r = CliRunner().invoke(app, [*args, "--out", str(a)])
    assert r.exit_code == 0, r.output
    assert (a / "train" / "teacher-warm" / "done.json").is_file()
    b.mkdir()
    shutil.copytree(a / "teach", b / "teach")
    shutil.copy(a / "timings.json", b / "timings.json")
    r = CliRunner().invoke(app, [*args, "--out", str(b)])
    assert r.exit_code == 0, r.output
    assert not (b / "train" / "teacher-warm").exists()
    ra, rb = (json.loads((x / "results.json").read_text()) for x in (a, b))
    assert rb["teacher"] == ra["teacher"] and rb["teacher"]["teacher"] == "i-warm"
    assert rb["variants"]["HPD-T"] == ra["variants"]["HPD-T"]
    warm = "train teacher warm-up (I view)"
    assert {"teach", warm} <= set(rb["resumed_stages"]) and rb["timings"][warm] == ra["timings"][warm]
    assert FinishedTeacher(b / "teach").name == "i-warm"
    with pytest.raises(RunFolderError, match="lacks 1 boundaries"):
        FinishedTeacher(b / "teach").propose([object()])
    with pytest.raises(RunFolderError, match=r"manifest.json: no config.teacher"):
        FinishedTeacher(tmp_path)


def test_demo_dtype_reaches_every_stage_and_the_manifests(tmp_path):
    """``--dtype`` (default auto, resolved by hpd.policy.dtype: bfloat16 on a CPU with AVX512-BF16/AMX-BF16) goes
    to training (model.precision), evaluation and the baselines; the manifests record what it resolved to."""
    from typer.testing import CliRunner

    from hpd.cli import app
    from hpd.demo import config_for_model, train_config
    from hpd.methods.baselines import update
    from hpd.policy.dtype import resolve_dtype_name

    args = ["demo", "--model", "tiny", "--n-per-domain", "10", "--train-limit", "3", "--updates", "1",
            "--global-batch", "2", "--test-limit", "1", "--max-new-tokens", "8", "--max-turns", "1",
            "--teacher", "oracle", "--probe-examples", "0", "--variants", "Base,SFT"]
    for flag, want in ((None, resolve_dtype_name("auto")), ("float32", "float32"), ("bf16", "bfloat16")):
        out = tmp_path / str(flag)
        r = CliRunner().invoke(app, [*args, "--out", str(out), *(["--dtype", flag] if flag else [])])
        assert r.exit_code == 0, r.output
        man = json.loads((out / "manifest.json").read_text())
        assert man["config"]["dtype"] == (flag and flag.replace("bf16", "bfloat16") or "auto") and man["dtype"] == want
        for stage in ("train/sft", "eval/sft", "eval/base"):
            assert json.loads((out / stage / "manifest.json").read_text())["dtype"] == want, stage
    cfg = config_for_model("tiny", dtype="bfloat16")
    assert train_config(cfg, "x", {"T": 1}, "reference", tmp_path)["model"]["precision"] == "bf16"
    assert update("grpo", cfg, base=tmp_path, sft=None, data_dir=tmp_path, split_file=tmp_path, teach_dir=tmp_path,
                  boundaries_dir=tmp_path)["model"]["precision"] == "bf16"
    assert train_config(config_for_model("smollm2"), "x", {"T": 1}, "reference", tmp_path)["model"]["precision"] == "auto"


def test_per_model_defaults_live_in_one_table():
    """MODEL_DEFAULTS is the one place of every per-model default: DemoConfig fills what it is not given from its
    model's row, config_for_model is the same with None meaning "the default", `hpd demo --help` shows the table,
    and the default model is one constant."""
    import re
    from dataclasses import fields

    from typer.testing import CliRunner

    from hpd.cli import app
    from hpd.demo import DEFAULT_MODEL, MODEL_DEFAULTS, PER_MODEL, config_for_model, model_kind

    per_model = {f.name for f in fields(DemoConfig) if f.default is PER_MODEL}
    assert set(MODEL_DEFAULTS["tiny"]) == set(MODEL_DEFAULTS["real"]) == per_model
    for model in ("tiny", "smollm2", "/a/local/model"):
        row = MODEL_DEFAULTS[model_kind(model)]
        assert {k: getattr(DemoConfig(model=model), k) for k in row} == row
        assert DemoConfig(model=model, updates=3) == config_for_model(model, updates=3, lr=None)
    assert DemoConfig().model == config_for_model().model == DEFAULT_MODEL
    r = CliRunner().invoke(app, ["demo", "--help"], env={"COLUMNS": "400", "TERMINAL_WIDTH": "400"})
    text = re.sub(r"\s+", " ", re.sub(r"\x1b\[[0-9;]*m|[│╭╮╰╯─]", " ", r.output))
    assert f"[default: {DEFAULT_MODEL}]" in text
    for key in ("updates", "warmup_updates", "max_new_tokens"):
        assert f"Default: {MODEL_DEFAULTS['tiny'][key]} (tiny), {MODEL_DEFAULTS['real'][key]} (real model)." in text
    assert f"Default: {MODEL_DEFAULTS['tiny']['global_batch']}." in text
