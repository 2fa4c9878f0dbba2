"""``hpd data stats --tokenizer``: real token lengths of the T/I/R rows (:mod:`hpd.views.token_lengths`).

Everything runs on the built-in benchmark (a TRAJECT-layout folder generated here) with two small
Qwen3-style tokenizers trained here (the recipe of :func:`hpd.policy.tiny.train_tokenizer`):

* ``tiny``: as the tiny model has it (its ``<tool_call>``-style added tokens are normalised), so the
  counter encodes every text whole;
* ``qwen3like``: the same with the added tokens NOT normalised, as in Qwen3's own ``tokenizer.json``,
  so the counter takes its fast path (cut on added tokens and after newlines, cached pieces).

The reported figures are checked against lengths computed here directly with ``Renderer.encode``.
"""

from __future__ import annotations

import json
import math
import random
import re
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from hpd.bench.builtin import generate
from hpd.bench.loader import load_bench
from hpd.boundary import ReplayConfig, replay_task, select_tasks
from hpd.cli import app
from hpd.policy.tiny import bpe_tokenizer
from hpd.views import Renderer
from hpd.train.config import config_max_lengths
from hpd.views.token_lengths import (
    TokenCounter,
    TokenizerError,
    load_tokenizer_dir,
    measure,
    percentile,
)

REPO = Path(__file__).resolve().parents[2]
N_TASKS = 10
VIEWS = ("T", "I", "R")


@pytest.fixture(scope="module")
def bench_dir(tmp_path_factory) -> Path:
    return generate(tmp_path_factory.mktemp("builtin") / "data", seed=0, n_per_domain=2)


@pytest.fixture(scope="module")
def bench(bench_dir):
    return load_bench(bench_dir)


@pytest.fixture(scope="module")
def tok_dirs(tmp_path_factory, bench_dir, bench) -> dict[str, Path]:
    texts = [t.query for t in bench.tasks]
    for f in sorted((bench_dir / "tools").glob("*.json")):
        texts += [json.dumps(e) for e in json.loads(f.read_text())]
    root = tmp_path_factory.mktemp("tok")
    out = {}
    for name, normalized in (("tiny", True), ("qwen3like", False)):
        bpe_tokenizer(texts, 700, normalized_added=normalized).save_pretrained(str(root / name))
        out[name] = root / name
    return out


def _direct(bench, tok, tasks) -> dict[str, list[tuple[int, int]]]:
    """(prompt, completion) lengths per view, straight from Renderer.encode on the plain renderer."""
    r = Renderer(tok)
    cfg = ReplayConfig(privileges=("plan",))
    out: dict[str, list[tuple[int, int]]] = {v: [] for v in VIEWS}
    for t in tasks:
        for b in replay_task(t, bench, cfg):
            doc = b.document_text("plan")
            act = r.action(b.reference)
            rows = {"T": (r.prompt(b.context), act), "I": (r.prompt(b.context, document=doc), act),
                    "R": (r.prompt(r.r_context(b.context)), r.text_completion(doc))}
            for v, (p, c) in rows.items():
                pi, ci = r.encode(p, c)
                out[v].append((len(pi), len(ci)))
    return out


def _nearest_rank(values, q):
    s = sorted(values)
    return s[max(1, math.ceil(q / 100 * len(s))) - 1]


def test_counter_modes(tok_dirs):
    assert TokenCounter(load_tokenizer_dir(tok_dirs["tiny"])).mode == "whole"
    q3 = load_tokenizer_dir(tok_dirs["qwen3like"])
    assert TokenCounter(q3).mode == "lines"
    assert TokenCounter(q3, exact=True).mode == "whole"


def test_line_cut_counts_equal_whole_encoding(tok_dirs):
    """The fast path's cut points never change the count (pre-token edge cases, added tokens, NFC)."""
    tok = load_tokenizer_dir(tok_dirs["qwen3like"])
    c = TokenCounter(tok)
    assert c.mode == "lines"
    fixed = [
        "a.\n\n# Tools", "end>\n\n\n# x", "x  \n  y", "word\nnext", "12\n34", "tab\t\n\tz", "\n\nlead", "trail\n\n",
        "crlf\r\nline", "<tool_call>\n{\"a\": 1}\n</tool_call>", "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n",
        "u\u0308ber\n\u0301accent", "e\u0301\nE\u0301", "'s\n's", "  \n\n  \n", "}\n{", "<think>\n\n</think>\n\n",
        "a<tool_response>\nb\n</tool_response>c", ">\u0338\n<\u0338",
    ]
    alphabet = list("ab Z9.,:{}\"'<>/#-_\n\n\n\t\r ") + ["\u0301", "\u00e9", "\u00df", "<tool_call>", "</tool_call>",
                                                      "<|im_end|>", "<think>", "\u4e2d"]
    rng = random.Random(0)
    rand = ["".join(rng.choice(alphabet) for _ in range(rng.randint(1, 60))) for _ in range(400)]
    for s in fixed + rand:
        whole = len(tok(s, add_special_tokens=False)["input_ids"])
        assert c.count(s) == whole, repr(s)
        assert c.count(s) == whole, repr(s)   # again, from the cache


@pytest.mark.parametrize("name", ["tiny", "qwen3like"])
def test_figures_match_renderer_encode(bench, tok_dirs, name):
    tok = load_tokenizer_dir(tok_dirs[name])
    tasks = select_tasks(bench, sample=N_TASKS, seed=3)
    direct = _direct(bench, tok, tasks)
    totals = {v: [p + c for p, c in direct[v]] for v in VIEWS}
    pooled = sorted(x for v in VIEWS for x in totals[v])
    m_low, m_high = pooled[len(pooled) // 3], pooled[-1]
    rep = measure(bench, tok, sample=N_TASKS, seed=3, max_lengths={m_low: ["a.yaml"], m_high: ["b.yaml"]},
                  verify_every=0)   # no self-check: this test is the check
    n_b = len(direct["T"])
    assert rep["n_tasks"] == N_TASKS and rep["n_boundaries"] == n_b == sum(t.n_boundaries for t in tasks)
    assert rep["pool_k"] == 20 and rep["privilege"] == "plan"
    for v in VIEWS:
        prompts = [p for p, _ in direct[v]]
        targets = [c for _, c in direct[v]]
        assert rep[v]["n_rows"] == n_b
        for part, vals in (("prompt", prompts), ("target", targets), ("total", totals[v])):
            got = rep[v][part]
            assert got["max"] == max(vals), (v, part)
            assert got["p50"] == _nearest_rank(vals, 50) == percentile(vals, 50), (v, part)
            assert got["p95"] == _nearest_rank(vals, 95), (v, part)
            assert got["mean"] == round(sum(vals) / len(vals), 1), (v, part)
        assert rep[v]["fits"][str(m_high)] == 1.0
        assert rep[v]["fits"][str(m_low)] == round(sum(t <= m_low for t in totals[v]) / n_b, 6)
    share_low = sum(t <= m_low for t in pooled) / len(pooled)
    assert 0 < share_low < 1
    assert rep["fits"] == {str(m_low): round(share_low, 6), str(m_high): 1.0}
    # the I prompt adds the document to the T prompt; R's target is the document itself
    assert all(i > t for (t, _), (i, _) in zip(direct["T"], direct["I"]))
    assert rep["I"]["target"] == rep["T"]["target"]


def test_self_check_passes_and_exact_mode_agrees(bench, tok_dirs):
    tok = load_tokenizer_dir(tok_dirs["qwen3like"])
    rep = measure(bench, tok, sample=3, seed=0, max_lengths=[4096], verify_every=1)
    assert rep["count_method"] == "lines"
    assert rep["rows_verified"] == 3 * rep["n_boundaries"] > 0
    exact = measure(bench, tok, sample=3, seed=0, max_lengths=[4096], verify_every=0, exact=True)
    assert exact["count_method"] == "whole"
    assert {v: exact[v] for v in VIEWS} == {v: rep[v] for v in VIEWS}


def test_gpu_configs_quote_the_figures_they_are_set_from():
    """Every GPU config explains its data.max_length with the measured p99 and the command, and covers that p99."""
    files = sorted((REPO / "configs").glob("qwen3-*.yaml")) + sorted((REPO / "configs" / "ablations").glob("*.yaml"))
    assert files
    for f in files:
        text = f.read_text()
        cfg = yaml.safe_load(text)
        m = re.search(r"p99 ([\d,]+)", text)
        assert m and "hpd data stats --tokenizer" in text, f
        p99 = int(m.group(1).replace(",", ""))
        assert p99 <= cfg["data"]["max_length"] <= cfg["batch"]["micro_batch_tokens"], f


def test_config_max_lengths_reads_the_shipped_configs():
    got = config_max_lengths(REPO / "configs")
    files = sorted((REPO / "configs").glob("*.yaml")) + sorted((REPO / "configs" / "ablations").glob("*.yaml"))
    want: dict[int, set[str]] = {}
    for f in files:
        m = (yaml.safe_load(f.read_text()).get("data") or {}).get("max_length")
        assert isinstance(m, int), f
        want.setdefault(m, set()).add(f.relative_to(REPO).as_posix())
    assert {k: set(v) for k, v in got.items()} == want
    assert any("configs/ablations/" in f for fs in got.values() for f in fs)


def test_cli_writes_json_and_manifest(bench_dir, tok_dirs, tmp_path):
    cfgs = tmp_path / "configs"
    (cfgs / "ablations").mkdir(parents=True)
    real = yaml.safe_load((REPO / "configs" / "qwen3-0.6b.yaml").read_text())
    real["data"]["max_length"] = 3000
    (cfgs / "a.yaml").write_text(yaml.safe_dump(real))
    (cfgs / "b.yaml").write_text(yaml.safe_dump(real))                       # same value: counted once
    (cfgs / "ablations" / "c.yaml").write_text(yaml.safe_dump({"data": {"max_length": 100000}}))  # raw fallback
    out = tmp_path / "out"
    r = CliRunner().invoke(app, ["data", "stats", "--data", str(bench_dir), "--tokenizer", str(tok_dirs["qwen3like"]),
                                 "--sample", "4", "--seed", "1", "--configs", str(cfgs), "--out", str(out), "--quiet",
                                 "--max-length", "3000", "--max-length", "1"])
    assert r.exit_code == 0, r.output
    assert "token lengths in" in r.output and "tool pool 20, document privilege plan" in r.output
    rep = json.loads((out / "token_lengths.json").read_text())
    for v in VIEWS:
        assert set(rep[v]) >= {"prompt", "target", "total", "n_rows", "fits"}
        for part in ("prompt", "target", "total"):
            assert set(rep[v][part]) >= {"p50", "p95", "max", "mean"}
            assert rep[v][part]["p50"] <= rep[v][part]["p95"] <= rep[v][part]["max"]
        assert rep[v]["n_rows"] == rep["n_boundaries"] > 0
    assert set(rep["fits"]) == {"1", "3000", "100000"} and rep["fits"]["100000"] == 1.0 and rep["fits"]["1"] == 0.0
    assert rep["max_lengths"] == {"1": [], "3000": ["configs/a.yaml", "configs/b.yaml"],
                                  "100000": ["configs/ablations/c.yaml"]}
    assert "[no shipped config]" in r.output
    assert rep["n_tasks"] == 4 and rep["pool_k"] == 20 and rep["privilege"] == "plan"
    assert rep["tokenizer"]["path"] == str(tok_dirs["qwen3like"].resolve())
    man = json.loads((out / "manifest.json").read_text())
    assert man["command"] == "hpd data stats" and man["config"]["sample"] == 4 and man["seed"] == 1
    assert (out / "stats.json").is_file()


@pytest.mark.parametrize("case", ["missing", "empty", "garbage", "file"])
def test_bad_tokenizer_is_one_line(tmp_path, case):
    p = tmp_path / "tok"
    if case == "empty":
        p.mkdir()
    elif case == "garbage":
        p.mkdir()
        (p / "tokenizer.json").write_text("{not json")
        (p / "tokenizer_config.json").write_text("{}")
    elif case == "file":
        p.write_text("x")
    with pytest.raises(TokenizerError):
        load_tokenizer_dir(p)
    r = CliRunner().invoke(app, ["data", "stats", "--tokenizer", str(p)])
    assert r.exit_code == 2
    lines = [ln for ln in r.output.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: ") and str(p) in lines[0], r.output
    assert "Traceback" not in r.output


def test_sample_needs_tokenizer():
    r = CliRunner().invoke(app, ["data", "stats", "--sample", "3"])
    assert r.exit_code == 2 and r.output.startswith("error: --sample needs --tokenizer")
    r = CliRunner().invoke(app, ["data", "stats", "--max-length", "100"])
    assert r.exit_code == 2 and r.output.startswith("error: --max-length needs --tokenizer")
