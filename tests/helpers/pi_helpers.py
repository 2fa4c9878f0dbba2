"""Real-Pi test material: the bridge check and the transcript comparison of Python-harness vs real-Pi runs."""

from __future__ import annotations

import os
import shutil

import pytest

# Fields Pi fills from the wire or the clock, not from the model's action: what a transcript comparison ignores.
METADATA = {"timestamp", "durationMs", "usage", "api", "provider", "model", "responseId", "rawStopReason",
            "thinkingLevel"}


def bridge_or_fail() -> None:
    """Node and the bridge packages: a missing ``node`` skips locally and fails when ``CI`` is set; missing
    bridge packages always fail (``make bridge``)."""
    if shutil.which("node") is None:
        reason = "node is not installed; the real-Pi tests need Node >= 20 and `make bridge`"
        if os.environ.get("CI"):
            pytest.fail(f"{reason} (CI is set)", pytrace=False)
        pytest.skip(reason)
    from hpd.harness.bridge import check_bridge

    check_bridge()


def normalized(messages: list[dict]) -> list[dict]:
    """A transcript without :data:`METADATA`, tool-call ids replaced by their order in the episode (the Python
    policy names them ``call_t<turn>_<k>``, ``hpd serve`` ``call_<request>_<choice>_<k>``); every other field
    is kept, so a new or different field shows up as a difference."""
    ids: dict[str, str] = {}
    out = []
    for m in messages:
        n = {k: v for k, v in m.items() if k not in METADATA}
        if m.get("role") == "assistant":
            blocks = []
            for b in m.get("content") or []:
                if b.get("type") == "toolCall":
                    ids.setdefault(b["id"], f"#{len(ids)}")
                    b = {**b, "id": ids[b["id"]]}
                blocks.append(b)
            n["content"] = blocks
        if m.get("role") == "toolResult":
            n["toolCallId"] = ids.get(m["toolCallId"], "unknown:" + str(m["toolCallId"]))
        out.append(n)
    return out
