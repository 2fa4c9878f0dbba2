"""`hpd probe` on the tiny random Qwen3: every measure equals the value computed here by hand from one
plain full-length forward pass (softmax of the raw logits), for the base model and a LoRA variant; the
run folder, the plots and the one-line errors."""

import json
import math

import pytest
import torch
from typer.testing import CliRunner

from hpd.boundary import load_boundaries, run_replay
from hpd.cli import app
from hpd.policy import chat
from hpd.probe import BoundaryScorer, ProbeError, load_variant, parse_variant, run_probe
from hpd.runfolder import validate_manifest

runner = CliRunner()


@pytest.fixture(scope="module")
def replay_dir(tmp_path_factory, builtin_dir):
    out = tmp_path_factory.mktemp("probe-replay")
    run_replay(builtin_dir, out, limit=2)
    return out


@pytest.fixture(scope="module")
def lora_dir(tmp_path_factory, tiny_dir):
    """A LoRA adapter with random (non-zero) B matrices, so the variant really differs from the base."""
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM

    torch.manual_seed(1)
    m = get_peft_model(AutoModelForCausalLM.from_pretrained(tiny_dir),
                       LoraConfig(r=4, lora_alpha=8, target_modules="all-linear", init_lora_weights=False))
    out = tmp_path_factory.mktemp("lora") / "hpd" / "adapter"
    m.save_pretrained(out)
    return out


def by_hand(model, tok, boundary, opening):
    """The three measures from ONE plain forward over prompt + continuation (no logits_to_keep), and
    p_call from one more over prompt + opening: softmax of the raw logits, products and sums spelled out."""
    prompt = chat.render_prompt(tok, boundary.context)
    p = tok(prompt, add_special_tokens=False)["input_ids"]
    c = tok(chat.render_action(tok, boundary.reference), add_special_tokens=False)["input_ids"]
    with torch.no_grad():
        probs = torch.softmax(model(input_ids=torch.tensor([p + c])).logits[0].double(), -1)
        oprobs = torch.softmax(model(input_ids=torch.tensor([p + opening])).logits[0].double(), -1)
    first = probs[len(p) - 1]
    p_call = 1.0
    for j, t in enumerate(opening):
        p_call *= float(oprobs[len(p) - 1 + j, t])
    log_sum = 0.0                  # a product of ~50 probabilities of a random model underflows: sum logs
    for j, t in enumerate(c):
        log_sum += math.log(float(probs[len(p) - 1 + j, t]))
    return {"p_call": p_call, "p_finish": 1.0 - float(first[opening[0]]),
            "entropy": -sum(float(q) * math.log(float(q)) for q in first if q > 0),
            "geo_mean": math.exp(log_sum / len(c))}


def _check(row, hand):
    for k in ("p_call", "p_finish", "entropy", "geo_mean"):
        assert row[k] == pytest.approx(hand[k], rel=1e-4, abs=1e-9), k


def test_probe_matches_a_hand_computation(replay_dir, tiny_dir, lora_dir, tmp_path):
    bds = load_boundaries(replay_dir)
    kinds = {("call" if any(b_["type"] == "toolCall" for b_ in b.reference["content"]) else "finish") for b in bds}
    assert kinds == {"call", "finish"}        # both kinds of boundary are probed
    doc = run_probe(replay_dir, tiny_dir, [parse_variant("Base="), parse_variant(f"HPD={lora_dir}")],
                    tmp_path / "pr", log=lambda s: None)
    rows = [json.loads(x) for x in (tmp_path / "pr" / "rows.jsonl").read_text().splitlines()]
    assert len(rows) == 2 * len(bds) and doc["n_boundaries"] == len(bds)
    for name, adapter in (("Base", None), ("HPD", lora_dir)):
        model, tok = load_variant(tiny_dir, adapter, device="cpu")
        opening = tok("<tool_call>", add_special_tokens=False)["input_ids"]
        assert doc["opening"]["ids"] == opening and len(opening) == 1
        mine = [r for r in rows if r["variant"] == name]
        for b, r in zip(bds, mine):
            assert r["uid"] == b.uid
            _check(r, by_hand(model, tok, b, opening))
            assert r["p_call"] + r["p_finish"] == pytest.approx(1.0)       # a one-token opening
            assert r["p_finish"] <= 1.0 and r["p_call"] <= 1.0
        s = doc["variants"][name]["summary"]
        assert s["n_boundaries"] == len(bds) and s["entropy"]["mean"] == pytest.approx(
            sum(r["entropy"] for r in mine) / len(mine))
        assert s["entry_accuracy"] == sum((r["p_call"] > r["p_finish"]) == (r["reference"] == "call")
                                          for r in mine) / len(mine)
    base, hpd = ([r["geo_mean"] for r in rows if r["variant"] == v] for v in ("Base", "HPD"))
    assert base != pytest.approx(hpd)          # the adapter is really applied
    man = json.loads((tmp_path / "pr" / "manifest.json").read_text())
    assert validate_manifest(man) == [] and man["status"] == "complete" and man["n_boundaries"] == len(bds)
    for f in ("control_entry", "entropy", "continuation"):
        assert (tmp_path / "pr" / "plots" / f"{f}.png").stat().st_size > 1000
        assert set(doc["kde"][f]) - {"x"}


def test_multi_token_opening_both_paths(replay_dir, tiny_dir):
    """An opening of several tokens: p_call is the product of the chain (a second pass), and equals the
    same-pass value when the continuation starts with it."""
    model, tok = load_variant(tiny_dir, None, device="cpu")
    sc = BoundaryScorer(model, tok)
    b = next(b for b in load_boundaries(replay_dir) if b.index > 0)
    c = tok(chat.render_action(tok, b.reference), add_special_tokens=False)["input_ids"]
    sc.opening = c[:3]                                       # the continuation starts with it: one pass
    same_pass = sc.measure(b)
    _check(same_pass, by_hand(model, tok, b, c[:3]))
    sc.opening = [c[0], c[2], c[1]]                          # it does not: a second pass over prompt + opening
    other = sc.measure(b)
    _check(other, by_hand(model, tok, b, [c[0], c[2], c[1]]))
    assert other["p_finish"] == pytest.approx(same_pass["p_finish"]) and other["p_call"] != same_pass["p_call"]


def test_cli_probe_and_one_line_errors(replay_dir, tiny_dir, lora_dir, tmp_path):
    r = runner.invoke(app, ["probe", "--model", str(tiny_dir), "--boundaries", str(replay_dir), "--out",
                            str(tmp_path / "p"), "--adapter", str(lora_dir), "--variant", "Base=", "--limit", "2",
                            "--variant", f"full={tiny_dir}"])    # a whole model folder as the "adapter"
    assert r.exit_code == 0, r.output
    doc = json.loads((tmp_path / "p" / "probe.json").read_text())
    assert list(doc["variants"]) == ["Base", "full", "hpd"] and doc["n_boundaries"] == 2   # --adapter: named after its run
    rows = [json.loads(x) for x in (tmp_path / "p" / "rows.jsonl").read_text().splitlines()]
    same = [[r["geo_mean"] for r in rows if r["variant"] == v] for v in ("Base", "full")]
    assert same[0] == same[1]                # the same weights, loaded as a fine-tuned model folder
    assert "Base" in r.output and "entry_acc" in r.output
    bad = [(["--boundaries", str(tmp_path / "nope")], "not a replay output folder"),
           (["--boundaries", str(replay_dir), "--variant", "oops"], "expected NAME=ADAPTER"),
           (["--boundaries", str(replay_dir), "--variant", f"x={tmp_path}"], "neither a PEFT adapter"),
           (["--boundaries", str(replay_dir), "--variant", "a=", "--variant", "a="], "unique")]
    for args, msg in bad:
        r = runner.invoke(app, ["probe", "--model", str(tiny_dir), "--out", str(tmp_path / "e"), *args])
        assert r.exit_code == 2 and msg in r.output and "Traceback" not in r.output, (args, r.output)
    with pytest.raises(ProbeError):
        parse_variant("=x")
