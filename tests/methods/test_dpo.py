"""The DPO baseline (hpd.methods.dpo, hpd.methods.pairs, hpd.teacher.read): the loss on hand-computed pairs,
pairs from a real teach folder (built-in benchmark -> ``run_replay`` -> ``teach`` with a scripted teacher that
proposes good and broken actions), one-line errors on broken folders, held-out margins that widen over two
seeds, exact resume and the ``hpd train --method dpo`` command."""

import hashlib
import json
import math
import os
import shutil
from collections import Counter
from types import SimpleNamespace

import pytest
import torch
from typer.testing import CliRunner

from hpd.methods.dpo import Config, DPOTrainer, dpo_loss, pair_figures, run, sequence_logps
from hpd.methods.pairs import build_pairs
from hpd.teacher.read import TeachFolderError, read_teach_run
from hpd.train.logger import read_csv

os.environ.setdefault("OMP_NUM_THREADS", "1")
torch.set_num_threads(1)
CONFIG = "configs/methods/dpo-tiny-cpu.yaml"


# ------------------------------------------------------------------------------------------ a teach folder
def case_of(boundary_id: str) -> int:
    """Which script the teacher follows at a boundary: 0 two good actions, 1 two broken ones, else good + broken."""
    return int(hashlib.sha256(boundary_id.encode()).hexdigest(), 16) % 6


class GoodBadTeacher:
    """Scripted teacher: 'good' = the oracle document's next action (the reference), 'broken' = the garbage
    teacher's (made-up tools, bad arguments, broken markup, premature or empty answers) or the reference with one
    argument changed."""

    name = "good-bad"

    def propose(self, requests):
        from hpd.teacher.proposal import GarbageTeacher, OracleTeacher, ReferencePerturbedTeacher

        teachers = (OracleTeacher(), GarbageTeacher(), ReferencePerturbedTeacher())
        good, bad, pert = (t.propose(requests) for t in teachers)
        out = []
        for r, g, b, p in zip(requests, good, bad, pert):
            case = case_of(r.item.id)
            out.append([g[0], g[1]] if case == 0 else [b[0], p[1]] if case == 1
                       else [g[0], b[1] if case % 2 else p[1]])
        return out


@pytest.fixture(scope="module")
def world(builtin_dir, builtin_bench, tmp_path_factory):
    """A replay folder (26 tasks, the TRAJECT quirks among them) and a finished teach folder over it."""
    from builtin_data import QUIRKS

    from hpd.boundary import ReplayConfig, run_replay
    from hpd.teacher.boundaries import load_items
    from hpd.teacher.run import TeachConfig, teach

    root = tmp_path_factory.mktemp("dpo")
    uids = [t.uid for t in builtin_bench.tasks if t.uid.endswith(("#0", "#1")) and t.uid.startswith("parallel")]
    uids += [QUIRKS["failed"], "sequential/Weather/traj_query.json#0"]
    (root / "split.json").write_text(json.dumps({"train": uids}))
    run_replay(builtin_dir, root / "replay", ReplayConfig(pool_k=1), split_file=root / "split.json", split="train",
               bench=builtin_bench)
    items, _ = load_items(root / "replay", privilege="oracle")
    teach(items, GoodBadTeacher(), TeachConfig(k=2, attempts=1, privilege="oracle"), root / "teach",
          manifest={"command": "test", "inputs": {"boundaries": str(root / "replay")}})
    return SimpleNamespace(root=root, replay=root / "replay", teach=root / "teach", items={it.id: it for it in items},
                           quirks=[f"{QUIRKS['failed']}/b0", f"{QUIRKS['off_catalog']}/b0"])


def shard_records(teach_dir) -> dict:
    """The teacher records straight from the shard files (not through the reader under test)."""
    out = {}
    for p in sorted((teach_dir / "shards").glob("part-*.jsonl")):
        for line in p.read_text().splitlines():
            r = json.loads(line)
            out.setdefault(r["boundary_id"], r)
    return out


def dpo_cfg(world, model_path, **over) -> Config:
    raw = {"name": "t", "seed": 0, "updates": 6, "model": {"path": str(model_path), "precision": "fp32"},
           "lora": {"enabled": False}, "optim": {"lr": 1e-3, "warmup_updates": 0},
           "batch": {"global_batch": 4, "micro_batch_tokens": 8192},
           "data": {"teach": str(world.teach), "max_length": 4096, "held_out_tasks": 4},
           "checkpoint": {"every": 2, "keep": 5},
           "logging": {"probe_examples": 4, "progress": False, "tensorboard": False}}
    for key, v in over.items():
        node = raw
        *head, last = key.split("__")
        for k in head:
            node = node.setdefault(k, {})
        node[last] = v
    return Config.model_validate(raw)


# ------------------------------------------------------------------------------------------ (a) the loss
def test_dpo_loss_on_two_pairs_by_hand():
    # beta = 0.1. Pair 1: policy (chosen, rejected) = (-10, -12), reference (-11, -11):
    #   rewards 0.1 * (-10 + 11) = 0.1 and 0.1 * (-12 + 11) = -0.1, z = 0.2, loss = log(1 + e^-0.2)
    #   = log(1 + 0.8187307531) = log(1.8187307531) = 0.5981388694;
    #   d loss / d chosen = -beta * sigmoid(-z) = -0.1 / (1 + e^0.2) = -0.1 / 2.2214027582 = -0.0450166003
    # Pair 2: policy (-5, -4), reference (-4, -6): rewards -0.1 and 0.2, z = -0.3, loss = log(1 + e^0.3)
    #   = log(2.3498588076) = 0.8543552445;
    #   d loss / d chosen = -0.1 / (1 + e^-0.3) = -0.1 / 1.7408182207 = -0.0574442517
    pc = torch.tensor([-10.0, -5.0], dtype=torch.float64, requires_grad=True)
    pr = torch.tensor([-12.0, -4.0], dtype=torch.float64, requires_grad=True)
    losses, rc, rr = dpo_loss(pc, pr, torch.tensor([-11.0, -4.0], dtype=torch.float64),
                              torch.tensor([-11.0, -6.0], dtype=torch.float64), beta=0.1)
    assert losses.tolist() == pytest.approx([0.5981388694, 0.8543552445], abs=1e-9)
    assert rc.tolist() == pytest.approx([0.1, -0.1]) and rr.tolist() == pytest.approx([-0.1, 0.2])
    losses.sum().backward()
    assert pc.grad.tolist() == pytest.approx([-0.0450166003, -0.0574442517], abs=1e-9)
    assert pr.grad.tolist() == pytest.approx([0.0450166003, 0.0574442517], abs=1e-9)   # the opposite push
    # beta scales the reward: beta = 1 on pair 1 gives z = 2, loss = log(1 + e^-2) = log(1.1353352832) = 0.1269280110
    one = dpo_loss(*(torch.tensor(x, dtype=torch.float64) for x in (-10.0, -12.0, -11.0, -11.0)), beta=1.0)[0]
    assert float(one) == pytest.approx(0.1269280110, abs=1e-9)


def test_pair_figures_split_the_reward_into_chosen_and_rejected():
    # The two pairs of the test above: rewards (0.1, -0.1) and (-0.1, 0.2). Chosen mean 0.0, rejected mean 0.05,
    # reward margins 0.2 and -0.3 (mean -0.05, one of two > 0); policy margins 2 and -1 (mean 0.5, one of two > 0);
    # reference margins 0 and 2 (mean 1); losses as above (mean 0.726246557).
    f = pair_figures(*(torch.tensor(x, dtype=torch.float64) for x in ([-10.0, -5.0], [-12.0, -4.0], [-11.0, -4.0],
                                                                      [-11.0, -6.0])), beta=0.1)
    assert f["chosen_reward"] == pytest.approx(0.0, abs=1e-12) and f["rejected_reward"] == pytest.approx(0.05)
    assert f["reward_margin"] == pytest.approx(f["chosen_reward"] - f["rejected_reward"]) == pytest.approx(-0.05)
    assert (f["margin"], f["ref_margin"], f["reward_accuracy"], f["preference_accuracy"]) == pytest.approx(
        (0.5, 1.0, 0.5, 0.5))
    assert f["loss"] == pytest.approx((0.5981388694 + 0.8543552445) / 2, abs=1e-9) and f["n"] == 2


def test_sequence_logps_equal_a_plain_forward_per_example(tiny_dir):
    """Padded, packed and shared-prefix micro-batches give each example's summed completion log-prob of a lone,
    unpadded forward (examples sharing a prompt, one a prefix of another, a duplicate)."""
    from transformers import AutoModelForCausalLM

    from hpd.views import ViewExample

    model = AutoModelForCausalLM.from_pretrained(str(tiny_dir), dtype=torch.float32).eval()
    g = torch.Generator().manual_seed(0)
    exs = [ViewExample("T", tuple(torch.randint(5, 300, (p,), generator=g).tolist()),
                       tuple(torch.randint(5, 300, (c,), generator=g).tolist()), uid=str(i))
           for i, (p, c) in enumerate([(7, 3), (12, 1), (4, 9)])]
    a, b = exs[0], exs[2]
    exs += [ViewExample("T", a.prompt_ids, a.completion_ids[:1] + (7, 8), uid="same prompt"),    # a pair's rejected
            ViewExample("T", b.prompt_ids[:2], b.prompt_ids[2:] + b.completion_ids[:2], uid="prefix of 2"), b]
    want = []
    with torch.no_grad():
        for e in exs:
            logits = model(input_ids=torch.tensor([e.input_ids])).logits[0].log_softmax(-1)
            p = len(e.prompt_ids)
            want.append(sum(float(logits[p - 1 + j, t]) for j, t in enumerate(e.completion_ids)))
        for mode in ("padded", "packed", "prefix"):
            got = sequence_logps(model, exs, mode, torch.device("cpu")).tolist()
            assert got == pytest.approx(want, abs=1e-4), mode


# ------------------------------------------------------------------------------------------ (b) pairs
def test_pairs_from_a_teach_folder(world):
    raw = shard_records(world.teach)
    run_ = read_teach_run(world.teach)
    assert [r["boundary_id"] for r in run_.records] == sorted(raw, key=lambda b: raw[b]["order"])
    assert run_.boundaries_path == world.replay and run_.privilege == "oracle"
    ps = build_pairs(run_.records, run_.training, world.items)
    s = ps.summary()
    compliant = {b: world.items[b].meta["reference_meta"]["compliant"] for b in raw}
    ok = {b: [c["verdict"]["ok"] for c in r["candidates"]] for b, r in raw.items()}
    paired = {p.boundary_id: p.chosen_source for p in ps.pairs}

    # every boundary is paired or unpaired for exactly one reason, and the reason is right
    assert s["n_boundaries"] == len(raw) == s["n_boundaries_paired"] + sum(s["unpaired"].values())
    for b in raw:
        if any(ok[b]) and not all(ok[b]):
            assert paired.get(b) == "teacher", b
        elif all(ok[b]):
            assert b in ps.unpaired["no_rejected"], b
        elif compliant[b]:
            assert paired.get(b) == "reference", b           # nothing verified, but the reference verifies
        else:
            assert b in ps.unpaired["no_verified_chosen"], b
    assert set(world.quirks) <= set(ps.unpaired["no_verified_chosen"])      # the recorded failure, the off-catalog call
    assert min(s["chosen_source"]["teacher"], s["chosen_source"]["reference"], s["unpaired"]["no_rejected"]) >= 1
    assert {b for b in raw if case_of(b) == 0 and compliant[b]} == set(ps.unpaired["no_rejected"])

    # chosen = the shard's teacher target or the reference; rejected = a rejected candidate, its reason counted
    for p in ps.pairs:
        r = raw[p.boundary_id]
        assert p.chosen == (r["target"]["message"] if p.chosen_source == "teacher" else r["reference"])
        a, c = p.uid.rsplit("#a", 1)[1].split("c")
        cand = next(x for x in r["candidates"] if (x["attempt"], x["index"]) == (int(a), int(c)))
        assert not cand["verdict"]["ok"] and p.rejected == cand["message"]
        assert list(p.reasons) == cand["verdict"]["reasons"]
    want = Counter(x["verdict"]["reasons"][0] for b in paired for x in raw[b]["candidates"] if not x["verdict"]["ok"])
    assert s["rejection_reasons"] == dict(want) and sum(want.values()) == s["n_pairs"] and len(want) >= 4

    # without the boundaries nothing is paired on trust; an excluded reason is counted, not paired
    blind = build_pairs(run_.records, run_.training, None).summary()
    n_ref = s["chosen_source"]["reference"]
    assert blind["unpaired"]["reference_unchecked"] == n_ref + s["unpaired"]["no_verified_chosen"]
    assert blind["chosen_source"]["reference"] == 0 and blind["unpaired"]["no_verified_chosen"] == 0
    no_empty = build_pairs(run_.records, run_.training, world.items, exclude_reasons=["empty_answer"]).summary()
    assert "empty_answer" not in no_empty["rejection_reasons"]
    assert no_empty["excluded_candidates"]["empty_answer"] == want["empty_answer"] > 0


def test_pair_rules_on_hand_made_records():
    """Duplicate actions pair once (tool-call ids ignored), teacher errors and the cap are counted, not paired."""
    def msg(text, call_id="x"):
        return {"role": "assistant", "content": [{"type": "toolCall", "id": call_id, "name": text, "arguments": {}}]}

    def cand(i, m, reasons):
        return {"attempt": 1, "index": i, "message": m, "verdict": {"ok": not reasons, "reasons": reasons}}

    good = msg("good")
    rec = {"boundary_id": "t/b0", "task_uid": "t", "order": 0, "reference": msg("ref"),
           "target": {"message": good, "source": "teacher"},
           "candidates": [cand(0, good, []), cand(1, msg("bad", "a"), ["unknown_tool"]),
                          cand(2, msg("bad", "b"), ["unknown_tool"]), cand(3, msg("err"), ["teacher_error"]),
                          cand(4, msg("bad2"), ["invalid_args", "tool_error"]), cand(5, msg("bad3"), ["parse_error"])]}
    training = {"t/b0": {"context": {"messages": []}}}
    ps = build_pairs([rec], training, max_rejected=2)
    assert [p.uid for p in ps.pairs] == ["t/b0#a1c1", "t/b0#a1c4"]
    assert [p.reasons for p in ps.pairs] == [("unknown_tool",), ("invalid_args", "tool_error")]
    assert dict(ps.excluded) == {"duplicate_action": 1, "teacher_error": 1, "over_max_rejected": 1}
    # a reference fallback: chosen only if the boundary's reference verifies (the check is injected here)
    fallback = dict(rec, target={"message": rec["reference"], "source": "reference_fallback"},
                    candidates=[cand(0, msg("bad"), ["unknown_tool"])])
    items = {"t/b0": object()}
    yes = build_pairs([fallback], training, items, check=lambda r, it: True)
    no = build_pairs([fallback], training, items, check=lambda r, it: False)
    assert yes.pairs[0].chosen == rec["reference"] and yes.pairs[0].chosen_source == "reference"
    assert not no.pairs and no.unpaired["no_verified_chosen"] == ["t/b0"]
    assert build_pairs([fallback], training, items, reference_chosen=False, check=lambda r, it: True).unpaired[
        "no_verified_chosen"] == ["t/b0"]


def test_broken_teach_folders_are_one_line_errors(world, tmp_path):
    def copy(name):
        d = tmp_path / name
        shutil.copytree(world.teach, d)
        return d

    def err(folder) -> str:
        with pytest.raises(TeachFolderError) as e:
            read_teach_run(folder)
        assert "\n" not in str(e.value)
        return str(e.value)

    assert "teach folder not found" in err(tmp_path / "nope")
    d = copy("nomanifest")
    (d / "manifest.json").unlink()
    assert "no manifest.json" in err(d)
    d = copy("running")
    man = json.loads((d / "manifest.json").read_text())
    (d / "manifest.json").write_text(json.dumps(dict(man, status="running")))
    assert "unfinished teach run" in err(d)
    d = copy("field")
    part = sorted((d / "shards").glob("part-*.jsonl"))[0]
    lines = part.read_text().splitlines()
    rec = json.loads(lines[2])
    del rec["candidates"][1]["verdict"]["ok"]
    lines[2] = json.dumps(rec)
    part.write_text("\n".join(lines) + "\n")
    msg = err(d)
    assert f"{part}: record 3 ({rec['boundary_id']}): field 'candidates[1].verdict.ok' is missing" == msg
    lines[2] = "{not json"
    part.write_text("\n".join(lines) + "\n")
    assert f"{part}: record 3: not JSON" in err(d)
    d = copy("notargets")
    (d / "targets.jsonl").unlink()
    assert "targets.jsonl" in err(d)


# ------------------------------------------------------------------------------------------ (c) smoke
def test_dpo_widens_the_margin_on_held_out_pairs_over_two_seeds(world, tmp_path):
    """Full fine-tuning of a fresh tiny model per seed (``tiny:xs`` is built with the run's seed): after 10 updates
    the held-out pairs (4 tasks never trained on) prefer chosen over rejected more than the reference does."""
    figures = {}
    for seed in (0, 1):
        out = tmp_path / f"seed{seed}"
        cfg = dpo_cfg(world, "tiny:xs", seed=seed, updates=10, batch__global_batch=8)
        assert run(cfg, out) == out / "model"
        m = json.loads((out / "metrics.json").read_text())
        ho = m["held_out"]
        figures[seed] = (ho["n_pairs"], round(ho["margin_before"], 2), round(ho["margin_after"], 2),
                         m["probe_final"]["held_out"]["reward_accuracy"])
        assert ho["n_pairs"] >= 6 and m["pairs"]["n_train_pairs"] >= 20
        assert ho["margin_after"] > ho["margin_before"] + 5.0, (seed, ho)
        assert m["probe_final"]["held_out"]["reward_accuracy"] >= 0.75, (seed, m["probe_final"])
        assert m["last_loss"] < m["first_loss"] == pytest.approx(math.log(2), abs=1e-4)
    print("held-out pairs, margin before, margin after, reward accuracy after:", figures)


# ------------------------------------------------------------------------------------------ (d) resume
def test_resume_is_exact_with_lora(world, tiny_dir, tmp_path, monkeypatch):
    """Stopped after 3 updates and resumed = one uninterrupted run: the same losses and the same final figures.
    The resumed run loads the reference table the first one kept, and computes none."""
    lora = {"lora__enabled": True, "lora__r": 8, "lora__alpha": 16, "lora__dropout": 0.1, "optim__lr": 5e-3}
    assert run(dpo_cfg(world, tiny_dir, stop_after=3, **lora), tmp_path / "a") is None
    assert (tmp_path / "a" / "reference_logps.pt").is_file()
    computed = []
    real = DPOTrainer.reference_logps
    monkeypatch.setattr(DPOTrainer, "reference_logps",
                        lambda self, pairs: computed.append(len(pairs)) or real(self, pairs))
    assert run(dpo_cfg(world, tiny_dir, **lora), tmp_path / "a", resume=True) == tmp_path / "a" / "adapter"
    assert computed == []                                          # the table came from the run folder
    assert run(dpo_cfg(world, tiny_dir, **lora), tmp_path / "b") == tmp_path / "b" / "adapter"
    assert computed and computed[0] > 0                            # a new folder computes its own
    a, b = (read_csv(tmp_path / d / "metrics.csv") for d in "ab")
    assert [r["update"] for r in a] == list(range(6)) == [r["update"] for r in b]
    assert [r["loss"] for r in a] == [r["loss"] for r in b]
    ma, mb = (json.loads((tmp_path / d / "metrics.json").read_text()) for d in "ab")
    assert ma["probe_final"] == mb["probe_final"] and ma["probe_initial"] == mb["probe_initial"]
    assert len({r["loss"] for r in a}) == 6                       # it did train


@pytest.mark.slow
def test_sigkill_then_resume_matches_uninterrupted(world, tiny_dir, tmp_path):
    """A real kill: `python -m hpd.train --method dpo` SIGKILLed after a checkpoint, resumed, equals a straight run."""
    from pathlib import Path

    import yaml
    from kill_helpers import kill_after_checkpoint

    cfg = dpo_cfg(world, tiny_dir, updates=400, lora__enabled=True, lora__r=8, lora__alpha=16, optim__lr=5e-3)
    path = tmp_path / "dpo.yaml"
    path.write_text(yaml.safe_dump(cfg.model_dump(mode="json")))
    out = tmp_path / "killed"
    repo = Path(__file__).resolve().parents[2]
    kill_after_checkpoint(["--method", "dpo", "--config", str(path), "--out", str(out)], out, repo)
    assert not (out / "adapter").exists()
    done = max(int(c.name.split("-")[1]) for c in (out / "checkpoints").glob("update-*") if (c / "state.json").exists())
    assert run(cfg.model_copy(update={"stop_after": 4}), out, resume=True) is None
    assert run(cfg.model_copy(update={"stop_after": done + 4}), tmp_path / "straight") is None
    a, b = read_csv(tmp_path / "straight" / "metrics.csv"), read_csv(out / "metrics.csv")
    assert [r["update"] for r in b] == list(range(done + 4)) == [r["update"] for r in a]
    assert [r["loss"] for r in a] == [r["loss"] for r in b]


def test_reference_is_the_base_model_with_the_adapter_disabled(world, tiny_dir, tmp_path):
    from peft import PeftModel  # noqa: F401  (peft is what disable_adapter comes from)

    t = DPOTrainer(dpo_cfg(world, tiny_dir, lora__enabled=True, lora__r=4, lora__alpha=8), tmp_path / "ref")
    t.setup()
    pairs = t.all_pairs[:3]
    before = t.reference_logps(pairs)
    assert torch.allclose(before, t.ref[:3], atol=1e-3)           # the table of setup (other padding, same values)
    with torch.no_grad():                                         # a trained adapter: B no longer zero
        for n, p in t.model.named_parameters():
            if "lora_B" in n:
                p.add_(torch.randn_like(p) * 0.5)
    moved = t.pair_metrics(pairs)
    assert abs(moved["margin"] - moved["ref_margin"]) > 1e-3       # the policy moved ...
    assert torch.equal(t.reference_logps(pairs), before)           # ... the reference did not


def start_adapter(model_dir, out, r: int = 4):
    """A trained-looking LoRA adapter on ``model_dir`` (B moved off zero), as an SFT run would leave it."""
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM

    torch.manual_seed(1)
    m = get_peft_model(AutoModelForCausalLM.from_pretrained(str(model_dir)),
                       LoraConfig(r=r, lora_alpha=2 * r, target_modules="all-linear", task_type="CAUSAL_LM"))
    with torch.no_grad():
        for n, p in m.named_parameters():
            if "lora_B" in n:
                p.add_(torch.randn_like(p) * 0.5)
    m.save_pretrained(out)
    return out


def test_dpo_from_a_start_adapter_has_that_adapter_as_its_reference(world, tiny_dir, tmp_path):
    from safetensors.torch import load_file

    from hpd.methods.dpo import FROM_SFT_ADAPTER, NO_SFT_FIRST
    from hpd.train.trainer import TrainError

    sft = start_adapter(tiny_dir, tmp_path / "sft")
    cfg = dpo_cfg(world, tiny_dir, lora__enabled=True, lora__r=8, model__adapter=str(sft), updates=2)
    t = DPOTrainer(cfg, tmp_path / "from-sft")
    t.setup()
    pairs = t.all_pairs[:4]
    start = t.pair_metrics(pairs)                                   # before any update the policy IS the reference
    assert start["margin"] == pytest.approx(start["ref_margin"], abs=1e-3)
    assert abs(start["chosen_reward"]) < 1e-4 and abs(start["rejected_reward"]) < 1e-4
    with torch.no_grad(), t.accelerator.unwrap_model(t.model).disable_adapter():
        base = torch.cat([torch.stack(pair_logps_of(t, [p])) for p in pairs], 1).T
    assert not torch.allclose(base, t.ref[[p.index for p in pairs]], atol=1e-2)   # not the base model's

    out = run(cfg, tmp_path / "run")
    saved = load_file(out / "adapter_model.safetensors")
    first = load_file(sft / "adapter_model.safetensors")
    assert {k: v.shape for k, v in saved.items()} == {k: v.shape for k, v in first.items()}   # r 4, not 8
    assert any(not torch.equal(saved[k], first[k]) for k in first)                           # trained further
    man = json.loads((tmp_path / "run" / "manifest.json").read_text())
    assert man["config"]["model"]["adapter"] == str(sft)
    assert FROM_SFT_ADAPTER in man["departures_from_paper"] and NO_SFT_FIRST not in man["departures_from_paper"]
    assert abs(read_csv(tmp_path / "run" / "metrics.csv")[0]["loss"] - math.log(2)) < 1e-3   # policy = reference

    for bad, want in ((tmp_path / "nope", "no adapter_config.json"), (sft, "cannot continue a LoRA adapter")):
        over = {"model__adapter": str(bad)} | ({"lora__enabled": False} if bad == sft else {"lora__enabled": True})
        with pytest.raises(TrainError, match=want):
            DPOTrainer(dpo_cfg(world, tiny_dir, **over), tmp_path / f"bad-{bad.name}").setup()


def pair_logps_of(t, group):
    from hpd.methods.dpo import pair_logps

    return pair_logps(t.model, group, t.mode, t.device, t.pad_id)


# ------------------------------------------------------------------------------------------ the command
def test_hpd_train_method_dpo_runs_resumes_and_fails_in_one_line(world, tiny_dir, tmp_path):
    from hpd.cli import app
    from hpd.runfolder import validate_manifest

    out = tmp_path / "cli"
    args = ["train", "--method", "dpo", "--config", CONFIG, "--out", str(out), f"data.teach={world.teach}",
            f"model.path={tiny_dir}", "updates=3", "batch.global_batch=4", "checkpoint.every=1",
            "logging.progress=false", "logging.tensorboard=false", "logging.probe_examples=2"]
    r = CliRunner().invoke(app, args + ["stop_after=1"])
    assert r.exit_code == 0, r.output
    r = CliRunner().invoke(app, args + ["--resume"])
    assert r.exit_code == 0, r.output
    assert f"dpo: {out / 'model'}" in r.output
    assert [x["update"] for x in read_csv(out / "metrics.csv")] == [0, 1, 2]
    man = json.loads((out / "manifest.json").read_text())
    assert validate_manifest(man) == [] and man["status"] == "complete" and man["config"]["dpo"]["beta"] == 0.1
    assert man["inputs"]["teach"]["sha256"] and man["departures_from_paper"]
    pairs, metrics = (json.loads((out / f).read_text()) for f in ("pairs.json", "metrics.json"))
    assert pairs["n_pairs"] == metrics["pairs"]["n_pairs"] == len(pairs["pairs"]) > 0
    assert 0.1 < metrics["peak_gb"] == max(float(x["peak_gb"]) for x in read_csv(out / "metrics.csv")) < 64
    assert sum(pairs["unpaired"].values()) + pairs["n_boundaries_paired"] == pairs["n_boundaries"]

    bad = tmp_path / "bad"
    shutil.copytree(world.teach, bad)
    part = sorted((bad / "shards").glob("part-*.jsonl"))[0]
    rec = json.loads(part.read_text().splitlines()[0])
    del rec["candidates"]
    part.write_text(json.dumps(rec) + "\n")
    for teach_dir, want in ((bad, "record 1 ("), (tmp_path / "missing", "teach folder not found")):
        r = CliRunner().invoke(app, args[:6] + [str(tmp_path / "o2"), f"data.teach={teach_dir}"] + args[8:])
        assert r.exit_code == 2 and "Traceback" not in r.output and want in r.output, r.output
        assert len([ln for ln in r.output.splitlines() if ln.startswith("error:")]) == 1
    r = CliRunner().invoke(app, ["train", "--method", "dpo", "--config", CONFIG, "--out", str(tmp_path / "o3"),
                                 "dpo.beta=-1"])
    assert r.exit_code == 2 and "dpo.beta" in r.output and "Traceback" not in r.output
