"""Why HPD's episodes end at the turn limit: do they loop on one call? Reads the evaluation transcripts of a study's
run folders (the registry keeps slim per-task rows, not messages), for each seed folder and variant that still has
them, and prints per variant: episodes, those at the turn limit, those of them that repeat an identical tool call
(same name, same arguments), all episodes with such a repeat, tool results, the share of them that are errors, and
the repeated calls whose earlier twin got an error result or a success.

    python docs/experiments/2026-12-04-issue35-study/transcript_loops.py ~/hpd-runs/study/main/defects-0.12
    python docs/experiments/2026-12-04-issue35-study/transcript_loops.py docs/experiments/2026-12-04-issue35-study/*-episodes.jsonl.gz
"""

import gzip
import json
import sys
from pathlib import Path


def tool_calls(row: dict) -> list[dict]:
    """Every tool call of a Pi transcript, in order (assistant content items of type toolCall)."""
    return [c for m in row["messages"] if m.get("role") == "assistant" and isinstance(m.get("content"), list)
            for c in m["content"] if c.get("type") == "toolCall"]


def call_key(c: dict) -> tuple[str, str]:
    """A call's name and canonical arguments: two calls with equal keys are the same call."""
    return c["name"], json.dumps(c.get("arguments"), sort_keys=True)


def is_error(m: dict) -> bool:
    """A tool result that failed: flagged isError, or an "error" key early in its content."""
    return bool(m.get("isError")) or '"error"' in json.dumps(m.get("content"))[:200]


def calls(row: dict) -> list[tuple[str, str]]:
    """(name, canonical arguments) of every tool call in a Pi transcript (assistant content items of type toolCall)."""
    return [call_key(c) for c in tool_calls(row)]


def repeats(row: dict) -> bool:
    cs = calls(row)
    return len(cs) != len(set(cs))


def errors(row: dict) -> tuple[int, int]:
    res = [m for m in row["messages"] if m.get("role") == "toolResult"]
    return len(res), sum(map(is_error, res))


def repeats_after(row: dict) -> tuple[int, int]:
    """Repeated calls (a name and arguments seen earlier in the episode), split by whether that earlier call's
    result was an error: (after an error, after a success)."""
    failed = {m.get("toolCallId"): is_error(m) for m in row["messages"] if m.get("role") == "toolResult"}
    seen, out = {}, [0, 0]
    for c in tool_calls(row):
        key = call_key(c)
        if key in seen:
            out[0 if seen[key] else 1] += 1
        seen[key] = failed.get(c.get("id"), False)
    return out[0], out[1]


def shards(arg: Path) -> list[tuple[str, str, Path]]:
    """(seed, variant, file): a study's rate folder (its seeds' evaluation shards), or committed episode files
    (``<variant>-...-<seed>-episodes.jsonl.gz`` beside this script)."""
    if arg.is_dir():
        return [(s.parts[-5], s.parts[-3], s) for s in sorted(arg.glob("seed-*/eval/*/shards/part-*.jsonl"))]
    return [("-", arg.name.split("-episodes")[0], arg)]


def main(args: list[Path]) -> None:
    print("seed variant episodes at_limit at_limit_repeating repeating tool_results error_share "
          "repeats_after_error repeats_after_success")
    for seed, variant, shard in (x for a in args for x in shards(a)):
        with (gzip.open(shard, "rt") if shard.suffix == ".gz" else shard.open()) as f:
            rows = [json.loads(line) for line in f]
        if not rows or "messages" not in rows[0]:
            continue
        limit = [r for r in rows if r.get("end_reason") == "max_turns"]
        n, e = map(sum, zip(*(errors(r) for r in rows)))
        after_err, after_ok = map(sum, zip(*(repeats_after(r) for r in rows)))
        print(seed, variant, len(rows), len(limit), sum(map(repeats, limit)),
              sum(map(repeats, rows)), n, round(e / max(n, 1), 3), after_err, after_ok)


if __name__ == "__main__":
    main([Path(a) for a in sys.argv[1:]])
