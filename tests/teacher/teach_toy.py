"""A small hermetic world for teacher tests: a replay-like environment over recorded outputs, its
boundaries (built by stepping the real harness with the reference actions), oracle-level control
documents rendered by hpd.document, and a noisy scripted teacher.

Also a script: ``python teach_toy.py OUT N_TASKS SEED [SLEEP]`` runs ``teach`` on the toy items with
the noisy teacher (used by the SIGKILL resume test)."""

from __future__ import annotations

import random
import sys
import time

from hpd.bench.canon import signature
from hpd.harness import AgentTool, Harness, LoopConfig, assistant_message, text, tool_call, tool_result, user_message
from hpd.teacher.item import TeachItem
from hpd.teacher.proposal import GarbageTeacher, ReferenceTeacher

MISS = '{"error":"NO_RECORDED_RESPONSE","message":"no recorded response"}'

SCHEMAS = {
    "weather": {"type": "object", "properties": {"city": {"type": "string"}, "days": {"type": "integer"}},
                "required": ["city"]},
    "time": {"type": "object", "properties": {"tz": {"type": "string"}}, "required": ["tz"]},
    "news": {"type": "object", "properties": {"topic": {"type": "string"}}, "required": []},
}


class ToyEnv:
    """Answers a call with the recorded output of a gold step with the same canonical signature
    (details.match = "exact"), else the miss body (details.match = "miss", isError)."""

    def __init__(self, recorded: dict, log: list | None = None):
        self.recorded = recorded
        self.match_log = list(log or [])
        self._tools = [AgentTool(name=n, description=f"the {n} tool", parameters=s, execute=self._exec(n))
                       for n, s in SCHEMAS.items()]

    def _exec(self, name):
        def run(call_id, args):
            out = self.recorded.get(signature(name, args))
            if out is None:
                self.match_log.append("miss")
                return tool_result(MISS, {"match": "miss"}, is_error=True)
            self.match_log.append("exact")
            return tool_result(out, {"match": "exact"})
        return run

    def tools(self):
        return self._tools

    def fork(self):
        return ToyEnv(self.recorded, self.match_log)


def task(t: int):
    """Task t: sequential weather(city) -> time(tz) [-> news()] -> final answer."""
    city = ["Paris", "Rome", "Oslo", "Lima"][t % 4] + f" {t}"
    steps = [("weather", {"city": city, "days": 2 + t % 3}), ("time", {"tz": f"UTC+{t % 12}"})]
    if t % 2:
        steps.append(("news", {}))
    recorded = {signature(n, a): f"output of {n} #{t}" for n, a in steps}
    final = f"In {city} it is sunny; local time noted. Task {t} done."
    return f"Weather and time for {city}?", steps, recorded, final


def _doc(h: Harness, action: dict, idx: int) -> str:
    from hpd.document.schema import ActionCall, ControlDocument, EndRule, NextAction, ToolSpec
    from hpd.document.render import render
    calls = [ActionCall(name=c["name"], arguments=c["arguments"]) for c in action["content"] if c["type"] == "toolCall"]
    na = NextAction(calls=calls) if calls else NextAction(final="".join(b.get("text", "") for b in action["content"] if b["type"] == "text"))
    doc = ControlDocument(privilege="oracle", kind=h.boundary_kind or "initial", index=idx, turn=h.turns_completed,
                          execution="sequential", turns_left=None, tail=h.messages[-1]["role"],
                          tools=[ToolSpec(name=n, required=s["required"]) for n, s in SCHEMAS.items()],
                          end=EndRule(allowed=True, rule="reply without tool calls", final_turn="a text answer"),
                          next_action=na)
    return render(doc)


def items_for(t: int) -> list[TeachItem]:
    query, steps, recorded, final = task(t)
    h = Harness.start([user_message(query)], "You are a helpful agent.", ToyEnv(recorded),
                      LoopConfig(tool_execution="sequential"))
    actions = [assistant_message([tool_call(f"ref{t}_{i}", n, dict(a))]) for i, (n, a) in enumerate(steps)]
    actions.append(assistant_message([text(final)]))
    out = []
    for i, act in enumerate(actions):
        base = h.fork()
        doc = _doc(h, act, i)
        out.append(TeachItem(
            id=f"toy#{t}/b{i}", task_uid=f"toy#{t}", kind=h.boundary_kind or "", context=h.context(),
            reference=act, restore=base.fork, can_end=(i == len(actions) - 1),
            document=lambda priv, d=doc: d if priv == "oracle" else ""))
        h.step(act)
    assert h.done
    return out


def toy_items(n_tasks: int) -> list[TeachItem]:
    return [it for t in range(n_tasks) for it in items_for(t)]


class NoisyTeacher:
    """With probability 0.4 per candidate (seeded by the request seed) the reference action, else
    garbage: a stochastic teacher whose boundaries need 1..N attempts or fall back."""

    name = "noisy"

    def __init__(self, sleep: float = 0.0):
        self.sleep = sleep
        self.ref, self.garbage = ReferenceTeacher(), GarbageTeacher()

    def propose(self, requests):
        if self.sleep:
            time.sleep(self.sleep)
        refs, garb = self.ref.propose(requests), self.garbage.propose(requests)
        out = []
        for r, rp, gp in zip(requests, refs, garb):
            rng = random.Random(r.seed ^ 0x5A5A)
            out.append([rp[j] if rng.random() < 0.4 else gp[j] for j in range(r.k)])
        return out


if __name__ == "__main__":
    from hpd.teacher.run import TeachConfig, teach
    out, n, seed = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    sleep = float(sys.argv[4]) if len(sys.argv) > 4 else 0.0
    res = teach(toy_items(n), NoisyTeacher(sleep), TeachConfig(k=2, attempts=3, seed=seed, batch_boundaries=int(sys.argv[5]) if len(sys.argv) > 5 else 8), out)
    print("DONE", len(res.records))
