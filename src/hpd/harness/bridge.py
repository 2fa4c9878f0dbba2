"""Drive the real Pi loop (``bridge/pi_bridge.mjs``, npm ``@earendil-works/pi-agent-core`` pinned) from Python.

The bridge asks Python for every assistant reply, tool result and hook decision over stdio; this module
answers from a :class:`~hpd.harness.scenario.Scenario`, so both loops see the same script.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import threading
from pathlib import Path
from typing import Any

from hpd.harness import scenario as sc
from hpd.harness.jsvalues import js_stringify


class BridgeUnavailable(RuntimeError):
    """Node or the installed bridge packages are missing (one-line reason)."""


def bridge_dir() -> Path:
    """``$HPD_BRIDGE_DIR``, else ``bridge/`` at the root of the checkout (:func:`hpd.resources.checkout`; of the
    current folder for an installed wheel)."""
    from hpd.resources import checkout

    env = os.environ.get("HPD_BRIDGE_DIR")
    if env:
        return Path(env)
    return (checkout() or Path.cwd()) / "bridge"


def check_bridge() -> Path:
    d = bridge_dir()
    if shutil.which("node") is None:
        raise BridgeUnavailable("node is not installed (the conformance suite needs Node >= 20)")
    if not (d / "pi_bridge.mjs").is_file():
        raise BridgeUnavailable(f"bridge not found at {d} (set HPD_BRIDGE_DIR)")
    if not (d / "node_modules" / "@earendil-works" / "pi-agent-core").is_dir():
        raise BridgeUnavailable(f"bridge packages not installed: run `cd {d} && npm ci` (or `make bridge`)")
    return d


class _Proc:
    def __init__(self, timeout: float):
        d = check_bridge()
        self.p = subprocess.Popen(
            ["node", str(d / "pi_bridge.mjs")], cwd=str(d), stdin=subprocess.PIPE, stdout=subprocess.PIPE,
            stderr=subprocess.PIPE, text=True, encoding="utf-8", bufsize=1,
        )
        self.timer = threading.Timer(timeout, self.p.kill)
        self.timer.start()

    def send(self, obj: dict) -> None:
        assert self.p.stdin is not None
        self.p.stdin.write(js_stringify(obj) + "\n")
        self.p.stdin.flush()

    def recv(self) -> dict:
        assert self.p.stdout is not None
        line = self.p.stdout.readline()
        if not line:
            err = self.p.stderr.read() if self.p.stderr else ""
            raise RuntimeError(f"bridge exited early: {err.strip()[-2000:]}")
        msg = json.loads(line)
        if msg.get("type") == "fatal":
            raise RuntimeError(f"bridge failed: {msg.get('error')}")
        return msg

    def close(self) -> None:
        self.timer.cancel()
        try:
            if self.p.stdin:
                self.p.stdin.close()
        except OSError:
            pass
        try:
            self.p.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.p.kill()
            self.p.wait()


def _one_shot(payload: dict, timeout: float = 60) -> Any:
    proc = _Proc(timeout)
    try:
        proc.send(payload)
        msg = proc.recv()
        return msg["results"]
    finally:
        proc.close()


def pi_validate(cases: list[dict]) -> list[dict]:
    """Real pi-ai ``validateToolArguments`` on ``[{schema, call}]`` -> ``[{ok, value} | {ok: False, error}]``."""
    return _one_shot({"op": "validate", "cases": cases})


def pi_parse_args(texts: list[str]) -> list[dict]:
    """Real pi-ai ``parseToolCallArguments`` on each text."""
    return _one_shot({"op": "parse_args", "texts": texts})


def pi_json_parse_errors(texts: list[str]) -> list[str | None]:
    """V8 ``JSON.parse`` error message per text (``None`` when it parses)."""
    return _one_shot({"op": "json_parse", "texts": texts})


def run_pi(s: sc.Scenario, timeout: float = 60) -> dict:
    """Run a scenario through the real Pi ``runAgentLoop``; same result shape as :func:`scenario.run_python`."""
    d = s.data
    tools = {t["name"]: t for t in d.get("tools", [])}
    hooks = d.get("hooks", {})
    setup = {
        "op": "run",
        "prompts": [sc.as_user(p) for p in d.get("prompts", ["Go."])],
        "messages": sc.initial_messages(s),
        "tools": [
            {"name": t["name"], "label": t.get("label", t["name"]), "description": t.get("description", ""),
             "parameters": t.get("parameters", {"type": "object"}),
             **({"executionMode": t["execution_mode"]} if t.get("execution_mode") else {})}
            for t in d.get("tools", [])
        ],
        "toolExecution": d.get("tool_execution", "parallel"),
        "steeringMode": d.get("steering_mode", "one-at-a-time"),
        "followUpMode": d.get("follow_up_mode", "one-at-a-time"),
        "steering": [sc.as_user(m) for m in d.get("steering", [])],
        "followUp": [sc.as_user(m) for m in d.get("follow_up", [])],
        "beforeToolCall": bool(hooks.get("before")),
        "afterToolCall": bool(hooks.get("after")),
    }

    def side(b: dict) -> dict:
        out = {}
        if b.get("steer"):
            out["steer"] = [sc.as_user(m) for m in b["steer"]]
        if b.get("follow_up"):
            out["followUp"] = [sc.as_user(m) for m in b["follow_up"]]
        if b.get("abort"):
            out["abort"] = True
        return out

    events: list = []
    contexts: list = []
    proc = _Proc(timeout)
    try:
        proc.send(setup)
        while True:
            msg = proc.recv()
            kind = msg.get("type")
            if kind == "event":
                events.append(msg["event"])
            elif kind == "llm_request":
                contexts.append(msg["context"])
                i = len(contexts) - 1
                if i >= len(d["replies"]):
                    raise sc.ScenarioError(f"{s.name}: ran out of scripted replies at boundary {i}")
                reply = d["replies"][i]
                message = sc.reply_message(reply, parse_raw=False)
                for b in message["content"]:
                    if isinstance(b, dict) and "rawArguments" in b:
                        b.pop("arguments", None)
                proc.send({"id": msg["id"], "message": _raw_to_js(message), **side(reply)})
            elif kind == "tool_request":
                ans = sc.tool_answer(tools[msg["name"]], msg["toolCallId"], msg["args"])
                resp: dict = {"id": msg["id"], "delay": ans["delay"], **side(ans)}
                if "throw" in ans:
                    resp["throw"] = ans["throw"]
                else:
                    resp["result"] = ans["result"]
                proc.send(resp)
            elif kind == "before_request":
                proc.send({"id": msg["id"], **sc.before_answer(hooks["before"], msg["toolCall"], msg["args"])})
            elif kind == "after_request":
                proc.send({"id": msg["id"], **sc.after_answer(hooks["after"], msg["toolCall"], msg["args"], msg["result"], msg["isError"])})
            elif kind == "done":
                transcript = list(setup["messages"]) + msg["messages"]
                return {"events": events, "transcript": transcript, "contexts": contexts, "messages": msg["messages"]}
            else:
                raise RuntimeError(f"bridge sent an unknown message type {kind!r}")
    finally:
        proc.close()


def _raw_to_js(message: dict) -> dict:
    """Blocks scripted with raw argument text: the bridge parses them with the real pi-ai (see pi_bridge.mjs)."""
    return message
