"""Why HPD's episodes end at the turn limit: do they loop on one call? Reads the evaluation transcripts of a study's
run folders (the registry keeps slim per-task rows, not messages), for each seed folder and variant that still has
them, and prints per variant: episodes, those at the turn limit, those of them that repeat an identical tool call
(same name, same arguments), all episodes with such a repeat, tool results, and the share of them that are errors.

    python docs/experiments/2026-12-04-issue35-study/transcript_loops.py ~/hpd-runs/study/main/defects-0.12
"""

import json
import sys
from pathlib import Path


def calls(row: dict) -> list[tuple[str, str]]:
    """(name, canonical arguments) of every tool call in a Pi transcript (assistant content items of type toolCall)."""
    return [(c["name"], json.dumps(c.get("arguments"), sort_keys=True)) for m in row["messages"]
            if m.get("role") == "assistant" and isinstance(m.get("content"), list)
            for c in m["content"] if c.get("type") == "toolCall"]


def repeats(row: dict) -> bool:
    cs = calls(row)
    return len(cs) != len(set(cs))


def errors(row: dict) -> tuple[int, int]:
    res = [m for m in row["messages"] if m.get("role") == "toolResult"]
    return len(res), sum(bool(m.get("isError")) or '"error"' in json.dumps(m.get("content"))[:200] for m in res)


def main(root: Path) -> None:
    print("seed variant episodes at_limit at_limit_repeating repeating tool_results error_share")
    for shard in sorted(root.glob("seed-*/eval/*/shards/part-*.jsonl")):
        rows = [json.loads(line) for line in shard.open()]
        if not rows or "messages" not in rows[0]:
            continue
        limit = [r for r in rows if r.get("end_reason") == "max_turns"]
        n, e = map(sum, zip(*(errors(r) for r in rows)))
        print(shard.parts[-5], shard.parts[-3], len(rows), len(limit), sum(map(repeats, limit)),
              sum(map(repeats, rows)), n, round(e / max(n, 1), 3))


if __name__ == "__main__":
    main(Path(sys.argv[1]))
