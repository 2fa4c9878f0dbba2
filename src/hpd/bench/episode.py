"""Episodes of TRAJECT-Bench tasks inside ``hpd.harness``: how one starts, and what a policy implements.

``start_episode(task, bench, ...)`` starts one ``Harness`` for a task (system prompt ``SYSTEM_PROMPT``,
the user query, the task's ``ReplayEnv``). An ``EpisodePolicy`` answers ``act(states)`` with one assistant
message per still-running episode (one batched call per boundary wave); the wave loop that drives them is
:func:`hpd.eval.rollout.advance`. A model policy (render ``state.harness.context()`` with
``hpd.policy.chat``, generate, parse) is :class:`hpd.eval.rollout.ModelEpisodePolicy`.

Turn budget (our policy, recorded): ``max_turns`` = 15 by default (>= n_gold + 2 for every TRAJECT task;
the repo's 8-turn one-call budget makes ~37% of tasks unfinishable, docs/traject-bench.md sec 7, 9.2).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol

from hpd.bench.replay import ReplayEnv

SYSTEM_PROMPT = (
    "You are a helpful assistant that solves the user's request with the available tools. Call tools with "
    "JSON arguments that follow their schemas; you may call several independent tools in one turn. Tool "
    "results come back as text. When you have the information you need, reply to the user with the final "
    "answer and no tool call."
)
DEFAULT_MAX_TURNS = 15


@dataclass
class EpisodeState:
    task: Any
    env: ReplayEnv
    harness: Any
    info: dict = field(default_factory=dict)   # scratch space for a policy


class EpisodePolicy(Protocol):
    name: str

    def act(self, states: list[EpisodeState]) -> list[dict]:
        """One Pi assistant message per state, at that state's current boundary."""
        ...


def start_episode(task, bench, *, env_kwargs: dict | None = None, max_turns: int | None = DEFAULT_MAX_TURNS,
                  system_prompt: str = SYSTEM_PROMPT, tool_execution: str = "parallel", env=None,
                  harness: str = "pi") -> EpisodeState:
    """The one way an episode starts (evaluation rollouts and boundary replay alike): the user query, the
    system prompt and the task's replay environment (``env``, or a new ``ReplayEnv(task, bench, **env_kwargs)``).

    ``harness``: a name of :mod:`hpd.harnesses.registry` (``pi``, ``smolagents``). smolagents keeps its own
    system prompt (``system_prompt`` and ``tool_execution`` are Pi's) and takes ``max_turns`` as its
    ``max_steps`` (``None``: 20)."""
    from hpd.harness import Harness, LoopConfig, user_message
    if env is None:
        env = ReplayEnv(task, bench, **(env_kwargs or {}))
    if harness != "pi":
        from hpd.harnesses.registry import start_harness

        h = start_harness(harness, task.query, env, system_prompt=system_prompt, max_turns=max_turns,
                          tool_execution=tool_execution)
        return EpisodeState(task=task, env=env, harness=h)
    cfg = LoopConfig(tool_execution=tool_execution, max_turns=max_turns)
    h = Harness.start(prompts=[user_message(task.query)], system_prompt=system_prompt, env=env, config=cfg)
    return EpisodeState(task=task, env=env, harness=h)
