"""The LLM judge (TS_judge): verdicts cached in memory and on disk, bad replies, and `hpd eval --judge-url`."""

import json

from typer.testing import CliRunner

from hpd.cli import app
from http_helpers import fake_llm

runner = CliRunner()


def test_judge_cached_against_fake_server(tmp_path, mini_dir):
    from hpd.eval.judge import Judge
    seen = []
    srv = fake_llm(['{"match": true}'], seen)
    try:
        cache = tmp_path / "c.jsonl"
        j = Judge(srv.url + "/v1", "m", cache_path=cache)
        assert j.answer_match("q", "ref", "pred") is True and len(seen) == 1
        assert seen[0]["temperature"] == 0 and seen[0]["model"] == "m"
        assert j.answer_match("q", "ref", "pred") is True and len(seen) == 1      # memory cache
        assert Judge(srv.url + "/v1", "m", cache_path=cache).answer_match("q", "ref", "pred") and len(seen) == 1
        assert j.answer_match("q", "ref", "") is False and len(seen) == 1       # empty: no call
        r = runner.invoke(app, ["eval", "--data", str(mini_dir), "--out", str(tmp_path / "ev"),
                                "--judge-url", srv.url + "/v1", "--judge-model", "m"])
        assert r.exit_code == 0, r.output
        m = json.loads((tmp_path / "ev" / "metrics.json").read_text())
        assert m["TS_judge"] == 1.0 and (tmp_path / "ev" / "judge_cache.jsonl").is_file()
    finally:
        srv.close()
    seen2 = []
    srv = fake_llm(["no json here"], seen2)
    try:
        assert Judge(srv.url, "m").answer_match("q", "r", "p") is False and len(seen2) == 3
    finally:
        srv.close()
