"""The study's results registry (hpd.report.registry), the study spec and `hpd study status`
(hpd.report.studyplan, hpd.study), and `hpd report --study` (hpd.report.studystats), with numbers checked by hand."""

import json
import math
from pathlib import Path

import pytest

from hpd.report.registry import (CELL_FILES, TASK_FIELDS, Registry, RegistryError, cell_id, list_cells, parse_cell,
                                 read_cell, read_tasks, read_teacher, write_cell)
from hpd.report.studystats import mcnemar_exact, paired_difference, study_report, write_study_report
from hpd.runfolder import config_hash, write_json, write_jsonl

REPO = Path(__file__).resolve().parents[2]
KEYS = ("TS", "F1", "Step-SR", "RC", "Exact", "Action-Acc")


def _row(uid, ts, kind="parallel"):
    """One hpd eval task row (the fields eval writes, a transcript included), TS/Exact = ts, one turn."""
    return {"uid": uid, "kind": kind, "domain": "Math", "difficulty": "hard", "TS": float(ts), "F1": float(ts),
            "Exact": float(ts), "Step-SR": float(ts), "matched": int(ts), "n_scorable": 1, "n_calls": 1,
            "valid_turns": 1, "turns": 1, "finished": True, "protocol_failure": False, "end_reason": "natural",
            "usage": [], "EM_TRAJECT": 0.0, "messages": [{"role": "user", "content": "x"}]}


def _eval_folder(d: Path, ts: dict[str, int]) -> Path:
    rows = [_row(u, t) for u, t in ts.items()]
    m = sum(ts.values()) / len(ts)
    write_json(d / "metrics.json", {**{k: m for k in KEYS}, "n_tasks": len(ts), "n_boundaries": 2 * len(ts)})
    write_jsonl(d / "tasks.jsonl", rows)
    return d


def _register(reg_root, study, cell, tmp, ts, label=None, dtype="float32"):
    d = _eval_folder(tmp / "ev" / cell.replace("/", "_"), ts)
    p = parse_cell(cell)
    return write_cell(reg_root, study, cell, d, config={"variant": p["variant"], "seed": p["seed"]},
                      command=f"hpd demo ... ({cell})", seed=p["seed"], dtype=dtype, wall_s=1.0,
                      extra={"label": label} if label else None)


# ------------------------------------------------------------------------------------------ the registry
def test_cell_ids():
    assert cell_id("main", 0.12, 0, "HPD-T") == "main/defects-0.12/seed-0/HPD-T"
    assert parse_cell("oracle-teacher/defects-0.00/seed-2/HPD") == {"arm": "oracle-teacher", "defect_rate": 0.0,
                                                                    "seed": 2, "variant": "HPD"}
    with pytest.raises(RegistryError, match="not a registry cell"):
        parse_cell("main/seed-0/HPD")
    with pytest.raises(RegistryError, match="registry arm 'a b'"):
        cell_id("a b", 0.1, 0, "HPD")


def test_write_cell_keeps_slim_rows_metrics_and_provenance(tmp_path):
    ev = _eval_folder(tmp_path / "eval" / "sft", {"t1": 1, "t2": 0})
    dest = write_cell(tmp_path / "results", "s", "main/defects-0.12/seed-0/SFT", ev, config={"a": 1},
                      command="hpd demo --seed 0", metrics={"TS": 0.5, "Action-Acc": 0.0}, dtype="bfloat16",
                      wall_s=12.345, seed=0, timings={"train SFT": 10.0, "eval SFT": 2.3})
    assert dest == tmp_path / "results" / "s" / "main" / "defects-0.12" / "seed-0" / "SFT"
    assert sorted(p.name for p in dest.iterdir()) == sorted(CELL_FILES)
    rows = read_tasks(dest)
    assert [r["uid"] for r in rows] == ["t1", "t2"]
    assert set(rows[0]) == set(TASK_FIELDS) and "messages" not in rows[0]     # slim: no transcripts
    got = read_cell(dest)
    assert got["metrics"]["TS"] == 0.5 and got["metrics"]["n_boundaries"] == 4   # the row laid over the file
    man = got["manifest"]
    assert man["config_hash"] == config_hash({"a": 1}) and man["command"] == "hpd demo --seed 0"
    assert man["status"] == "complete" and man["wall_s"] == 12.345 and man["dtype"] == "bfloat16"
    assert set(man["git"]) == {"commit", "dirty"} and man["timings"]["train SFT"] == 10.0
    assert man["machine"]["cpu_cores"] >= 1 and "torch" in man["machine"] and "cpu_model" in man["machine"]
    # written again: replaced whole, no temporary or set-aside folder left
    write_cell(tmp_path / "results", "s", "main/defects-0.12/seed-0/SFT", ev, config={"a": 1}, command="c2")
    assert read_cell(dest)["manifest"]["command"] == "c2"
    assert [p.name for p in dest.parent.iterdir()] == ["SFT"]
    assert list(list_cells(tmp_path / "results" / "s")) == ["main/defects-0.12/seed-0/SFT"]


def test_lookup_finds_the_same_config_and_refuses_another(tmp_path):
    ev = _eval_folder(tmp_path / "ev", {"t1": 1})
    reg = Registry(tmp_path / "results", "s", "main")
    cell = reg.cell(0.12, 1, "HPD")
    assert reg.lookup(cell, "0" * 16) is None
    reg.write(cell, ev, config={"x": 1}, command="hpd demo")
    assert reg.lookup(cell, config_hash({"x": 1}))["TS"] == 1.0
    with pytest.raises(RegistryError, match="holds another config"):
        reg.lookup(cell, config_hash({"x": 2}))
    assert read_cell(reg.folder(cell))["manifest"]["arm"] == "main"


# ------------------------------------------------------------------------------------------ statistics
def test_mcnemar_exact_by_hand():
    assert mcnemar_exact(4, 0) == pytest.approx(0.125)            # 2 * 0.5^4
    assert mcnemar_exact(0, 4) == pytest.approx(0.125)
    assert mcnemar_exact(3, 1) == pytest.approx(2 * (1 + 4) / 16)  # 2 * P(X <= 1), X ~ Bin(4, 1/2)
    assert mcnemar_exact(0, 0) == 1.0 and mcnemar_exact(5, 5) == 1.0


def test_bootstrap_interval_of_two_tasks_by_hand():
    """One seed, two tasks with differences 1 and 0: a resample's mean is 0, 1/2 or 1 with probabilities
    1/4, 1/2, 1/4, so the 2.5 % and 97.5 % points are 0 and 1."""
    pairs = [("a", {"TS": 1.0}, {"TS": 0.0}), ("b", {"TS": 1.0}, {"TS": 1.0})]
    assert paired_difference(pairs, "TS") == {"diff": 0.5, "ci_low": 0.0, "ci_high": 1.0}
    same = [(u, {"TS": 1.0}, {"TS": 0.0}) for u in "abcd"]
    assert paired_difference(same, "TS") == {"diff": 1.0, "ci_low": 1.0, "ci_high": 1.0}
    # ratio metrics pair the sums: Step-SR = sum matched / sum scorable
    r = paired_difference([("a", {"matched": 1, "n_scorable": 1}, {"matched": 0, "n_scorable": 1}),
                           ("b", {"matched": 0, "n_scorable": 3}, {"matched": 0, "n_scorable": 3})], "Step-SR")
    assert r["diff"] == pytest.approx(0.25)


# ------------------------------------------------------------------------------------------ the study report
# TS per (seed, task): HPD solves 4 tasks SFT fails (t1 at seeds 0 and 2, t2 at seed 1, t3 at seed 2), and
# nothing the other way; HPD-T equals SFT.
SFT = {0: {"t1": 0, "t2": 1, "t3": 0, "t4": 0}, 1: {"t1": 1, "t2": 0, "t3": 0, "t4": 1},
       2: {"t1": 0, "t2": 0, "t3": 0, "t4": 1}}
HPD = {0: {"t1": 1, "t2": 1, "t3": 0, "t4": 0}, 1: {"t1": 1, "t2": 1, "t3": 0, "t4": 1},
       2: {"t1": 1, "t2": 0, "t3": 1, "t4": 1}}


@pytest.fixture
def fake_study(tmp_path):
    reg = tmp_path / "results"
    for s in (0, 1, 2):
        _register(reg, "st", f"main/defects-0.12/seed-{s}/SFT", tmp_path, SFT[s])
        _register(reg, "st", f"main/defects-0.12/seed-{s}/HPD-T", tmp_path, SFT[s])
        _register(reg, "st", f"main/defects-0.12/seed-{s}/HPD", tmp_path, HPD[s])
        _register(reg, "st", f"oracle-teacher/defects-0.12/seed-{s}/HPD", tmp_path, {"t1": 1, "t2": 1, "t3": 1,
                                                                                     "t4": 1}, "upper bound")
    for rate in ("0.00", "0.25"):
        _register(reg, "st", f"main/defects-{rate}/seed-0/SFT", tmp_path, {"t1": 0, "t2": 0})
        _register(reg, "st", f"main/defects-{rate}/seed-0/HPD", tmp_path, {"t1": 1, "t2": 0})
    return reg / "st"


def test_study_report_mean_std_paired_differences_and_mcnemar(fake_study, tmp_path):
    doc = study_report(fake_study)
    sft = next(r for r in doc["summary"] if (r["arm"], r["defect_rate"], r["variant"]) == ("main", 0.12, "SFT"))
    # SFT's TS per seed: 1/4, 2/4, 1/4 -> mean 1/3, sample std sqrt(((1/12)^2 + (1/6)^2 + (1/12)^2) / 2)
    assert sft["seeds"] == [0, 1, 2]
    assert sft["metrics"]["TS"]["mean"] == pytest.approx(1 / 3)
    assert sft["metrics"]["TS"]["std"] == pytest.approx(math.sqrt(1 / 48))
    comp = {(c["name"], c["defect_rate"]): c for c in doc["comparisons"]}
    hpd = comp[("HPD − SFT", 0.12)]
    assert hpd["n_pairs"] == 12 and hpd["n_tasks"] == 4 and hpd["pairs_per_seed"] == {"0": 4, "1": 4, "2": 4}
    assert hpd["mcnemar_TS"] == {"b": 4, "c": 0, "n_discordant": 4, "p": pytest.approx(0.125)}
    # 4 of 12 pairs gain TS: +1/3. Bootstrap over the 4 tasks (3 pairs each, summed gains 2, 1, 1, 0): a resample's
    # difference is S/12 with S the sum of 4 draws; P(S=0) = 1/256 < 2.5 % < P(S<=1) = 9/256 and symmetrically at
    # the top (S=8, S=7), so the 95 % interval is [1/12, 7/12].
    ts = hpd["metrics"]["TS"]
    assert ts["diff"] == pytest.approx(1 / 3)
    assert ts["ci_low"] == pytest.approx(1 / 12) and ts["ci_high"] == pytest.approx(7 / 12)
    assert hpd["metrics"]["RC"] == {"diff": 0.0, "ci_low": 0.0, "ci_high": 0.0}     # one valid turn everywhere
    hpdt = comp[("HPD-T − SFT", 0.12)]
    assert hpdt["metrics"]["TS"] == {"diff": 0.0, "ci_low": 0.0, "ci_high": 0.0}
    assert hpdt["mcnemar_TS"]["p"] == 1.0
    # the oracle arm has no SFT: compared with main's SFT of the same seeds; 8 of 12 gains, b = 8 -> p = 2 / 2^8
    oracle = comp[("HPD [oracle-teacher] − SFT [main]", 0.12)]
    assert oracle["label"] == "upper bound" and oracle["metrics"]["TS"]["diff"] == pytest.approx(8 / 12)
    assert oracle["mcnemar_TS"]["p"] == pytest.approx(2 / 256)
    assert [c["defect_rate"] for c in doc["comparisons"] if c["name"] == "HPD − SFT"] == [0.0, 0.12, 0.25]
    # within the arm, HPD against HPD-T (the same targets without the document views); HPD-T equals SFT here, so the
    # difference is HPD − SFT's. Only where an arm and seed hold both: not the oracle arm, not the sweep's rates
    within = comp[("HPD − HPD-T", 0.12)]
    assert within["reference"] == "HPD-T" and within["n_pairs"] == 12
    assert within["metrics"]["TS"] == hpd["metrics"]["TS"] and within["mcnemar_TS"] == hpd["mcnemar_TS"]
    assert [c["defect_rate"] for c in doc["comparisons"] if c["reference"] == "HPD-T"] == [0.12]
    # the same seed gives the same intervals
    assert study_report(fake_study)["comparisons"] == doc["comparisons"]


def test_a_bfcl_cell_of_a_compared_variant_is_a_bfcl_row_not_a_comparison(fake_study, tmp_path):
    """BFCL's HPD cell (an arm without SFT, as the oracle arm) is not paired with main's SFT: its rows are BFCL
    entries without task uids (this crashed `hpd report --study results/issue35` once BFCL's HPD registered)."""
    before = study_report(fake_study)["comparisons"]
    bfcl = tmp_path / "bfcl-run"
    write_json(bfcl / "metrics.json", {"aggregates": {"overall": 0.015, "non_live": 0.075}, "n_entries": 2})
    write_jsonl(bfcl / "tasks.jsonl", [{"id": "simple_python_1", "category": "simple_python", "valid": True}])
    write_cell(fake_study.parent, "st", "bfcl/defects-0.12/seed-0/HPD", bfcl, config={"kind": "bfcl"},
               command="hpd bfcl ...", seed=0)
    doc = study_report(fake_study)
    assert doc["comparisons"] == before
    assert [(r["cell"], r["overall"]) for r in doc["bfcl"]] == [("bfcl/defects-0.12/seed-0/HPD", 0.015)]


def test_a_comparison_within_an_arm_other_than_main_names_its_arm(fake_study, tmp_path):
    """Figure 4 compares HPD with SFT in each harness's arm: the rows must say which arm (they read "HPD − SFT"
    twice until 2026-12-06)."""
    _register(tmp_path / "results", "st", "smolagents/defects-0.12/seed-0/SFT", tmp_path, SFT[0])
    _register(tmp_path / "results", "st", "smolagents/defects-0.12/seed-0/HPD", tmp_path, HPD[0])
    names = [c["name"] for c in study_report(fake_study)["comparisons"]]
    assert names.count("HPD − SFT") == 3   # main's, at 0 %, 12 % and 25 %
    assert names.count("HPD [smolagents] − SFT [smolagents]") == 1


def test_a_comparison_of_cells_computed_in_different_dtypes_says_so(tmp_path):
    """auto resolves per machine (bf16 with AVX512-BF16, fp32 without): the report and the README block name a
    comparison whose sides computed in different dtypes; one of a single dtype gets no such line."""
    from hpd.report.headline import headline
    from hpd.report.studystats import markdown

    reg = tmp_path / "results"
    _register(reg, "st", "main/defects-0.12/seed-0/SFT", tmp_path, {"t1": 1, "t2": 0}, dtype="bfloat16")
    _register(reg, "st", "main/defects-0.12/seed-0/HPD", tmp_path, {"t1": 1, "t2": 1}, dtype="bfloat16")
    _register(reg, "st", "oracle-teacher/defects-0.12/seed-0/HPD", tmp_path, {"t1": 0, "t2": 1})
    doc = study_report(reg / "st")
    comp = {c["name"]: c for c in doc["comparisons"]}
    assert comp["HPD − SFT"]["dtypes"] == {"HPD": ["bfloat16"], "SFT": ["bfloat16"]}
    assert comp["HPD [oracle-teacher] − SFT [main]"]["dtypes"] == {"HPD": ["float32"], "SFT": ["bfloat16"]}
    line = ("Mixed precision: HPD [oracle-teacher] − SFT [main] compares cells computed in different dtypes "
            "(HPD in float32; SFT in bfloat16).")
    for text in (markdown(doc), headline(reg / "st")):
        assert line in text and text.count("Mixed precision") == 1


def test_write_study_report_files_and_cli(fake_study, tmp_path):
    from typer.testing import CliRunner

    from hpd.cli import app

    out = tmp_path / "rep"
    r = CliRunner().invoke(app, ["report", "--study", str(fake_study), "--out", str(out), "--resamples", "2000"])
    assert r.exit_code == 0, r.output
    assert "| HPD − SFT | 12% | 3 | 12 |" in r.output and "| 4/0 | 0.125 |" in r.output
    doc = json.loads((out / "study_report.json").read_text())
    assert list(doc) == ["study", "registry", "metric_keys", "paired_metrics", "bootstrap", "cells", "main_rate",
                         "summary", "comparisons", "bfcl", "harnesses", "behaviour", "teacher", "plots"]
    assert doc["bootstrap"]["resamples"] == 2000 and doc["main_rate"] == 0.12
    assert doc["plots"] == {"main_table": "plots/main_table.png", "sweep": "plots/sweep.png"}
    for p in doc["plots"].values():
        assert (out / p).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert (out / "study_report.md").read_text().startswith("# Study st")
    r = CliRunner().invoke(app, ["report", "--study", str(tmp_path / "nothing"), "--out", str(out)])
    assert r.exit_code == 2 and "holds no registry cells" in r.output


# ------------------------------------------------------------------------------------------ spec and status
TINY_SPEC = """\
study: tiny
flags: {model: tiny, n-per-domain: 10, updates: 2, global-batch: 2, test-limit: 2, train-limit: 4,
        max-new-tokens: 8, probe-examples: 0}
groups:
  - name: table
    arm: main
    flags: {teacher: oracle}
    defect_rates: [0.12]
    seeds: [0, 1]
    variants: [Base, SFT, HPD]
  - name: bound
    arm: oracle
    label: upper bound
    flags: {teacher: oracle, teach-attempts: 2}
    seeds: [0]
    variants: [HPD]
"""


def test_every_shipped_study_spec_loads():
    from hpd.report.studyplan import load_spec

    specs = sorted((REPO / "configs" / "studies").glob("*.yaml"))
    assert {p.stem for p in specs} >= {"issue35", "figure4", "tview-budget"}
    for p in specs:
        spec = load_spec(p)
        assert spec.cells() and spec.study == p.stem, p


def test_dpo_start_spec_runs_sft_and_dpo_from_it():
    """The DPO-from-SFT diagnostic: one cell folder trains SFT, evaluates it, and starts DPO from its adapter."""
    from hpd.report.studyplan import demo_args, load_spec
    from hpd.study import spec_config

    spec = load_spec(REPO / "configs" / "studies" / "dpo-start.yaml")
    assert [c.id for c in spec.cells()] == ["dpo-sft/defects-0.12/seed-0/SFT", "dpo-sft/defects-0.12/seed-0/DPO"]
    cfg = spec_config(spec, "dpo-sft", 0.12, 0, Path("/r"))
    assert (cfg.dpo_start, cfg.teacher, cfg.updates, cfg.lr) == ("sft", "auto", 80, 0.002)
    args = demo_args(spec, "dpo-sft", [0.12], [0], ["SFT", "DPO"], Path("/r"), Path("results"))
    assert args[args.index("--variants") + 1] == "SFT,DPO" and "--baselines" in args
    assert args[args.index("--dpo-start") + 1] == "sft"
    stage = REPO / "results" / "dpo-start" / "stages" / "dpo-sft" / "defects-0.12" / "seed-0" / "teach.tar.gz"
    assert stage.resolve() == (REPO / "results/issue35/stages/main/defects-0.12/seed-0/teach.tar.gz").resolve()
    assert stage.is_file()


def test_issue35_spec_declares_the_study():
    from hpd.demo import BASELINE_VARIANTS, VARIANTS
    from hpd.report.studyplan import BASELINES, VARIANTS as PLAN_VARIANTS, demo_args, load_spec
    from hpd.study import spec_config

    assert PLAN_VARIANTS == VARIANTS and BASELINES == BASELINE_VARIANTS
    spec = load_spec(REPO / "configs" / "studies" / "issue35.yaml")
    cells = [c.id for c in spec.cells()]
    assert len(cells) == 12 + 3 + 8 + 4 + 3
    assert {f"main/defects-0.12/seed-{s}/{v}" for s in (0, 1, 2) for v in VARIANTS} <= set(cells)
    assert {f"oracle-teacher/defects-0.12/seed-{s}/HPD" for s in (0, 1, 2)} <= set(cells)
    assert {f"main/defects-{r}/seed-0/{v}" for r in ("0.00", "0.25") for v in VARIANTS} <= set(cells)
    assert {f"main/defects-0.12/seed-0/{v}" for v in BASELINE_VARIANTS} <= set(cells)
    assert {f"bfcl/defects-0.12/seed-0/{v}" for v in ("Base", "SFT", "HPD")} <= set(cells)
    cfg = spec_config(spec, "main", 0.12, 1, Path("/r"))
    assert (cfg.model, cfg.updates, cfg.global_batch, cfg.test_limit, cfg.n_per_domain, cfg.teacher, cfg.seed,
            cfg.out) == ("smollm2", 80, 8, 48, 36, "auto", 1, Path("/r/main"))
    assert getattr(cfg, "dtype", "auto") == "auto"
    assert spec_config(spec, "oracle-teacher", 0.12, 0, Path("/r")).teacher == "oracle"
    args = demo_args(spec, "main", [0.12], [0], ["DPO"], Path("/r"), Path("results"))
    assert args[:10] == ["hpd", "demo", "--out", "/r/main", "--seed", "0", "--defect-rate", "0.12", "--variants",
                         "Base,SFT,HPD-T,HPD,DPO"]          # the demo then trains DPO alone of the four baselines
    assert "--baselines" in args and args[-6:] == ["--registry", "results", "--study", "issue35", "--arm", "main"]
    bfcl = spec.group("bfcl-transfer")
    assert len(bfcl.bfcl["categories"]) * bfcl.bfcl["sample"] == 100


def test_builtin_benchmark_offers_48_clean_held_out_tasks(tmp_path):
    """The spec's --n-per-domain 36 (the default 30 gives 39 held-out tasks): 52 held-out tasks, none defective,
    and --test-limit 48 spreads over both kinds and every domain, the same tasks at every defect rate."""
    from collections import Counter

    from hpd.bench.builtin import generate
    from hpd.bench.loader import load_bench
    from hpd.bench.split import make_split, select
    from hpd.demo import held_out

    picked = {}
    for rate in (0.0, 0.25):
        bench = load_bench(generate(tmp_path / f"d{rate}", seed=0, n_per_domain=36, defect_rate=rate))
        test = select(bench.tasks, make_split(bench.tasks, seed=0), "test")
        assert len(test) == 52
        assert not any(s.defect for t in test for s in t.steps) and not any(t.final_after for t in test)
        picked[rate] = held_out(test, 48)
    assert [t.uid for t in picked[0.0]] == [t.uid for t in picked[0.25]]
    assert Counter(t.kind for t in picked[0.0]) == {"parallel": 28, "sequential": 20}
    assert set(t.domain for t in picked[0.0]) == {"Math", "Shop", "Travel", "Weather"}


def test_spec_errors_are_one_line(tmp_path):
    from hpd.report.studyplan import SpecError, load_spec

    bad = tmp_path / "s.yaml"
    bad.write_text("study: x\ngroups:\n  - {name: a, arm: m, flags: {lr_rate: 1}, variants: [HPD]}\n")
    with pytest.raises(SpecError, match="lr_rate not hpd demo flags"):
        load_spec(bad)
    bad.write_text("study: x\ngroups:\n  - {name: a, arm: m, variants: [HPD]}\n"
                   "  - {name: b, arm: m, flags: {teacher: oracle}, variants: [SFT]}\n")
    with pytest.raises(SpecError, match="share arm 'm' but not its flags"):
        load_spec(bad)


def test_status_done_resumable_missing_with_commands(tmp_path):
    from typer.testing import CliRunner

    from hpd.cli import app
    from hpd.report.studyplan import load_spec
    from hpd.study import spec_hash

    f = tmp_path / "tiny.yaml"
    f.write_text(TINY_SPEC)
    spec = load_spec(f)
    root, reg = tmp_path / "runs", tmp_path / "results"
    cells = {c.id: c for c in spec.cells()}
    assert list(cells) == ["main/defects-0.12/seed-0/Base", "main/defects-0.12/seed-0/SFT",
                           "main/defects-0.12/seed-0/HPD", "main/defects-0.12/seed-1/Base",
                           "main/defects-0.12/seed-1/SFT", "main/defects-0.12/seed-1/HPD",
                           "oracle/defects-0.12/seed-0/HPD"]
    from hpd.demo import registry_config
    from hpd.study import spec_config

    ev = _eval_folder(tmp_path / "ev", {"t1": 1})
    done = cells["main/defects-0.12/seed-0/SFT"]
    write_cell(reg, "tiny", done.id, ev, command="the command that made it",
               config=registry_config(spec_config(spec, "main", 0.12, 0, root), "SFT"))
    assert read_cell(reg / "tiny" / done.id)["manifest"]["config_hash"] == spec_hash(spec, done, root)
    other = cells["main/defects-0.12/seed-0/HPD"]
    Registry(reg, "tiny", "main").write(other.id, ev, config={"not": "the spec's"}, command="x")
    # a started run folder: HPD of seed 1 has a checkpoint, seed 1's Base evaluation has rows
    (root / "main" / "defects-0.12" / "seed-1" / "train" / "hpd" / "checkpoints" / "update-00000001").mkdir(parents=True)
    write_jsonl(root / "main" / "eval" / "base" / "shards" / "part-00000.jsonl", [{"uid": "a"}, {"uid": "b"}])
    r = CliRunner().invoke(app, ["study", "status", str(root), "--spec", str(f), "--registry", str(reg),
                                 "--out", str(tmp_path / "st")])
    assert r.exit_code == 0, r.output
    st = json.loads((tmp_path / "st" / "status.json").read_text())
    state = {c["cell"]: c for c in st["cells"]}
    assert st["counts"] == {"done": 1, "resumable": 3, "missing": 3}
    assert state[done.id]["state"] == "done" and state[done.id]["command"] == "the command that made it"
    assert state["main/defects-0.12/seed-1/HPD"]["state"] == "resumable"
    assert "train at checkpoint update-00000001" in state["main/defects-0.12/seed-1/HPD"]["detail"]
    assert state[other.id]["state"] == "missing" and "holds another config" in state[other.id]["detail"]
    assert state["main/defects-0.12/seed-1/SFT"]["state"] == "missing"
    assert state["main/defects-0.12/seed-1/SFT"]["detail"] == (
        "not started; its seed folder (shared with the other variants) holds train")
    assert state["main/defects-0.12/seed-0/Base"]["state"] == "resumable"       # the shared Base evaluation
    assert "eval 2 rows" in state["main/defects-0.12/seed-0/Base"]["detail"]
    assert state["oracle/defects-0.12/seed-0/HPD"]["state"] == "missing"
    assert state["oracle/defects-0.12/seed-0/HPD"]["command"] == (
        f"hpd study run {f} --root {root} --registry {reg} --cells oracle/defects-0.12/seed-0/HPD")
    assert state["oracle/defects-0.12/seed-0/HPD"]["group_command"] == (
        f"hpd demo --out {root}/oracle --seed 0 --defect-rate 0.12 --variants HPD --model tiny --n-per-domain 10 "
        "--updates 2 --global-batch 2 --test-limit 2 --train-limit 4 --max-new-tokens 8 --probe-examples 0 "
        f"--teacher oracle --teach-attempts 2 --registry {reg} --study tiny --arm oracle")
    assert "missing   oracle/defects-0.12/seed-0/HPD" in r.output


# ------------------------------------------------------------------------------------------ never run twice
DEMO_ARGS = ["demo", "--model", "tiny", "--n-per-domain", "10", "--updates", "2", "--global-batch", "2",
             "--test-limit", "2", "--train-limit", "4", "--max-new-tokens", "8", "--teacher", "oracle",
             "--variants", "Base,SFT,HPD", "--probe-examples", "0"]


def test_a_registered_cell_is_not_run_again(tmp_path):
    """A tiny demo with --registry writes each variant as it finishes; the same command into a fresh run folder
    (a wiped work tree) trains and evaluates nothing and reports the registry's metrics."""
    from typer.testing import CliRunner

    from hpd.cli import app

    reg = tmp_path / "results"
    args = [*DEMO_ARGS, "--registry", str(reg), "--study", "t"]
    r = CliRunner().invoke(app, [*args, "--out", str(tmp_path / "a")])
    assert r.exit_code == 0, r.output
    cells = list_cells(reg / "t")
    assert list(cells) == [f"main/defects-0.12/seed-0/{v}" for v in ("Base", "HPD", "SFT")]
    first = json.loads((tmp_path / "a" / "study.json").read_text())["cells"][0]
    assert first["folder"] == "defects-0.12/seed-0"                 # a registry study nests even one cell
    man = read_cell(cells["main/defects-0.12/seed-0/HPD"])["manifest"]
    assert man["command"].startswith("hpd ") and man["config"]["variant"] == "HPD"
    assert set(man["timings"]) >= {"train HPD", "eval HPD"} and man["wall_s"] > 0
    assert read_tasks(cells["main/defects-0.12/seed-0/HPD"])[0]["uid"]
    # the HPD cell keeps what its teacher did (the run's results.json has the same), SFT's and Base's do not
    teacher = read_teacher(cells["main/defects-0.12/seed-0/HPD"])
    run_doc = json.loads((tmp_path / "a" / "defects-0.12" / "seed-0" / "results.json").read_text())
    assert teacher == {k: run_doc[k] for k in ("teacher", "teacher_choice", "defects")}
    assert teacher["teacher"]["n_boundaries"] > 0 and "n_defective" in teacher["defects"]
    assert read_teacher(cells["main/defects-0.12/seed-0/SFT"]) is None
    r = CliRunner().invoke(app, [*args, "--out", str(tmp_path / "b")])
    assert r.exit_code == 0, r.output
    assert r.output.count("not run again") == 3 and "nothing to train or evaluate" in r.output
    cell_b = tmp_path / "b" / "defects-0.12" / "seed-0"
    assert not (cell_b / "train").exists() and not (cell_b / "eval").exists()
    assert not (tmp_path / "b" / "base").exists()
    again = json.loads((tmp_path / "b" / "study.json").read_text())["cells"][0]
    assert again["variants"] == {v: {k: first["variants"][v][k] for k in again["variants"][v]}
                                 for v in first["variants"]}
    # another config (more updates) under the same study and arm is refused before anything runs
    other = [a if a != "2" or i != args.index("--updates") + 1 else "3" for i, a in enumerate(args)]
    r = CliRunner().invoke(app, [*other, "--out", str(tmp_path / "c")])
    assert r.exit_code == 2 and "holds another config" in r.output
    r = CliRunner().invoke(app, [*DEMO_ARGS, "--registry", str(reg), "--out", str(tmp_path / "d")])
    assert r.exit_code == 2 and "--registry DIR and --study NAME go together" in r.output


def test_study_run_runs_a_missing_cell_into_the_registry(tmp_path):
    """`hpd study run --cells`: the oracle arm's HPD cell, run in-process and registered with the spec's config hash
    and its hpd demo command; status then says done, and a second run has nothing to do."""
    from typer.testing import CliRunner

    from hpd.cli import app

    f = tmp_path / "tiny.yaml"
    f.write_text(TINY_SPEC)
    base = ["--root", str(tmp_path / "runs"), "--registry", str(tmp_path / "results")]
    cell = "oracle/defects-0.12/seed-0/HPD"
    r = CliRunner().invoke(app, ["study", "run", str(f), *base, "--cells", cell])
    assert r.exit_code == 0, r.output
    assert f"ran 1 cell(s): {cell}" in r.output
    man = read_cell(tmp_path / "results" / "tiny" / cell)["manifest"]
    assert man["label"] == "upper bound" and man["command"].startswith(f"hpd demo --out {tmp_path}/runs/oracle ")
    assert not (tmp_path / "runs" / "oracle" / "defects-0.12" / "seed-0" / "train" / "sft").exists()   # not needed
    r = CliRunner().invoke(app, ["study", "status", str(tmp_path / "runs"), "--spec", str(f), "--registry",
                                 str(tmp_path / "results"), "--study", "tiny"])
    assert f"done      {cell}" in r.output
    r = CliRunner().invoke(app, ["study", "status", str(tmp_path / "runs"), "--spec", str(f), "--study", "other"])
    assert r.exit_code == 2 and "is the spec of study 'tiny', not 'other'" in r.output
    r = CliRunner().invoke(app, ["study", "status", str(tmp_path / "runs")])
    assert r.exit_code == 2 and "give --study NAME" in r.output
    r = CliRunner().invoke(app, ["study", "run", str(f), *base, "--cells", cell])
    assert r.exit_code == 0 and "ran 0 cell(s) (every asked cell is done)" in r.output
    r = CliRunner().invoke(app, ["study", "run", str(f), *base, "--cells", "main/defects-0.50/seed-0/HPD"])
    assert r.exit_code == 2 and "not cells of" in r.output


def test_study_run_turns_a_kill_into_a_resumable_stop(tmp_path, monkeypatch):
    """`hpd study run` takes SIGTERM as Ctrl-C (as `hpd demo` does): the running cell unwinds, so its vLLM engine
    stops (``Demo.run``'s ``finally``), and the command says how to resume, exit code 130. Before, a SIGTERM (the
    study runner's stop after the teach stage) ended the process at once and left the teacher's engine running,
    4.4 GB, under the next trainer."""
    import os
    import signal
    import time

    from typer.testing import CliRunner

    from hpd import study
    from hpd.cli import app

    def killed(*args, **kwargs):
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(30)
        raise AssertionError("SIGTERM did not interrupt the run")

    f = tmp_path / "tiny.yaml"
    f.write_text(TINY_SPEC)
    monkeypatch.setattr(study, "run_spec", killed)
    before = signal.getsignal(signal.SIGTERM)
    try:
        r = CliRunner().invoke(app, ["study", "run", str(f), "--root", str(tmp_path / "runs"), "--registry",
                                     str(tmp_path / "results")])
    finally:
        signal.signal(signal.SIGTERM, before)
    assert r.exit_code == 130, r.output
    assert f"interrupted; rerun the same command to resume from {tmp_path / 'runs'}" in r.output


def test_study_run_reports_a_failed_cell_in_one_line(tmp_path, monkeypatch):
    """A cell that fails (here the EvalError of an evaluation folder left by another config, as GSPO's was on
    2026-12-07) ends `hpd study run` with one line naming the error and where the finished stages are, no traceback."""
    from typer.testing import CliRunner

    from hpd import study
    from hpd.cli import app
    from hpd.eval.variant import EvalError

    def fails(*args, **kwargs):
        raise EvalError("runs/x/eval/gspo holds an evaluation with a different config_hash")

    f = tmp_path / "tiny.yaml"
    f.write_text(TINY_SPEC)
    monkeypatch.setattr(study, "run_spec", fails)
    r = CliRunner().invoke(app, ["study", "run", str(f), "--root", str(tmp_path / "runs"), "--registry",
                                 str(tmp_path / "results")])
    assert r.exit_code == 1 and "Traceback" not in r.output, r.output
    assert "error: EvalError: runs/x/eval/gspo holds an evaluation with a different config_hash" in r.output
    assert f"finished stages are kept in {tmp_path / 'runs'}" in r.output
