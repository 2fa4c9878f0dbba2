"""``hpd bfcl`` end to end: the tiny model through the CLI, the cross-check against bfcl-eval's own evaluation,
replies that do not parse, generation errors, and resuming from the shard log."""

import json

import pytest
from typer.testing import CliRunner

from hpd.cli import app

runner = CliRunner()


def _jsonl(path):
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_tiny_model_end_to_end_and_resume(bfcl, tiny_dir, tmp_path):
    from hpd.bfcl.pipeline import METRICS_KEYS
    from hpd.runfolder import validate_manifest

    out = tmp_path / "run"
    args = ["bfcl", "--model", str(tiny_dir), "--out", str(out), "--categories", "simple,irrelevance,multi_turn_base,"
            "memory_kv", "--sample", "2", "--seed", "1", "--max-new-tokens", "8", "--no-progress"]
    r = runner.invoke(app, args)
    assert r.exit_code == 0, r.output
    assert "skipped memory_kv:" in r.output and "simple_python" in r.output and "BFCL aggregates:" in r.output
    m = json.loads((out / "metrics.json").read_text())
    assert tuple(m) == METRICS_KEYS
    assert list(m["categories"]) == ["simple_python", "irrelevance", "multi_turn_base"]
    assert set(m["aggregates"]) == {"overall", "non_live", "live", "multi_turn", "agentic", "relevance", "irrelevance"}
    assert "prerequisite conversations" in m["skipped"]["memory_kv"] and m["n_entries"] == 6
    assert m["categories"]["irrelevance"]["accuracy"] == 1.0        # a random model never writes a call
    for cat, group in (("simple_python", "non_live"), ("multi_turn_base", "multi_turn")):
        res = _jsonl(out / "result" / "hpd-policy" / group / f"BFCL_v4_{cat}_result.json")
        assert len(res) == 2 and {"id", "result", "latency"} <= set(res[0])
        head = _jsonl(out / "score" / "hpd-policy" / group / f"BFCL_v4_{cat}_score.json")[0]
        assert head == {"accuracy": m["categories"][cat]["accuracy"], "correct_count": m["categories"][cat]["correct"],
                        "total_count": 2}
    assert (out / "score" / "data_overall.csv").read_text().startswith("Rank,Overall Acc,")
    assert (out / "plots" / "bfcl.png").stat().st_size > 1000
    assert "## BFCL's aggregates" in (out / "results.md").read_text()
    man = json.loads((out / "manifest.json").read_text())
    assert validate_manifest(man) == [] and man["status"] == "complete"
    assert len(_jsonl(out / "entries.jsonl")) == 6
    # a second run of the same config reuses everything; a different config in the same folder is refused
    (out / "metrics.json").unlink()
    r = runner.invoke(app, args)
    assert r.exit_code == 0, r.output
    assert json.loads((out / "metrics.json").read_text())["generation"]["generated_now"] == 0
    r = runner.invoke(app, args[:-3] + ["--max-new-tokens", "9", "--no-progress"])
    assert r.exit_code == 2 and "different config_hash" in r.output and "Traceback" not in r.output


def test_crosscheck_with_bfcl_evals_own_evaluation(bfcl, tok, tmp_path, OraclePolicy):
    """Right, wrong, malformed and text replies (oracle); bfcl-eval's ``eval_runner.main`` on the result files gives
    exactly hpd's per-category numbers and leaderboard CSV cells."""

    from hpd.bfcl import data, run_bfcl
    from hpd.bfcl.official import crosscheck

    cats = "simple_python,simple_javascript,multiple,parallel,irrelevance,live_simple,live_relevance,multi_turn_base"
    scored, _ = data.parse_categories(cats)
    cases = data.select(scored, 5, 0)
    m = run_bfcl(tmp_path / "run", OraclePolicy(cases, tok), categories=cats, sample=5, seed=0)
    accs = {c: s["accuracy"] for c, s in m["categories"].items()}
    assert 0 < min(accs.values()) and max(accs.values()) == 1.0 and len(set(accs.values())) > 2   # a real mix
    errors = {e for s in m["categories"].values() for e in s["errors"]}
    assert {"ast_decoder:decoder_failed", "multi_turn:empty_turn_model_response"} <= errors
    cc = crosscheck(tmp_path / "run", m)
    assert cc["match"], cc["differences"]
    assert {c: h["accuracy"] for c, h in cc["official"].items()} == accs


def test_replies_that_do_not_parse_fail_with_the_reason(bfcl, tok, tmp_path, OraclePolicy):

    from hpd.bfcl import data, run_bfcl

    cases = data.select(["simple_python", "irrelevance", "multi_turn_base"], 2, 0)
    m = run_bfcl(tmp_path / "run", OraclePolicy(cases, tok, mode=lambda cid: "malformed"),
                 categories="simple_python,irrelevance,multi_turn_base", sample=2)
    assert m["categories"]["simple_python"] == {**m["categories"]["simple_python"], "accuracy": 0.0,
                                                "errors": {"ast_decoder:decoder_failed": 2}}
    assert m["categories"]["simple_python"]["reply_issues"]["malformed_call"] == 2
    assert m["categories"]["multi_turn_base"]["accuracy"] == 0.0
    assert m["categories"]["multi_turn_base"]["reply_issues"]["malformed_call"] == 2
    rows = [r for r in _jsonl(tmp_path / "run" / "entries.jsonl") if r["category"] != "irrelevance"]
    assert all(not r["valid"] and any(p.startswith("malformed_call:") for p in r["parse"]) for r in rows)
    score = _jsonl(tmp_path / "run" / "score" / "hpd-policy" / "non_live" / "BFCL_v4_simple_python_score.json")
    assert score[1]["hpd_parse"][0].startswith("malformed_call: ")
    assert score[1]["error_type"] == "ast_decoder:decoder_failed"


class _Failing:
    """A policy whose engine refuses every prompt (as the hf backend does when a prompt fills the context window),
    then raises (an engine or HTTP failure)."""

    name = "failing"

    def __init__(self, tokenizer, exc):
        self.tokenizer, self.exc, self.calls = tokenizer, exc, 0

    def generate(self, prompts, **kw):
        from hpd.policy.backends.base import Generation

        self.calls += 1
        if self.calls > 1:
            raise self.exc
        return [[Generation(text="", finish_reason="error", error="prompt fills the context window")] for _ in prompts]


def test_generation_errors_are_bfcl_inference_errors(bfcl, tok, tmp_path):
    from hpd.bfcl import run_bfcl
    from hpd.bfcl.run import GenConfig

    m = run_bfcl(tmp_path / "run", _Failing(tok, RuntimeError("engine died")), categories="simple,multi_turn_base",
                 sample=2, gen=GenConfig(batch_size=1))
    assert m["categories"]["simple_python"]["reply_issues"]["generation_error"] == 2
    assert m["categories"]["multi_turn_base"]["errors"] == {"multi_turn:inference_error": 2}
    res = _jsonl(tmp_path / "run" / "result" / "hpd-policy" / "non_live" / "BFCL_v4_simple_python_result.json")
    assert {r["result"].split(":")[0] for r in res} == {"Error during inference"}


def test_resume_after_a_kill(bfcl, tok, tmp_path, OraclePolicy):

    from hpd.bfcl import data, run_bfcl
    from hpd.bfcl.run import GenConfig

    class Killed(OraclePolicy):
        kill_at = 2                      # the second generate call dies like a killed process

        def generate(self, prompts, **kw):
            self.kill_at -= 1
            if self.kill_at == 0:
                raise KeyboardInterrupt
            return super().generate(prompts, **kw)

    cases = data.select(["simple_python", "multiple"], 3, 0)
    pol, gen = Killed(cases, tok, mode=lambda cid: "good"), GenConfig(batch_size=2)
    with pytest.raises(KeyboardInterrupt):
        run_bfcl(tmp_path / "run", pol, categories="simple,multiple", sample=3, gen=gen)
    assert len(_jsonl(tmp_path / "run" / "shards" / "part-00000.jsonl")) == 2      # the first wave was kept
    m = run_bfcl(tmp_path / "run", pol, categories="simple,multiple", sample=3, gen=gen)
    assert m["generation"]["generated_now"] == 4 and m["generation"]["resumed"] == 2
    assert sum(s["correct"] for s in m["categories"].values()) == 6
    assert len(list((tmp_path / "run" / "shards").glob("part-*.jsonl"))) == 2


def test_an_error_inside_an_episode_is_that_entrys_inference_error(bfcl, tok):
    from hpd.bfcl import data
    from hpd.bfcl.run import GenConfig, drive, guarded

    case = data.load_cases("simple_python")[0]

    def broken():
        yield ([{"role": "user", "content": "hi"}], [], "k")
        raise RuntimeError("a bug")

    class Echo:
        tokenizer = tok

        def generate(self, prompts, **kw):
            from hpd.policy.backends.base import Generation

            return [[Generation(text="ok", token_ids=[1])] for _ in prompts]

    done = []
    drive([guarded(case, broken())], Echo(), tok, GenConfig(), done.append)
    assert done[0]["result"] == "Error during inference: hpd: RuntimeError: a bug"
