"""Did DPO lower the chosen completions too? The implicit rewards of a finished DPO run, split into chosen and
rejected (``hpd.methods.dpo.pair_figures``), on the run's probe pairs and on a sample of its other training pairs.

    python docs/experiments/2026-12-04-issue35-study/dpo_rewards.py RUN_DIR [N_SAMPLE] [--out FILE]

RUN_DIR is a finished ``hpd train --method dpo`` folder (its manifest's config, ``reference_logps.pt`` and its last
checkpoint are read; nothing in it is written: the trainer writes into a scratch folder). The probe's figures must
equal the run's ``metrics.json`` ``probe_final`` (a check that this is the trained policy), and the script says so.
Prints one JSON: per set, ``pair_figures`` plus the mean change of the summed log-probs and per completion token.
"""
import contextlib
import json
import os
import random
import sys
import tempfile
from pathlib import Path

import torch

from hpd.methods.dpo import Config, DPOTrainer, pair_figures, pair_groups, pair_logps
from hpd.train.checkpoint import list_checkpoints, load_checkpoint


def trained(run: Path, scratch: Path) -> DPOTrainer:
    cfg = Config.model_validate(json.loads((run / "manifest.json").read_text())["config"])
    tr = DPOTrainer(cfg, scratch)
    tr._setup_accelerator()
    tr.load_data()
    tr._setup_model()
    tr.out = run                                   # the saved reference table (read only)
    tr.ref = tr.cached_reference()
    tr.out = scratch
    load_checkpoint(list_checkpoints(run / "checkpoints")[-1], accelerator=tr.accelerator, model=tr.model,
                    optimizer=tr.optimizer, scheduler=tr.scheduler)
    tr.model.eval()
    return tr


@torch.no_grad()
def figures(tr: DPOTrainer, pairs: list) -> dict:
    cols = [[], [], [], []]
    for g in pair_groups(pairs, tr.mode, tr.budget):
        for col, x in zip(cols, (*pair_logps(tr.model, g, tr.mode, tr.device, tr.pad_id), *tr._ref(g))):
            col.append(x.float().cpu())
    pc, pr, rc, rr = (torch.cat(c).double() for c in cols)
    nc = torch.tensor([len(p.chosen.completion_ids) for p in pairs], dtype=torch.float64)
    nr = torch.tensor([len(p.rejected.completion_ids) for p in pairs], dtype=torch.float64)
    f = pair_figures(pc, pr, rc, rr, beta=tr.beta)
    f.update(first_tokens(tr, pairs))
    f.update(chosen_logp_change=float((pc - rc).mean()), rejected_logp_change=float((pr - rr).mean()),
             chosen_logp_change_per_token=float(((pc - rc) / nc).mean()),
             rejected_logp_change_per_token=float(((pr - rr) / nr).mean()),
             share_chosen_lowered=float((pc < rc).double().mean()),
             chosen_prob_per_token_ref=float(torch.exp(rc / nc).mean()),
             chosen_prob_per_token_policy=float(torch.exp(pc / nc).mean()))
    return f


@torch.no_grad()
def first_tokens(tr: DPOTrainer, pairs: list) -> dict:
    """Where the chosen and rejected completions part: their shared first tokens (DPO's gradient on a token both
    completions share cancels: it is in logp(c) and in logp(r)), and the log-prob of the chosen completion's first
    token under the reference (adapter off) and the policy, with the text of the most common first tokens."""
    shared, ref_first, pol_first, heads = [], [], [], {}
    for p in pairs:
        c, r = list(p.chosen.completion_ids), list(p.rejected.completion_ids)
        shared.append(len(os.path.commonprefix([c, r])))
        ids = torch.tensor([list(p.chosen.prompt_ids) + c[:1]], device=tr.device)
        lp = []
        for off in (True, False):
            with tr.model.disable_adapter() if off else contextlib.nullcontext():
                logits = tr.model(input_ids=ids, use_cache=False, logits_to_keep=2).logits[0, 0].float()
            lp.append(float(torch.log_softmax(logits, -1)[c[0]]))
        ref_first.append(lp[0])
        pol_first.append(lp[1])
        head = tr.tokenizer.decode(c[:4])
        heads[head] = heads.get(head, 0) + 1
    n = len(pairs)
    return {"shared_prefix_tokens_mean": sum(shared) / n, "chosen_first_token_logp_ref": sum(ref_first) / n,
            "chosen_first_token_logp_policy": sum(pol_first) / n,
            "chosen_heads": dict(sorted(heads.items(), key=lambda kv: -kv[1])[:5])}


def openers(tr: DPOTrainer) -> dict:
    """Every pair by how its two completions open: a call (the rendered ``<tool_call>``'s first token) or text. A
    pair whose two sides open alike says nothing about calling at all (that token's gradient cancels); a text-chosen,
    call-rejected pair pushes the policy towards answering in text at that boundary."""
    call = tr.tokenizer.encode("<tool_call>", add_special_tokens=False)[0]
    counts: dict[str, int] = {}
    reasons: dict[str, int] = {}                  # the rejected side's reason codes of text-over-call pairs
    for p in tr.all_pairs:
        key = (f"chosen {'call' if p.chosen.completion_ids[0] == call else 'text'}, "
               f"rejected {'call' if p.rejected.completion_ids[0] == call else 'text'}")
        counts[key] = counts.get(key, 0) + 1
        if key == "chosen text, rejected call":
            for r in p.pair.reasons:
                reasons[r] = reasons.get(r, 0) + 1
    return {**dict(sorted(counts.items(), key=lambda kv: -kv[1])),
            "text_over_call_rejection_reasons": dict(sorted(reasons.items(), key=lambda kv: -kv[1]))}


def main(argv: list[str]) -> None:
    out = argv[argv.index("--out") + 1] if "--out" in argv else None
    args = [a for i, a in enumerate(argv) if a != "--out" and (i == 0 or argv[i - 1] != "--out")]
    run, n = Path(args[0]), int(args[1]) if len(args) > 1 else 48
    torch.set_num_threads(int(os.environ.get("OMP_NUM_THREADS", "1")))
    with tempfile.TemporaryDirectory() as scratch:
        tr = trained(run, Path(scratch))
        k = tr.cfg.logging.probe_examples
        probe, rest = tr.examples["T"][:k], tr.examples["T"][k:]
        sample = random.Random(0).sample(rest, min(n, len(rest)))
        res = {"run": str(run), "pairs_by_opening": openers(tr), "probe": figures(tr, probe),
               "sample": figures(tr, sample)}
    saved = json.loads((run / "metrics.json").read_text())["probe_final"]["train"]
    res["probe_matches_run"] = all(abs(res["probe"][key] - saved[key]) <= 1e-3 * max(1.0, abs(saved[key]))
                                   for key in ("loss", "margin", "reward_margin"))
    text = json.dumps(res, indent=1)
    print(text)
    if out:
        Path(out).write_text(text + "\n")


if __name__ == "__main__":
    main(sys.argv[1:])
