"""A deterministic (greedy by construction) "model" for TRAJECT tasks: a ``Policy`` whose completion is a pure
function of the rendered prompt. It finds the task by the prompt's user query, counts the assistant turns
already in the prompt and writes that turn of the task's gold trajectory in the tokenizer's chat format
(``hpd.policy.chat.render_action``). Served by ``hpd serve`` it drives the real Pi, in process it drives the
Python harness: the same prompt gives the same completion in both.

Variants (by the task's position in ``tasks``, ``i % 6``) walk the harness's paths, not just the happy one:
0 the clean gold; 1 an extra call to an unknown tool in the first turn; 2 the first call's arguments with
wrong types (every value wrapped in a list: schema validation errors); 3 never answers (repeats the first
call: the turn budget ends the run); 4 the first turn stops on ``length`` (Pi fails truncated calls), then
the gold; 5 text before the calls and a multi-line final answer.
"""

from __future__ import annotations

import re

from hpd.harness.messages import assistant_message, text, tool_call
from hpd.policy import chat
from hpd.policy.backends.base import Generation, Policy

_USER = re.compile(r"<\|im_start\|>user\n(.*?)<\|im_end\|>", re.S)


class GoldScriptPolicy(Policy):
    """See module doc. ``tasks``: the tasks it can play (queries must be unique); ``catalog`` names the calls."""

    def __init__(self, tokenizer, tasks, catalog):
        self.tokenizer = tokenizer
        self.name = "gold-script"
        self.catalog = catalog
        self.by_query = {}
        for i, t in enumerate(tasks):
            assert t.query not in self.by_query, f"duplicate query in {t.uid}"
            self.by_query[t.query] = (i % 6, t)
        self.prompts: list[str] = []

    def _turns(self, variant: int, task) -> list[list[dict]]:
        calls = [{"name": self.catalog[s.key].name, "arguments": s.call()["arguments"]}
                 for s in task.steps if s.key is not None]
        turns = [calls] if task.kind == "parallel" else [[c] for c in calls]
        turns = [t for t in turns if t]
        if variant == 1 and turns:
            turns[0] = [{"name": "no_such_tool", "arguments": {"q": 1}}] + turns[0]
        if variant == 2 and turns:
            bad = {k: [v] for k, v in turns[0][0]["arguments"].items()} or {"unexpected": [1]}
            turns[0] = [{"name": turns[0][0]["name"], "arguments": bad}] + turns[0][1:]
        return turns

    def completion(self, prompt: str) -> tuple[str, str]:
        """``(completion text with end-of-turn, finish reason)`` for a rendered prompt."""
        users = _USER.findall(prompt)
        variant, task = self.by_query[users[0]]
        t = prompt.count("<|im_start|>assistant") - 1
        turns = self._turns(variant, task)
        finish = "stop"
        if variant == 3 and turns:
            blocks = [tool_call(f"c{k}", c["name"], c["arguments"]) for k, c in enumerate(turns[0])]
        elif t < len(turns):
            blocks = [tool_call(f"c{k}", c["name"], c["arguments"]) for k, c in enumerate(turns[t])]
            if variant == 5:
                blocks = [text("Let me check that.")] + blocks
            if variant == 4 and t == 0:
                finish = "length"
        else:
            answer = task.final_answer or "Done."
            blocks = [text(answer + ("\n\nAnything else? ✓" if variant == 5 else ""))]
        return chat.render_action(self.tokenizer, assistant_message(blocks)), finish

    def generate(self, prompts, n=1, temperature=1.0, top_k=0, top_p=1.0, max_new_tokens=256, seed=None,
                 logprobs=False):
        out = []
        for p in prompts:
            self.prompts.append(p)
            comp, finish = self.completion(p)
            ids = self.tokenizer(comp, add_special_tokens=False)["input_ids"]
            body = comp[: -len(chat.END_OF_TURN)] if comp.endswith(chat.END_OF_TURN) else comp
            if finish == "length":
                ids = ids[:-1]   # no end-of-turn token: the budget ran out
            out.append([Generation(text=body, token_ids=ids, logprobs=[-1.0] * len(ids) if logprobs else None,
                                   finish_reason=finish) for _ in range(n)])
        return out
