"""The model card (``README.md`` in the Hugging Face format) of an ``hpd export`` folder.

Front matter (YAML): ``license``, ``base_model``, ``library_name: transformers``, ``pipeline_tag:
text-generation``, ``tags`` and, when an evaluation is given, a ``model-index`` entry with one metric per
score of ``metrics.json`` (``TS``, ``F1``, ``Step-SR``, ``RC``, ``Exact``, ``Action-Acc``). Values are
written as JSON, which is YAML.

Body: intended use; the tool protocol (the chat template's ``<tools>`` block, ``<tool_call>`` JSON,
``<tool_response>`` results, optional ``<think>``) and how to run the model in Pi through ``hpd serve``;
training data and recipe read from the training manifest (what ``hpd train`` writes next to the adapter:
records and their checksum, record count, LoRA, optimiser, schedule, views, seed, code version; a card
without one says so); the metric table read from the evaluation's ``metrics.json`` (``hpd eval``), with
``n_tasks``/``n_boundaries`` and the split; limitations; license.

A ``metrics.json`` whose score is neither a number in [0, 1] nor null is an error naming the file and key.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

SCORES = ("TS", "F1", "Step-SR", "RC", "Exact", "Action-Acc")
SCORE_NAMES = {"TS": "Task success", "F1": "Tool-call F1", "Step-SR": "Step success rate", "RC": "Reference coverage",
               "Exact": "Exact trajectory match", "Action-Acc": "Next-action accuracy"}


class ExportError(ValueError):
    """A one-line reason the export cannot run (a missing folder, an unreadable manifest, a bad metrics.json)."""


@dataclass
class CardInputs:
    model: Path
    adapter: Path | None
    out: Path
    name: str
    license: str | None = None
    training: dict | None = None
    training_path: Path | None = None
    metrics: dict | None = None
    metrics_path: Path | None = None
    eval_manifest: dict | None = None


def _j(v: Any) -> str:
    return json.dumps(v, ensure_ascii=False)


def check_metrics(metrics: Any, path: Path | None) -> dict:
    """The scores of an ``hpd eval`` ``metrics.json`` (a one-line :class:`ExportError` naming file and key)."""
    if not isinstance(metrics, dict):
        raise ExportError(f"{path}: metrics.json is not a JSON object")
    if not any(k in metrics for k in SCORES):
        raise ExportError(f"{path}: none of {', '.join(SCORES)} in metrics.json (is it an hpd eval output?)")
    for k in SCORES:
        v = metrics.get(k)
        if v is not None and (isinstance(v, bool) or not isinstance(v, (int, float)) or not 0 <= v <= 1):
            raise ExportError(f"{path}: '{k}' is {_j(v)}, not a fraction in [0, 1] or null")
    return metrics


def base_license(model: Path) -> str | None:
    """``license:`` from the base model's own card front matter, if it has one."""
    readme = model / "README.md"
    if not readme.is_file():
        return None
    lines = readme.read_text(encoding="utf-8", errors="replace").splitlines()
    if not lines or lines[0].strip() != "---":
        return None
    for line in lines[1:]:
        if line.strip() == "---":
            return None
        if line.startswith("license:"):
            return line.split(":", 1)[1].strip().strip("\"'") or None
    return None


def base_name(c: CardInputs) -> str:
    """The base model's id: ``base_model`` from the training manifest's inputs, else the folder name."""
    return Path(str(((c.training or {}).get("inputs") or {}).get("base_model", {}).get("path") or c.model)).name


# ------------------------------------------------------------------------------------------ front matter
def front_matter(c: CardInputs, license_id: str) -> str:
    lines = ["---", f"license: {_j(license_id)}", f"base_model: {_j(base_name(c))}", "library_name: transformers",
             "pipeline_tag: text-generation",
             "tags: " + _j(["hpd", "pi-agent", "tool-calling", "agent"] + (["lora", "merged"] if c.adapter else []))]
    if c.metrics is not None:
        split = c.metrics.get("split") or "test"
        results = [{"task": {"type": "text-generation", "name": "Tool-using agent in the Pi harness"},
                    "dataset": {"name": _dataset(c), "type": _dataset(c), "split": split},
                    "metrics": [{"type": k, "name": SCORE_NAMES[k], "value": c.metrics[k]}
                                for k in SCORES if c.metrics.get(k) is not None]}]
        lines.append("model-index: " + _j([{"name": c.name, "results": results}]))
    return "\n".join(lines + ["---", ""])


def _dataset(c: CardInputs) -> str:
    data = (((c.eval_manifest or {}).get("inputs") or {}).get("data") or {}).get("path")
    return Path(data).name if data else "TRAJECT-Bench"


# ------------------------------------------------------------------------------------------ body
def intro(c: CardInputs) -> str:
    what = (f"`{base_name(c)}` with the hpd LoRA adapter (`adapter/`) merged into its weights"
            if c.adapter else f"`{base_name(c)}` as exported by hpd (no adapter)")
    return (f"# {c.name}\n\n{what}. It is a tool-using agent policy trained by hpd (Harness Policy "
            "Distillation) to act inside the Pi agent harness (`@earendil-works/pi-agent-core`) with the "
            "model's native tool protocol.\n\nThe folder is a plain Hugging Face model: `transformers`, "
            "`hpd serve --model .` and `hpd eval --model .` load it like any base model. "
            + ("The unmerged adapter is in `adapter/` (`--model BASE --adapter adapter/` gives the same greedy "
               "outputs).\n" if c.adapter else "\n"))


INTENDED_USE = """## Intended use

- The policy of a tool-using agent run by the Pi harness: at each model call it receives the system prompt,
  the declared tools and the conversation so far (tool results included), and answers with tool calls or a
  final answer.
- Research on harness-aware distillation (hpd's T, I and R views) and on tool-use evaluation.

Out of scope: open-ended chat without tools, safety-critical decisions, tools whose effects cannot be
undone without a human in the loop, and languages or domains far from its training data.
"""

PROTOCOL = """## Tool protocol

The chat template (`chat_template.jinja`, Qwen3 style) declares the tools in the system turn inside
`<tools></tools>` as JSON function signatures. The model calls a tool by writing

```
<tool_call>
{"name": "<function-name>", "arguments": {<args-json-object>}}
</tool_call>
```

(one block per call; several calls in one turn are a parallel batch) and ends its turn with `<|im_end|>`.
Tool results come back in `<tool_response>` blocks; a turn without a tool call is the final answer. With
thinking on, reasoning goes in `<think>...</think>` before the answer. Pi validates every call's arguments
against the tool's JSON Schema and returns a validation error as the tool result.
"""


def run_in_pi(c: CardInputs) -> str:
    return f"""## How to run it

Serve it with the OpenAI-compatible server (batches concurrent requests; `--api-key` to require a key):

```
hpd serve --model {c.out.name} --name {c.name} --port 8000 --max-tokens 1024
```

In Pi, use the `openai-completions` API with a model entry such as

```json
{{"id": "{c.name}", "api": "openai-completions", "provider": "hpd", "baseUrl": "http://127.0.0.1:8000/v1",
 "reasoning": false, "input": ["text"], "contextWindow": 32768, "maxTokens": 1024,
 "compat": {{"supportsDeveloperRole": false, "thinkingFormat": "qwen-chat-template"}}}}
```

(`maxTokens` at most the server's `--max-tokens`; `supportsDeveloperRole: false` keeps the system prompt
in a `system` message the template knows). `hpd serve` parses `<tool_call>` blocks into OpenAI
`tool_calls`, so Pi executes them natively. Evaluate it inside the harness with
`hpd eval --model {c.out.name} --out EVAL`; load it in Python with
`AutoModelForCausalLM.from_pretrained("{c.out.name}")` and `AutoTokenizer.from_pretrained("{c.out.name}")`.
"""


def training(c: CardInputs) -> str:
    head = "## Training data and recipe\n\n"
    if c.adapter is None:
        return head + "No adapter was exported: this is the base model as it is.\n"
    m = c.training
    if m is None:
        return head + ("No training manifest (`manifest.json`, as `hpd train` writes it) was found in the "
                       "adapter folder or its parent, so the data and recipe are not recorded here.\n")
    cfg = m.get("config") or {}
    rows = [("Training manifest", f"`{c.training_path}`"), ("Command", m.get("command")),
            ("Records", _input(m, "records")), ("Records used", m.get("n_records")),
            ("Base model", _input(m, "base_model")), ("Target source", (m.get("views") or {}).get("target_source")),
            ("Document privilege", (m.get("views") or {}).get("document_privilege")),
            ("Updates per view", m.get("updates_per_view")), ("LoRA", cfg.get("lora")), ("Optimiser", cfg.get("optim")),
            ("Batch", cfg.get("batch")), ("Schedule", cfg.get("schedule") or m.get("schedule")),
            ("Seed", m.get("seed")), ("hpd version", m.get("code_version")), ("Status", m.get("status"))]
    table = "\n".join(f"| {k} | {_cell(v)} |" for k, v in rows if v is not None)
    return head + "| | |\n|---|---|\n" + table + "\n"


def _input(m: dict, key: str) -> str | None:
    e = (m.get("inputs") or {}).get(key)
    if not isinstance(e, dict):
        return None
    sha = e.get("sha256")
    return f"`{e.get('path')}`" + (f" (sha256 `{sha[:16]}`)" if sha else "")


def _cell(v: Any) -> str:
    s = v if isinstance(v, str) else f"`{json.dumps(v, ensure_ascii=False)}`"
    return s.replace("|", "\\|").replace("\n", " ")


def evaluation(c: CardInputs) -> str:
    head = "## Evaluation\n\n"
    if c.metrics is None:
        return head + "Not evaluated here: export with `--eval DIR` (an `hpd eval` output folder) to add the table.\n"
    m = c.metrics
    cols = [k for k in SCORES if k in m]
    cells = [f"{m[k]:.3f}" if m[k] is not None else "n/a" for k in cols]
    note = (f"From `{c.metrics_path}`: {m.get('n_tasks', '?')} tasks, {m.get('n_boundaries', '?')} boundaries for "
            f"Action-Acc, split `{m.get('split') or 'n/a'}`, data `{_dataset(c)}`. Definitions: hpd's "
            "`docs/metrics.md`.\n")
    return (head + "| " + " | ".join(cols) + " |\n|" + "---|" * len(cols) + "\n| " + " | ".join(cells) + " |\n\n"
            + note)


LIMITATIONS = """## Limitations

- Trained and scored on the tool catalogues and task styles of its training data; unseen tools, long
  multi-step tasks and other harnesses may score lower than the table says.
- The metric table comes from replayed tool outputs, not live APIs.
- It can call tools with wrong arguments or stop early; keep a human in the loop for consequential actions.
- `hpd serve` streams a finished completion in pieces (no token-by-token streaming).
"""


def license_section(license_id: str, c: CardInputs) -> str:
    return (f"## License\n\n`{license_id}`. The weights derive from `{base_name(c)}`: its license and terms "
            "apply to this model too.\n")


def model_card(c: CardInputs) -> str:
    """The whole ``README.md`` (module doc)."""
    if c.metrics is not None:
        check_metrics(c.metrics, c.metrics_path)
    license_id = c.license or base_license(c.model) or "other"
    parts = [front_matter(c, license_id), intro(c), INTENDED_USE, PROTOCOL, run_in_pi(c), training(c),
             evaluation(c), LIMITATIONS, license_section(license_id, c)]
    return "\n".join(parts)
