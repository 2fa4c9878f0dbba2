"""The real-Pi rollout mode: run one episode of the actual Pi agent loop (Node, pinned
``@earendil-works/pi-agent-core``) whose model is an OpenAI-compatible endpoint (e.g. ``hpd serve``),
reached through Pi's own ``openai-completions`` provider. Pi owns the lifecycle (request building,
streaming parse, tool lookup, argument validation, batching, termination); Python only answers tool
executions.

Needs Node and the bridge packages (``bridge/node_modules``, see :func:`hpd.harness.bridge.check_bridge`);
the script is ``pi_episode.mjs`` next to this file.
"""

from __future__ import annotations

import json
import subprocess
import threading
from pathlib import Path
from typing import Any, Callable

from hpd.harness.jsvalues import js_stringify   # what Node reads: JSON.stringify's numbers (NaN/Infinity -> null)

ToolHandler = Callable[[str, str, dict], dict]  # (name, tool_call_id, validated args) -> AgentToolResult dict


def run_pi_episode(base_url: str, *, prompts: list[str], tools: list[dict], tool_handler: ToolHandler,
                   system_prompt: str = "", model_id: str = "hpd", max_tokens: int = 512,
                   temperature: float | None = None, tool_execution: str = "parallel",
                   max_turns: int | None = None, api_key: str | None = None, timeout: float = 120.0) -> dict:
    """Run the episode; returns ``{"messages": transcript (incl. the leading system message), "events": [...],
    "end_reason": "natural"|"max_turns"|"error"|"aborted"}``. ``max_turns`` is hpd's turn budget (Pi has none),
    applied through Pi's ``finishTurn`` hook as :class:`hpd.harness.Harness` applies it; ``api_key`` is sent as
    the bearer token (default: a placeholder, what a local ``hpd serve`` accepts).

    ``tool_handler`` raising an exception becomes a thrown tool error in Pi (``isError``, text = message).
    Raises :class:`hpd.harness.bridge.BridgeUnavailable` when Node/the bridge packages are missing and
    ``RuntimeError`` when the Node side fails or times out.
    """
    from hpd.harness.bridge import check_bridge

    bridge = check_bridge()
    script = Path(__file__).with_name("pi_episode.mjs")
    setup: dict[str, Any] = {"bridgeDir": str(bridge), "baseUrl": base_url.rstrip("/"), "modelId": model_id,
                             "systemPrompt": system_prompt, "prompts": list(prompts), "tools": tools,
                             "maxTokens": int(max_tokens), "toolExecution": tool_execution}
    if temperature is not None:
        setup["temperature"] = float(temperature)
    if max_turns is not None:
        setup["maxTurns"] = int(max_turns)
    if api_key:
        setup["apiKey"] = api_key
    p = subprocess.Popen(["node", str(script)], cwd=str(bridge), stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True, encoding="utf-8", bufsize=1)
    timer = threading.Timer(timeout, p.kill)
    timer.start()
    events: list[dict] = []
    try:
        assert p.stdin is not None and p.stdout is not None
        p.stdin.write(js_stringify(setup) + "\n")
        p.stdin.flush()
        while True:
            line = p.stdout.readline()
            if not line:
                err = p.stderr.read() if p.stderr else ""
                raise RuntimeError(f"pi episode ended early (timeout {timeout}s?): {err.strip()[-2000:]}")
            msg = json.loads(line)
            kind = msg.get("type")
            if kind == "event":
                events.append(msg["event"])
            elif kind == "tool_request":
                try:
                    result = tool_handler(msg["name"], msg["toolCallId"], msg.get("args") or {})
                    answer = {"id": msg["id"], "result": result}
                except Exception as exc:  # the tool threw: Pi makes it an error result
                    answer = {"id": msg["id"], "throw": str(exc)}
                p.stdin.write(js_stringify(answer) + "\n")
                p.stdin.flush()
            elif kind == "done":
                return {"messages": msg["messages"], "events": events, "end_reason": msg.get("endReason", "natural")}
            elif kind == "fatal":
                raise RuntimeError(f"pi episode failed: {msg.get('error')}")
    finally:
        timer.cancel()
        try:
            if p.stdin:
                p.stdin.close()
        except OSError:
            pass
        try:
            p.wait(timeout=10)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()
