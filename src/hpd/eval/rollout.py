"""Batched, resumable episodes of any policy inside the harness: THE wave loop, THE scorer, THE driver.

Engine (:func:`advance`, the one wave loop of evaluation): up to ``batch_size`` episodes are active at once; every *wave* collects the
episodes waiting at a provider boundary, renders their contexts and makes ONE batched policy call
(``Policy.act``), then steps each harness with its message. Finished episodes leave and their slots are
refilled from the queue at the next wave (continuous batching, so one long episode does not hold
back the others). The turn budget is the harness's ``max_turns`` (our policy, recorded; episodes that
would need another provider call end with ``end_reason="max_turns"``).

Model policy (:class:`ModelEpisodePolicy`): an ``hpd.bench.episode.EpisodePolicy`` over any
``hpd.policy.backends`` ``Policy``: ``render_prompt`` (native view, no document) -> generate -> ``parse_action``.
Sampling defaults to greedy (``temperature=0``); with sampling, each (task, turn) gets its own seed
(crc32 of ``uid`` and the turn) so results do not depend on which episodes share a batch. Tool-call ids
are ``call_t<turn>_<k>``, unique within an episode.

Scorer (:func:`score_episode`): the per-task row of :func:`hpd.eval.metrics.score_task` for the reference
policy and model policies alike (+ end reason, match levels, generated tokens, the transcript).

Driver (:func:`run_rollouts`): tasks are run in chunks of ``shard_size`` (in task order; the wave loop
refills within a chunk); each finished episode's row (scored row + transcript) is appended to a
:class:`hpd.runfolder.ShardLog` as the episode ends. A restart reads the log and skips every chunk whose
episodes are all written; a chunk cut by the restart runs again whole (the rows already written stand and are
not appended again), because which episodes share a batch changes a model's logits by float noise (padding),
enough to flip a greedy token of a near-uniform model: rerunning only the missing episodes gave a resumed
tiny-model evaluation other transcripts than an uninterrupted one (``tests/cli/test_cli_kill.py``). The recipe around it (policy, Action-Acc, tables, manifest) is
:func:`hpd.eval.variant.evaluate_variant`.
"""

from __future__ import annotations

import time
import zlib
from collections import deque
from typing import Any, Callable, Iterable, Sequence

from hpd.bench.episode import DEFAULT_MAX_TURNS, EpisodeState, start_episode
from hpd.harnesses.registry import harness_name, turn_index


# --------------------------------------------------------------------------------------------- policy
def episode_seed(base: int, uid: str, turn: int) -> int:
    """A per-(task, turn) sampling seed independent of batch composition."""
    return (int(base) * 1_000_003 + zlib.crc32(f"{uid}#{turn}".encode())) & 0x7FFFFFFF


class ModelEpisodePolicy:
    """``EpisodePolicy`` over a ``Policy`` backend (see module doc). Counts calls/tokens in ``stats``."""

    def __init__(self, policy: Any, *, temperature: float = 0.0, top_k: int = 0, top_p: float = 1.0,
                 max_new_tokens: int = 256, seed: int = 0, enable_thinking: bool = False, name: str = "model"):
        self.policy = policy
        self.sampling = {"temperature": float(temperature), "top_k": int(top_k), "top_p": float(top_p),
                         "max_new_tokens": int(max_new_tokens)}
        self.seed = int(seed)
        self.enable_thinking = enable_thinking
        self.name = name
        self.stats = {"policy_calls": 0, "generations": 0, "generated_tokens": 0, "length_stops": 0}

    def close(self) -> None:
        """Stop the generation backend (a vLLM engine and its temporary merged weights, an HTTP client); hf's
        backend holds nothing to stop. A vLLM engine left running in a process that goes on (a notebook,
        ``CliRunner``) makes the next in-process engine of that process start in child processes."""
        close = getattr(self.policy, "close", None)
        if callable(close):
            close()

    def act(self, states: list[EpisodeState]) -> list[dict]:
        if not states:
            return []
        turns = [turn_index(st.harness) for st in states]
        cands = self.policy.act(
            [st.harness.context() for st in states], n=1, enable_thinking=self.enable_thinking,
            id_prefixes=[f"call_t{t}" for t in turns],
            seed=[episode_seed(self.seed, st.task.uid, t) for st, t in zip(states, turns)], **self.sampling)
        self.stats["policy_calls"] += 1
        out = []
        for st, [c] in zip(states, cands):
            g = c.generation
            self.stats["generations"] += 1
            self.stats["generated_tokens"] += len(g.token_ids)
            self.stats["length_stops"] += g.finish_reason == "length"
            st.info.setdefault("generated_tokens", 0)
            st.info["generated_tokens"] += len(g.token_ids)
            out.append(c.message)
        return out

    def describe(self) -> dict:
        """The run's identity (the eval config): backend, model, sampling and, where the backend says (hf), the
        dtype the model computes in."""
        dtype = getattr(self.policy, "dtype", None)
        return {"name": self.name, "backend": type(self.policy).__name__, "model": getattr(self.policy, "name", None),
                **self.sampling, "seed": self.seed, "enable_thinking": self.enable_thinking,
                **({"dtype": dtype} if isinstance(dtype, str) else {})}


# --------------------------------------------------------------------------------------------- engine
def advance(starts: Iterable[Callable[[], EpisodeState]], policy: Any, *, batch_size: int = 64,
            on_done: Callable[[EpisodeState], None] | None = None) -> dict:
    """Run episodes in waves with refill (see module doc). ``starts`` yields zero-argument episode
    constructors (started lazily, so at most ``batch_size`` episodes are alive). Returns counters."""
    if batch_size < 1:
        raise ValueError("batch_size must be >= 1")
    queue = deque(starts)
    active: list[EpisodeState] = []
    waves = boundaries = finished = 0
    while queue or active:
        while queue and len(active) < batch_size:
            st = queue.popleft()()
            if st.harness.done:  # nothing to ask (cannot happen with a prompt, but be safe)
                finished += 1
                if on_done:
                    on_done(st)
                continue
            active.append(st)
        if not active:
            continue
        msgs = policy.act(active)
        if len(msgs) != len(active):
            raise RuntimeError(f"policy returned {len(msgs)} messages for {len(active)} episodes")
        waves += 1
        boundaries += len(active)
        still = []
        for st, m in zip(active, msgs):
            st.harness.step(m)
            if st.harness.done:
                finished += 1
                if on_done:
                    on_done(st)
            else:
                still.append(st)
        active = still
    return {"waves": waves, "boundaries": boundaries, "episodes": finished}


# --------------------------------------------------------------------------------------------- scoring
def score_episode(st: EpisodeState, judge: Any = None, *, keep_messages: bool = True) -> dict:
    """The per-task row of ``hpd.eval.metrics.score_task`` (+ end reason, match levels, transcript).

    A smolagents episode is scored from its run (:func:`hpd.eval.metrics.prediction_from_smolagents`: the
    calls except ``final_answer``, the final answer = ``final_answer``'s argument, finished iff the run ended
    on it); its transcript is :meth:`~hpd.harnesses.smolagents.SmolagentsHarness.transcript` and the row adds
    ``harness`` and the harness's ``events``."""
    h = st.harness
    if harness_name(h) == "smolagents":
        return score_smolagents(st, judge, keep_messages=keep_messages)
    return score_transcript(st.task, h.messages, st.env, h.end_reason, judge, keep_messages=keep_messages,
                            generated_tokens=st.info.get("generated_tokens", 0))


def score_transcript(task: Any, messages: list[dict], env: Any, end_reason: str | None, judge: Any = None, *,
                     keep_messages: bool = True, generated_tokens: int = 0) -> dict:
    """THE scorer of one finished episode, whichever loop ran it: ``messages`` is the transcript without
    system messages, ``env`` the task's ``ReplayEnv`` after the episode (its pool and match levels)."""
    from hpd.eval import metrics as M

    pred = M.prediction_from_messages(messages, env.pool, end_reason)
    jm = judge.answer_match(task.query, task.final_answer, pred.final_answer) if judge is not None else None
    row = M.score_task(task, pred, env.pool, judge_match=jm)
    row["end_reason"] = end_reason
    row["match_levels"] = env.match_counts()
    row["generated_tokens"] = generated_tokens
    if keep_messages:
        row["messages"] = messages
    return row


def score_smolagents(st: EpisodeState, judge: Any = None, *, keep_messages: bool = True) -> dict:
    """:func:`score_episode` of a finished smolagents episode."""
    from hpd.eval import metrics as M

    h = st.harness
    pred = M.prediction_from_smolagents(h, st.env.pool)
    jm = judge.answer_match(st.task.query, st.task.final_answer, pred.final_answer) if judge is not None else None
    row = M.score_task(st.task, pred, st.env.pool, judge_match=jm)
    row["end_reason"] = h.end_reason
    row["match_levels"] = st.env.match_counts()
    row["generated_tokens"] = st.info.get("generated_tokens", 0)
    row["harness"] = "smolagents"
    row["verdicts"] = [v.kind for v in h.step_verdicts()]
    if keep_messages:
        row["messages"] = h.transcript()
        row["events"] = h.events
    return row


def summarize(rows: list[dict]) -> dict:
    """The metric table (``hpd.eval.metrics.aggregate``) + match levels and end reasons, like the reference evaluator."""
    from hpd.eval import metrics as M

    summary = M.aggregate(rows)
    levels: dict[str, int] = {}
    reasons: dict[str, int] = {}
    for r in rows:
        for k, v in r.get("match_levels", {}).items():
            levels[k] = levels.get(k, 0) + v
        reasons[str(r.get("end_reason"))] = reasons.get(str(r.get("end_reason")), 0) + 1
    summary["match_levels"] = dict(sorted(levels.items()))
    summary["end_reasons"] = dict(sorted(reasons.items()))
    return summary


# --------------------------------------------------------------------------------------------- driver
def run_rollouts(bench: Any, tasks: Sequence[Any], policy: Any, *, log: Any = None, shard_size: int = 64,
                 batch_size: int = 64, env_kwargs: dict | None = None, max_turns: int | None = DEFAULT_MAX_TURNS,
                 judge: Any = None, keep_messages: bool = True, harness: str = "pi",
                 on_episode: Callable[[int, int], None] | None = None) -> tuple[list[dict], dict]:
    """Run (or, with rows already in ``log``, resume) the episodes of ``tasks``; returns
    ``(rows in task order, run info)``. ``log`` is a :class:`hpd.runfolder.ShardLog` keyed by ``uid``.
    ``harness``: the :mod:`hpd.harnesses.registry` name the episodes run in (``max_turns`` is smolagents'
    ``max_steps`` there). ``on_episode(done, total)``: called with the episodes written so far (resumed ones
    included), once at the start and after each new row."""
    if shard_size < 1:
        raise ValueError("shard_size must be >= 1")
    have = log.read() if log is not None else {}
    rows_by_uid = {t.uid: have[t.uid] for t in tasks if t.uid in have}
    info = {"resumed_rows": len(rows_by_uid), "new_rows": 0, "waves": 0, "boundaries": 0, "seconds": 0.0}
    t0 = time.time()
    if on_episode is not None:
        on_episode(len(rows_by_uid), len(tasks))

    def done(st: EpisodeState) -> None:
        if st.task.uid in rows_by_uid:       # logged before the restart: that row stands, nothing is appended
            return
        row = score_episode(st, judge, keep_messages=keep_messages)
        if log is not None:
            log.append([row], sync=False)
        rows_by_uid[row["uid"]] = row
        info["new_rows"] += 1
        if on_episode is not None:
            on_episode(len(rows_by_uid), len(tasks))

    for i in range(0, len(tasks), shard_size):
        chunk = tasks[i:i + shard_size]
        if all(t.uid in rows_by_uid for t in chunk):
            continue
        # an unfinished chunk runs whole, its finished episodes included: the batches then hold the same
        # episodes as in an uninterrupted run (padding changes a model's logits by float noise; module doc)
        starts = [(lambda t=t: start_episode(t, bench, env_kwargs=env_kwargs, max_turns=max_turns, harness=harness))
                  for t in chunk]
        c = advance(starts, policy, batch_size=batch_size, on_done=done)
        info["waves"] += c["waves"]
        info["boundaries"] += c["boundaries"]
        if log is not None:
            log.sync()
    info["seconds"] = round(time.time() - t0, 3)
    return [rows_by_uid[t.uid] for t in tasks], info


# --------------------------------------------------------------------------------------------- CLI glue
def make_model_policy(model: str, *, adapter: str | None = None, backend: str = "hf", temperature: float = 0.0,
                      max_new_tokens: int = 256, seed: int = 0, enable_thinking: bool = False,
                      batch_size: int = 32, dtype: str = "auto") -> ModelEpisodePolicy:
    """A :class:`ModelEpisodePolicy` over a local model directory (``hpd eval --model DIR [--adapter DIR]``);
    ``dtype``: auto | float32 | bfloat16 (:mod:`hpd.policy.dtype`)."""
    from hpd.policy.backends import make_policy

    kw: dict = {"batch_size": batch_size, "dtype": dtype} if backend == "hf" else {"dtype": dtype}
    pol = make_policy(backend, str(model), adapter=str(adapter) if adapter else None, **kw)
    return ModelEpisodePolicy(pol, temperature=temperature, max_new_tokens=max_new_tokens, seed=seed,
                              enable_thinking=enable_thinking)
