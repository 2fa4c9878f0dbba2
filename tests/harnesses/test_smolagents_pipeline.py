"""The whole pipeline with ``--harness smolagents`` (issue 37, part 3): ``hpd replay`` through smolagents'
ToolCallingAgent, ``hpd teach --teacher oracle`` verified in smolagents' rules, ``hpd train`` on those records
(tiny model), ``hpd eval --harness smolagents`` natively in the smolagents loop. Plus the pieces: the registry,
Pi's replay records unchanged by it, teacher verdicts in smolagents' rules."""

import json

import pytest

pytest.importorskip("smolagents")

from typer.testing import CliRunner  # noqa: E402

from hpd.cli import app  # noqa: E402

runner = CliRunner()
SIX = ("TS", "F1", "Step-SR", "RC", "Exact", "Action-Acc")


def _ok(args):
    r = runner.invoke(app, args)
    assert r.exit_code == 0, r.output
    return r


def test_registry_names_and_errors():
    from hpd.harnesses.registry import HARNESS_SPECS, get_harness

    assert list(HARNESS_SPECS) == ["pi", "smolagents"] and get_harness(None).name == "pi"
    with pytest.raises(ValueError, match="choose from pi, smolagents"):
        get_harness("nope")
    s = get_harness("smolagents")
    fin = s.finish_action("42")
    assert s.is_finish(fin) and s.answer_of(fin) == "42" and s.tool_calls(fin) == []
    assert not s.is_finish({"role": "assistant", "content": [{"type": "text", "text": "42"}]})
    assert get_harness("pi").is_finish({"role": "assistant", "content": [{"type": "text", "text": "42"}]})


def test_pi_replay_config_and_hash_are_unchanged_by_the_harness_field():
    from hpd.boundary import ReplayConfig

    pi = ReplayConfig()
    assert "harness" not in pi.to_record() and ReplayConfig.from_record(pi.to_record()).harness == "pi"
    sm = ReplayConfig(harness="smolagents")
    assert sm.to_record()["harness"] == "smolagents" and sm.hash() != pi.hash()
    assert ReplayConfig.from_record(sm.to_record()) == sm
    with pytest.raises(ValueError):
        ReplayConfig(harness="nope")


def test_smolagents_boundaries_are_its_model_calls(bench):
    """Every reference turn is one smolagents model call; the context is smolagents' request (its own system
    prompt and tool names), the reference is in its form (final answer = a final_answer call)."""
    from hpd.boundary import ReplayConfig, replay_task

    t = next(t for t in bench.tasks if t.kind == "sequential")
    bs = replay_task(t, bench, ReplayConfig(harness="smolagents"), keep_forks=True)
    assert len(bs) == t.n_boundaries and {b.kind for b in bs} == {"step"}
    for b in bs:
        assert b.context == b.harness.context() and "final_answer" in [x["name"] for x in b.context["tools"]]
        assert b.state["harness"]["harness"].startswith("smolagents@")
        assert b.documents["runtime"]["text"].count("final_answer ends the run") == 1
    last = bs[-1].reference["content"]
    assert [c["name"] for c in last] == ["final_answer"] and bs[-1].can_end
    assert "New task:" in bs[0].context["messages"][0]["content"]


def test_teacher_verdicts_follow_smolagents_rules(bench):
    from hpd.boundary import ReplayConfig, replay_task
    from hpd.harness.messages import assistant_message, text, tool_call
    from hpd.teacher.boundaries import item_from_boundary
    from hpd.teacher.verify import verify

    t = next(t for t in bench.tasks if t.kind == "sequential" and all(s.scorable for s in t.steps))
    bs = replay_task(t, bench, ReplayConfig(harness="smolagents"), keep_forks=True)
    first, final = item_from_boundary(bs[0]), item_from_boundary(bs[-1])
    base = first.restore()

    def v(msg, item=first, b=None):
        return verify(msg, item, b if b is not None else base)

    assert v(first.reference).ok
    assert v(assistant_message([tool_call("c1", "nope", {})])).reasons == ["unknown_tool"]
    name = first.reference["content"][0]["name"]
    assert v(assistant_message([tool_call("c1", name, {"zzz": 1})])).reasons[0] == "invalid_args"
    prose = v(assistant_message([text("I am done.")]))     # smolagents: prose is no action (a parsing error)
    assert prose.reasons == ["parse_error"] and "JSON blob" in prose.detail
    fin = {"role": "assistant", "content": [tool_call("f", "final_answer", {"answer": "x"})], "stopReason": "toolUse"}
    assert v(fin).reasons == ["premature_end"]
    assert v(final.reference, final, final.restore()).ok and final.is_final
    both = assistant_message([tool_call("c1", name, first.reference["content"][0]["arguments"]),
                              tool_call("f", "final_answer", {"answer": "x"})])
    assert not v(both).ok


@pytest.mark.slow
def test_replay_teach_train_eval_with_harness_smolagents(builtin_dir, tiny_dir, tmp_path):
    sp, rp, te, tr, ev = (tmp_path / n for n in ("split", "replay", "teach", "train", "eval"))
    _ok(["data", "split", "--data", str(builtin_dir), "--out", str(sp), "--test-frac", "0.25"])
    split = sp / "split.json"
    _ok(["replay", "--harness", "smolagents", "--data", str(builtin_dir), "--split-file", str(split), "--split",
         "train", "--limit", "10", "--out", str(rp), "--quiet"])
    man = json.loads((rp / "manifest.json").read_text())
    assert man["config"]["harness"] == "smolagents" and man["n_tasks"] == 10

    r = runner.invoke(app, ["teach", "--boundaries", str(rp), "--out", str(te), "--teacher", "oracle",
                            "--harness", "pi"])
    assert r.exit_code == 2 and "replayed through smolagents" in r.output
    _ok(["teach", "--boundaries", str(rp), "--out", str(te), "--teacher", "oracle", "--harness", "smolagents"])
    diag = json.loads((te / "diagnostics.json").read_text())
    assert diag["n_targets"] == diag["n_teacher"] == man["n_boundaries"]     # every oracle action is valid
    recs = [json.loads(x) for x in (te / "targets.jsonl").read_text().splitlines()]
    finals = [r for r in recs if r["target"]["content"][0].get("name") == "final_answer"]
    assert len(finals) == 10 and all(r["context"]["systemPrompt"].startswith("You are an expert assistant")
                                     for r in recs)

    _ok(["train", "--config", "configs/tiny-cpu.yaml", "--data", str(te / "targets.jsonl"), "--out", str(tr),
         f"model.path={tiny_dir}", "schedule.phases.0.updates=2", "batch.global_batch=2", "data.max_length=8192",
         "batch.micro_batch_tokens=8192",
         "logging.progress=false", "logging.probe_examples=0", "logging.tensorboard=false"])
    adapter = tr / "adapter"
    assert (adapter / "adapter_config.json").is_file()

    r = _ok(["eval", "--harness", "smolagents", "--model", str(tiny_dir), "--adapter", str(adapter),
             "--data", str(builtin_dir), "--split-file", str(split), "--split", "test", "--limit", "3",
             "--max-turns", "2", "--max-new-tokens", "24", "--dtype", "float32", "--out", str(ev)])
    metrics = json.loads((ev / "metrics.json").read_text())
    assert all(isinstance(metrics[k], float) for k in SIX) and metrics["n_tasks"] == 3
    assert set(metrics["end_reasons"]) <= {"final_answer", "max_steps", "error"}
    emani = json.loads((ev / "manifest.json").read_text())
    assert emani["config"]["agent_harness"] == "smolagents" and emani["status"] == "complete"
    from hpd.eval.read import transcripts

    rows = transcripts(ev, n=3)
    assert len(rows) == 3
    for row in rows:
        assert row["harness"] == "smolagents" and row["events"][-1] == {"type": "agent_end",
                                                                        "end_reason": row["end_reason"]}
        last = row["messages"][-1]
        if row["end_reason"] == "final_answer":
            assert [c["name"] for c in last["content"] if c.get("type") == "toolCall"] == ["final_answer"]
        else:
            assert row["end_reason"] == "max_steps" and len(row["verdicts"]) == 3   # 2 steps + the forced answer
