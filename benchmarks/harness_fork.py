"""Fork benchmark: Harness.fork() vs copy.deepcopy of the same state, at a mid-episode boundary.

Prints JSON: {"forks_per_s", "deepcopy_per_s", "speedup", "messages", "events", ...}.
"""

import copy
import json
import sys
import time

from hpd.harness import AgentTool, Harness, assistant_message, text, tool_call, tool_result, user_message

SCHEMA = {"type": "object", "properties": {"q": {"type": "string"}, "n": {"type": "integer"}}, "required": ["q"]}


class Env:
    def __init__(self, log=()):
        self.log = list(log)
        self._tools = [AgentTool("search", "Search", SCHEMA, self.search)]

    def search(self, tid, args):
        self.log.append(tid)
        return tool_result("result for " + args["q"] * 20, {"n": args.get("n", 0)})

    def tools(self):
        return self._tools

    def fork(self):
        return Env(self.log)


def build(turns: int = 10) -> Harness:
    h = Harness.start([user_message("Plan a trip to Paris with hotels and flights.")], "You are a travel agent. " * 20, env=Env())
    for k in range(turns):
        h.step(assistant_message([text(f"Step {k}."), *[tool_call(f"c{k}_{j}", "search", {"q": f"query {k} {j}", "n": j}) for j in range(3)]]))
    return h


def rate(fn, seconds: float) -> float:
    n, t0 = 0, time.perf_counter()
    while (el := time.perf_counter() - t0) < seconds:
        fn()
        n += 1
    return n / el


def main(seconds: float = 1.0) -> dict:
    h = build()
    forks = rate(h.fork, seconds)
    deep = rate(lambda: copy.deepcopy(h), seconds)
    # a fork is usable: stepping it leaves the original untouched
    g = h.fork()
    g.step(assistant_message("done"))
    assert g.done and not h.done
    out = {"forks_per_s": round(forks), "deepcopy_per_s": round(deep), "baseline": "copy.deepcopy(harness)",
           "speedup": round(forks / deep, 1), "messages": len(h.transcript), "events": len(h.events), "turns": h.turn_index}
    return out


if __name__ == "__main__":
    print(json.dumps(main(float(sys.argv[1]) if len(sys.argv) > 1 else 1.0)))
