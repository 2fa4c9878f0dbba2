"""A TRAJECT-layout folder of one-call tasks for the RL smoke runs, and the SFT start they learn from.

Every task asks, in its own words, to look up ``alpha``: the reference calls ``Keys: lookup(key="alpha")`` once
and then answers ``Done: value-for-alpha.``. The start (:func:`sft_start`) is the tiny model fine-tuned on those
reference turns AND, for every first turn, on a premature finish (``I do not know.``, like the built-in benchmark's
``premature_finish`` defect), so at temperature 1 it calls the tool in about half of the episodes and gives up in
the rest. Reward can rise by unlearning the premature finish: calling scores TS 1 (R = 1.2 with the default
weights), giving up scores TS 0 with a valid finish (R = 0.2). Completions are short (~30 tokens), so updates take
about a second on one CPU thread."""

from __future__ import annotations

import json
from pathlib import Path

QUERIES = ("Look up alpha.", "Please look up alpha.", "Find alpha for me.", "What is stored under alpha?")
GIVE_UP = "I do not know."


def _tool() -> dict:
    return {"parent tool name": "Keys", "parent tool description": "Key-value store.", "tool name": "Keys: lookup",
            "tool description": "Look up a key.", "API name": "lookup", "domain name": "Keys",
            "required_parameters": [{"name": "key", "type": "STRING", "description": "The key.", "default": ""}],
            "optional_parameters": [], "code": "", "output_info": {}, "connected tools": []}


def task(query: str, key: str = "alpha") -> dict:
    step = {"tool name": "Keys: lookup", "tool description": "Look up a key.",
            "required parameters": [{"name": "key", "value": key}], "optional parameters": [],
            "executed_output": f"value-for-{key}"}
    return {"query": query, "tool list": [step], "tool count": 1, "trajectory_type": "parallel",
            "final_answer": f"Done: value-for-{key}."}


def keys_bench(root: Path, queries=QUERIES) -> Path:
    """Write the folder under ``root`` (one tool in the catalog, one task per query) and return it."""
    d = Path(root)
    (d / "tools").mkdir(parents=True, exist_ok=True)
    (d / "parallel" / "Keys").mkdir(parents=True, exist_ok=True)
    (d / "tools" / "Keys_tool.json").write_text(json.dumps([_tool()]))
    (d / "parallel" / "Keys" / "simple_ver.json").write_text(json.dumps([task(q) for q in queries]))
    return d


def split_file(d: Path) -> Path:
    """A split file naming every task of the folder ``train``."""
    uids = [f"parallel/Keys/simple_ver.json#{i}" for i in range(len(QUERIES))]
    p = Path(d) / "split.json"
    p.write_text(json.dumps({"train": uids}))
    return p


def sft_pairs(bench, tok, pool_k: int = 5) -> list[tuple[str, str]]:
    """(prompt, completion) texts: each reference turn of each task, plus a premature finish at each first turn.
    Prompts come from the harness contexts RL rolls out in (same system prompt, pool and renderer)."""
    from hpd.bench.episode import start_episode
    from hpd.eval.reference import reference_actions
    from hpd.harness.messages import assistant_message, text
    from hpd.policy import chat

    pairs = []
    for t in bench.tasks:
        st = start_episode(t, bench, env_kwargs={"k": pool_k})
        pairs.append((chat.render_prompt(tok, st.harness.context()),
                      chat.render_action(tok, assistant_message([text(GIVE_UP)]))))
        for a in reference_actions(t, st.env.pool):
            pairs.append((chat.render_prompt(tok, st.harness.context()), chat.render_action(tok, a)))
            st.harness.step(a)
    return pairs


def sft_start(out: Path, bench, steps: int = 300) -> Path:
    """The SFT start: the tiny xs model (seed 0) fine-tuned on :func:`sft_pairs` (``hpd.policy.tiny.sft_tiny``)."""
    from transformers import AutoTokenizer

    from hpd.policy.tiny import build_tiny, sft_tiny

    d = build_tiny(out, size="xs", seed=0)
    sft_tiny(d, sft_pairs(bench, AutoTokenizer.from_pretrained(d)), steps=steps, lr=3e-3, batch_size=4, seed=0)
    return d
