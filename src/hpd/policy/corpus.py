"""Text for training the tiny tokenizer: a deterministic built-in corpus, or text read from a data folder.

The built-in corpus (:func:`builtin_corpus`) is synthetic and fixed (its own RNG seed, independent of
the model seed): tool catalogues and multi-turn tool-call chats rendered with the Qwen3 chat template
(both thinking modes), so the tokenizer learns the template's structure (``<|im_start|>``, JSON,
``<tool_call>``...), plus short English-like sentences. :func:`data_texts` extracts the string
leaves of every ``*.json``/``*.jsonl`` file under a folder (sorted, capped per file) — for
TRAJECT-Bench that is queries, tool descriptions and recorded outputs.
"""

from __future__ import annotations

import json
import random
from functools import lru_cache
from pathlib import Path
from typing import Iterator

from transformers.utils.chat_template_utils import render_jinja_template

WORDS = (
    "the a of to and in is for on with as by at from that this it be are was or an which can not have "
    "search find get list create update delete book flight hotel city weather forecast temperature price "
    "stock market news article music song artist album playlist email message send inbox calendar event "
    "date time location map route distance travel trip restaurant order product cart payment account user "
    "id name query result results total number value amount currency rate code status error success data "
    "information details report summary answer question tool call function arguments response request "
    "please need want show me my your what when where how many first next last best top new open close "
    "check compare convert recommend schedule track cancel return available courses student grade school"
).split()
DOMAINS = ("weather", "travel", "music", "finance", "email", "mapping", "education", "ecommerce", "news")
VERBS = ("get", "search", "list", "find", "create", "update", "fetch", "lookup", "compute", "check")
PARAM_TYPES = ("string", "integer", "number", "boolean")

#: Fixed seed of the built-in corpus (the tokenizer does not depend on the model seed).
CORPUS_SEED = 1234


def _sentence(rng: random.Random, lo: int = 4, hi: int = 14) -> str:
    words = [rng.choice(WORDS) for _ in range(rng.randint(lo, hi))]
    s = " ".join(words)
    return s[0].upper() + s[1:] + rng.choice((".", ".", "?", "!"))


def _value(rng: random.Random, typ: str):
    if typ == "integer":
        return rng.randint(0, 5000)
    if typ == "number":
        return round(rng.uniform(-100, 1000), rng.randint(0, 3))
    if typ == "boolean":
        return rng.random() < 0.5
    return " ".join(rng.choice(WORDS) for _ in range(rng.randint(1, 3)))


def _tool(rng: random.Random) -> dict:
    name = f"{rng.choice(VERBS)}_{rng.choice(DOMAINS)}_{rng.choice(WORDS)}"
    props, required = {}, []
    for _ in range(rng.randint(1, 4)):
        p = rng.choice(WORDS) + rng.choice(("", "_id", "_name", "_date", "_count"))
        typ = rng.choice(PARAM_TYPES)
        props[p] = {"type": typ, "description": _sentence(rng, 3, 8)}
        if rng.random() < 0.6:
            required.append(p)
    params = {"type": "object", "properties": props, "required": required}
    return {"type": "function", "function": {"name": name, "description": _sentence(rng), "parameters": params}}


def _chat(rng: random.Random) -> tuple[list[dict], list[dict]]:
    tools = [_tool(rng) for _ in range(rng.randint(1, 4))]
    msgs: list[dict] = []
    if rng.random() < 0.8:
        msgs.append({"role": "system", "content": _sentence(rng, 6, 20)})
    msgs.append({"role": "user", "content": _sentence(rng, 5, 20)})
    for _ in range(rng.randint(0, 3)):
        calls = []
        for _ in range(rng.randint(1, 3)):
            fn = rng.choice(tools)["function"]
            args = {k: _value(rng, v["type"]) for k, v in fn["parameters"]["properties"].items() if rng.random() < 0.8}
            calls.append({"type": "function", "function": {"name": fn["name"], "arguments": args}})
        content = _sentence(rng) if rng.random() < 0.3 else ""
        msgs.append({"role": "assistant", "content": content, "tool_calls": calls})
        for _ in calls:
            out = {rng.choice(WORDS): _value(rng, rng.choice(PARAM_TYPES)) for _ in range(rng.randint(1, 5))}
            text = json.dumps(out) if rng.random() < 0.7 else _sentence(rng)
            msgs.append({"role": "tool", "content": text})
    msgs.append({"role": "assistant", "content": " ".join(_sentence(rng) for _ in range(rng.randint(1, 3)))})
    return msgs, tools


def builtin_corpus(n_chats: int = 800, seed: int = CORPUS_SEED, chat_template: str | None = None) -> list[str]:
    """Deterministic synthetic corpus: ``n_chats`` rendered tool chats + as many plain sentences."""
    if chat_template is None:
        from trl.chat_template_utils import qwen3_chat_template as chat_template
    return list(_builtin_corpus(n_chats, seed, chat_template))


@lru_cache(maxsize=4)
def _builtin_corpus(n_chats: int, seed: int, chat_template: str) -> tuple[str, ...]:
    rng = random.Random(seed)
    texts: list[str] = []
    for i in range(n_chats):
        msgs, tools = _chat(rng)
        rendered, _ = render_jinja_template(
            conversations=[msgs], tools=tools, chat_template=chat_template,
            add_generation_prompt=False, enable_thinking=bool(i % 2),
        )
        texts.append(rendered[0])
        texts.append(" ".join(_sentence(rng) for _ in range(rng.randint(1, 6))))
    return tuple(texts)


def _strings(obj, out: list[str]) -> None:
    if isinstance(obj, str):
        if obj.strip():
            out.append(obj)
    elif isinstance(obj, dict):
        for k, v in obj.items():
            _strings(k, out)
            _strings(v, out)
    elif isinstance(obj, list):
        for v in obj:
            _strings(v, out)


def _file_records(path: Path) -> Iterator:
    if path.suffix == ".jsonl":
        with path.open(encoding="utf-8", errors="replace") as fh:
            for line in fh:
                line = line.strip()
                if line:
                    try:
                        yield json.loads(line)
                    except ValueError:
                        yield line
    else:
        try:
            yield json.loads(path.read_text(encoding="utf-8", errors="replace"))
        except ValueError:
            yield path.read_text(encoding="utf-8", errors="replace")


def data_texts(data_dir: str | Path, max_chars: int = 4_000_000) -> list[str]:
    """String leaves of every ``*.json``/``*.jsonl`` file under ``data_dir`` (sorted; ``max_chars`` in all,
    split evenly over the files so every domain contributes)."""
    root = Path(data_dir)
    files = sorted(p for p in root.rglob("*") if p.is_file() and p.suffix in (".json", ".jsonl"))
    if not files:
        raise ValueError(f"no .json/.jsonl files under {root}")
    per_file = max(1, max_chars // len(files))
    texts: list[str] = []
    for f in files:
        got = 0
        leaves: list[str] = []
        total = 0
        for rec in _file_records(f):
            before = len(leaves)
            _strings(rec, leaves)
            total += sum(len(s) for s in leaves[before:])
            if total > per_file:
                break
        for s in leaves:
            if got >= per_file:
                break
            s = s[: per_file - got]
            texts.append(s)
            got += len(s)
    return texts
