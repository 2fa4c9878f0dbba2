"""Shapes shared by the domain modules: parallel *asks* and sequential *chains*.

- An **ask** is one independent tool call for a parallel task plus two phrasings of the request
  (simple: explicit, tool-like; hard: paraphrased, indirect) and a function turning the tool's
  output object into an answer sentence that names the key output values.
- A **chain** is a sequential template: a function that, given an rng, draws its starting values,
  runs its steps through a :class:`Recorder` (each step is REALLY executed; later arguments are
  read from earlier outputs) and returns both phrasings plus the reference answer.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Any, Callable


@dataclass
class Ask:
    tool: str
    args: dict
    simple: str
    hard: str
    answer: Callable[[Any], str]


@dataclass
class Adapt:
    param: str          # which of this step's parameters came from an earlier output
    constraint: str     # the selection rule
    source_step: int    # 1-based step whose output holds the value


@dataclass
class RecStep:
    tool: str
    args: dict
    role: str
    next_param: str
    adapt: list[Adapt]
    obj: Any
    output: str


@dataclass
class ChainResult:
    simple: str
    hard: str
    answer: str
    reason: str


@dataclass
class Chain:
    name: str
    description: str
    run: Callable[[random.Random, Any, "Recorder"], ChainResult]


@dataclass
class Recorder:
    """Executes and records the steps of one chain instantiation."""
    call: Callable[[str, dict], tuple[Any, str]]
    steps: list[RecStep] = field(default_factory=list)

    def step(self, tool: str, args: dict, role: str, next_param: str = "",
             adapt: list[Adapt] | None = None) -> Any:
        obj, out = self.call(tool, args)
        self.steps.append(RecStep(tool, dict(args), role, next_param, list(adapt or []), obj, out))
        return obj


def pick(rng: random.Random, xs):
    return xs[rng.randrange(len(xs))]
