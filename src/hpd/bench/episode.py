"""Episodes of TRAJECT-Bench tasks inside ``hpd.harness``, driven in waves by any batch policy.

``run_episodes(bench, tasks, policy, ...)`` starts one ``Harness`` per task (system prompt ``SYSTEM_PROMPT``,
the user query, the task's ``ReplayEnv``), then repeatedly asks ``policy.act(states)`` for one assistant
message per still-running episode (one batched call per boundary wave) and steps each harness. Episodes run
``batch_size`` at a time to bound memory. A model policy plugs in by implementing ``EpisodePolicy.act``
(render ``state.harness.context()`` with ``hpd.policy.chat``, generate, parse).

Turn budget (our policy, recorded): ``max_turns`` = 15 by default (>= n_gold + 2 for every TRAJECT task;
the repo's 8-turn one-call budget makes ~37% of tasks unfinishable, docs/traject-bench.md sec 7, 9.2).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Iterable, Protocol

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
                  system_prompt: str = SYSTEM_PROMPT, tool_execution: str = "parallel", env=None) -> EpisodeState:
    """The one way an episode starts (evaluation rollouts and boundary replay alike): the user query, the
    system prompt and the task's replay environment (``env``, or a new ``ReplayEnv(task, bench, **env_kwargs)``)."""
    from hpd.harness import Harness, LoopConfig, user_message
    if env is None:
        env = ReplayEnv(task, bench, **(env_kwargs or {}))
    cfg = LoopConfig(tool_execution=tool_execution, max_turns=max_turns)
    h = Harness.start(prompts=[user_message(task.query)], system_prompt=system_prompt, env=env, config=cfg)
    return EpisodeState(task=task, env=env, harness=h)


def run_episodes(bench, tasks: Iterable, policy: EpisodePolicy, *, batch_size: int = 256,
                 env_kwargs: dict | None = None, max_turns: int | None = DEFAULT_MAX_TURNS,
                 on_done=None) -> list[EpisodeState]:
    """Run every task to the end; ``on_done(state)`` is called as each episode ends (e.g. to score and
    release it). Returns the finished states unless ``on_done`` returns False-y for memory reasons."""
    tasks = list(tasks)
    finished: list[EpisodeState] = []
    for lo in range(0, len(tasks), batch_size):
        active = [start_episode(t, bench, env_kwargs=env_kwargs, max_turns=max_turns)
                  for t in tasks[lo:lo + batch_size]]
        while active:
            msgs = policy.act(active)
            if len(msgs) != len(active):
                raise RuntimeError(f"policy {policy.name!r} returned {len(msgs)} messages for {len(active)} states")
            still = []
            for st, m in zip(active, msgs):
                st.harness.step(m)
                if st.harness.done:
                    keep = on_done(st) if on_done is not None else True
                    if keep:
                        finished.append(st)
                else:
                    still.append(st)
            active = still
    return finished
