"""Online rollouts for the RL baselines: groups of sampled episodes of training tasks inside hpd's harness.

* **Tasks.** :func:`load_tasks` reads a TRAJECT-Bench-shaped folder (``hpd.bench.loader.load_bench``; by default
  the built-in benchmark, generated) and keeps ONE part of a leakage-safe split (``hpd.bench.split``; ``train``).
  :func:`update_slots` gives the tasks of update ``u``: task ``i = u * n + j`` of an endless sequence of
  seeded permutations, a pure function of ``(seed, u)``, so a resumed run trains on the same tasks.
* **Episodes.** Every task of an update gets ``G`` episodes (:func:`run_groups`) from the batched engine
  :func:`hpd.eval.rollout.advance` (waves of one batched ``generate`` call, refill), started by
  :func:`hpd.bench.episode.start_episode` exactly as evaluation starts them. :class:`RecordingPolicy` samples at
  temperature 1 over the full vocabulary with one seed per (seed, update, slot, rollout, turn)
  (:func:`rollout_seed`), so an episode does not depend on which others share its batch and a resumed run
  regenerates the same groups. Per model turn it records the EXACT prompt ids the backend generated from and the
  sampled completion ids (``Generation.prompt_token_ids`` / ``token_ids`` of :mod:`hpd.policy.backends.hf`:
  nothing is re-rendered or re-tokenized), the backend's log-probs and the GiGPO anchor of the boundary.
* **Reward** (:func:`episode_reward`): from :func:`hpd.eval.metrics.score_task` on the transcript (the scorer of
  ``hpd eval``), ``R = ts*TS + rc*RC_ep + step_sr*Step-SR + f1*F1`` with ``RC_ep`` the share of protocol-valid
  model turns (``metrics.turn_valid``). Per-step rewards (for GiGPO's discounted returns) split it so that they
  sum to ``R``: turn ``t`` gets ``rc * valid_t / n_turns`` and the last turn also gets the outcome terms.
* **Anchor state** (:func:`anchor_state`, :func:`anchor_hash`): what GiGPO groups steps on. The harness's
  environment state at a boundary is the set of distinct SUCCESSFUL tool results obtained so far, each as
  ``[canonical tool name, canonical arguments, result text]`` (``hpd.bench.canon.signature``, the replay
  environment's exact-match key). Failed calls (schema errors, misses, unknown tools) change nothing in the
  environment, like an invalid action in ALFWorld leaves verl-agent's observation unchanged; call ids, turn
  numbers and message wording are not state. The hash is sha256 of the canonical JSON (sorted keys, no spaces).
  ``hpd.boundary.state.Tracker`` is not used: its snapshot needs the reference plan (privileged) and carries
  per-episode ordinals and call ids, which differ between episodes in the same state.
"""

from __future__ import annotations

import hashlib
import json
import random
import zlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

from hpd.bench.canon import signature
from hpd.bench.episode import EpisodeState, start_episode
from hpd.harness.messages import tool_calls_of


# --------------------------------------------------------------------------------------------- tasks
def load_tasks(data, out: Path, *, is_main: bool = True, barrier=None) -> tuple[Any, list, dict]:
    """``(bench, tasks of the chosen split part, info)`` for a :class:`hpd.methods.rl.config.DataSettings`.
    Without ``data.path`` the built-in benchmark is generated into ``out/bench`` (main process only)."""
    from hpd.bench.loader import load_bench
    from hpd.bench.split import make_split, select

    path = Path(data.path) if data.path else out / "bench"
    if data.path is None and is_main and not (path / "builtin_manifest.json").is_file():
        from hpd.bench.builtin import generate
        generate(path, seed=data.builtin_seed, n_per_domain=data.n_per_domain)
    if barrier is not None:
        barrier()
    if not path.is_dir():
        raise FileNotFoundError(f"data.path {path} is not a folder")
    bench = load_bench(path)
    if data.split_file:
        tasks = select(bench.tasks, data.split_file, data.split)
        split_src = str(data.split_file)
    else:
        split = make_split(bench.tasks, seed=data.split_seed)
        if is_main:
            from hpd.runfolder import write_json
            write_json(out / "split.json", split)
        tasks = select(bench.tasks, split, data.split)
        split_src = f"make_split(seed={data.split_seed})"
    if data.limit:
        tasks = tasks[:data.limit]
    if not tasks:
        raise ValueError(f"no {data.split!r} tasks in {path} ({split_src})")
    return bench, tasks, {"path": str(path), "split": split_src, "part": data.split, "n_tasks": len(tasks)}


def update_slots(n_tasks: int, update: int, per_update: int, seed: int) -> list[int]:
    """Task indices of update ``update``: positions ``update*per_update ... +per_update-1`` of the endless
    concatenation of permutations ``random.Random(f"{seed}/tasks/{epoch}")`` (a pure function: exact resume)."""
    out = []
    for i in range(update * per_update, (update + 1) * per_update):
        epoch, pos = divmod(i, n_tasks)
        order = list(range(n_tasks))
        random.Random(f"{seed}/tasks/{epoch}").shuffle(order)
        out.append(order[pos])
    return out


def rollout_seed(seed: int, update: int, slot: int, g: int, turn: int) -> int:
    """The sampling seed of one model turn (independent of batch composition, reproducible on resume)."""
    return zlib.crc32(f"{seed}/{update}/{slot}/{g}#{turn}".encode()) & 0x7FFFFFFF


# --------------------------------------------------------------------------------------------- anchors
def anchor_state(messages: Sequence[dict]) -> dict:
    """The environment state at a boundary, canonical (module doc): distinct successful tool results so far."""
    calls = {c.get("id"): c for m in messages for c in tool_calls_of(m)}
    seen: dict[str, list] = {}
    for m in messages:
        if m.get("role") != "toolResult" or m.get("isError"):
            continue
        call = calls.get(m.get("toolCallId"), {})
        args = call.get("arguments") if isinstance(call.get("arguments"), dict) else {}
        name, cargs = signature(str(call.get("name", m.get("toolName", ""))), args)
        text = "".join(b.get("text", "") for b in m.get("content") or [] if isinstance(b, dict))
        key = _canon_json([name, cargs, text])
        seen[key] = json.loads(key)          # plain JSON values (the canonical arguments are tuples)
    return {"results": [seen[k] for k in sorted(seen)]}


def anchor_hash(messages: Sequence[dict]) -> str:
    """sha256 of the canonical JSON of :func:`anchor_state` (exact match only; no similarity threshold)."""
    return hashlib.sha256(_canon_json(anchor_state(messages)).encode("utf-8")).hexdigest()


def _canon_json(x: Any) -> str:
    return json.dumps(x, sort_keys=True, ensure_ascii=False, separators=(",", ":"), default=str)


# --------------------------------------------------------------------------------------------- episodes
@dataclass
class Turn:
    """One model call: exact ids, the backend's log-probs of the sampled tokens, the boundary's anchor."""

    prompt_ids: list[int]
    completion_ids: list[int]
    sampler_logprobs: list[float] | None
    finish_reason: str
    anchor: str
    valid: bool = False


@dataclass
class Episode:
    """One rollout: ``slot`` = the task's index in its update (the episode group), ``g`` = rollout index."""

    slot: int
    g: int
    uid: str
    turns: list[Turn] = field(default_factory=list)
    row: dict = field(default_factory=dict)
    reward: float = 0.0
    step_rewards: list[float] = field(default_factory=list)


class RecordingPolicy:
    """``EpisodePolicy`` for training rollouts: samples through a ``Policy`` backend and records each turn."""

    name = "rl-rollout"

    def __init__(self, policy: Any, *, seed: int, update: int, temperature: float = 1.0, max_new_tokens: int = 512,
                 enable_thinking: bool = False):
        self.policy, self.seed, self.update = policy, int(seed), int(update)
        self.sampling = {"temperature": float(temperature), "top_k": 0, "top_p": 1.0,
                         "max_new_tokens": int(max_new_tokens), "logprobs": True}
        self.enable_thinking = enable_thinking
        self.stats = {"policy_calls": 0, "generations": 0, "generated_tokens": 0, "length_stops": 0}

    def act(self, states: list[EpisodeState]) -> list[dict]:
        turns = [st.harness.turn_index for st in states]
        seeds = [rollout_seed(self.seed, self.update, st.info["slot"], st.info["g"], t) for st, t in zip(states, turns)]
        anchors = [anchor_hash(st.harness.messages) for st in states]
        cands = self.policy.act([st.harness.context() for st in states], n=1, enable_thinking=self.enable_thinking,
                                id_prefixes=[f"call_t{t}" for t in turns], seed=seeds, **self.sampling)
        self.stats["policy_calls"] += 1
        out = []
        for st, anchor, [c] in zip(states, anchors, cands):
            g = c.generation
            st.info["turns"].append(Turn(list(g.prompt_token_ids or []), list(g.token_ids), g.logprobs,
                                         g.finish_reason, anchor))
            self.stats["generations"] += 1
            self.stats["generated_tokens"] += len(g.token_ids)
            self.stats["length_stops"] += g.finish_reason == "length"
            out.append(c.message)
        return out


def episode_reward(row: dict, valid: Sequence[bool], weights) -> tuple[float, list[float]]:
    """``(R, per-turn rewards summing to R)`` of a scored episode (module doc); ``weights`` is a RewardSettings."""
    n = len(valid)
    rc = sum(valid) / n if n else 0.0
    outcome = weights.ts * row["TS"] + weights.step_sr * row["Step-SR"] + weights.f1 * row["F1"]
    steps = [weights.rc * float(v) / n for v in valid]
    if steps:
        steps[-1] += outcome
    return outcome + weights.rc * rc, steps


def _finish(st: EpisodeState, weights) -> Episode:
    from hpd.eval import metrics as M
    from hpd.eval.rollout import score_episode

    h = st.harness
    row = score_episode(st, keep_messages=False)
    valid = M.prediction_from_messages(h.messages, st.env.pool, h.end_reason).turn_valid
    turns = st.info["turns"]
    if len(valid) != len(turns):   # one assistant message per model call, always
        raise RuntimeError(f"{st.task.uid}: {len(turns)} model calls but {len(valid)} assistant turns")
    for t, v in zip(turns, valid):
        t.valid = bool(v)
    ep = Episode(st.info["slot"], st.info["g"], st.task.uid, turns, row)
    ep.reward, ep.step_rewards = episode_reward(row, valid, weights)
    return ep


def run_groups(bench, slots: Sequence[tuple[int, Any]], policy: RecordingPolicy, *, group_size: int, weights,
               env_kwargs: dict | None = None, max_turns: int | None = 15,
               in_flight: int = 64) -> tuple[list[Episode], dict]:
    """``group_size`` episodes of each ``(slot, task)``, batched: ``(episodes sorted by (slot, g), counters)``."""
    from hpd.eval.rollout import advance

    def starter(slot: int, task, g: int):
        def start() -> EpisodeState:
            st = start_episode(task, bench, env_kwargs=env_kwargs, max_turns=max_turns)
            st.info.update(slot=slot, g=g, turns=[])
            return st
        return start

    done: list[Episode] = []
    starts = [starter(slot, task, g) for slot, task in slots for g in range(group_size)]
    counters = advance(starts, policy, batch_size=in_flight, on_done=lambda st: done.append(_finish(st, weights)))
    return sorted(done, key=lambda e: (e.slot, e.g)), counters


def mean_reward(bench, tasks: Sequence[Any], policy: Any, *, weights, samples: int = 8, seed: int = 0,
                max_new_tokens: int = 512, env_kwargs: dict | None = None, max_turns: int | None = 15,
                in_flight: int = 64) -> dict:
    """Mean reward, TS and RC of ``samples`` temperature-1 episodes per task under a ``Policy`` backend, with the
    training rollouts' seeding (update index -1: never one a training run samples). For before/after checks."""
    pol = RecordingPolicy(policy, seed=seed, update=-1, max_new_tokens=max_new_tokens)
    eps, _ = run_groups(bench, list(enumerate(tasks)), pol, group_size=samples, weights=weights,
                        env_kwargs=env_kwargs, max_turns=max_turns, in_flight=in_flight)
    n_turns = sum(len(e.turns) for e in eps)
    return {"reward": sum(e.reward for e in eps) / len(eps), "TS": sum(e.row["TS"] for e in eps) / len(eps),
            "RC": sum(t.valid for e in eps for t in e.turns) / max(n_turns, 1), "episodes": len(eps)}
