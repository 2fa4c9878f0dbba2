"""Evaluation episodes in the REAL Pi (``hpd eval --harness pi``): the same tasks, tools, replay environment,
turn budget and scorer as :mod:`hpd.eval.rollout`, but the loop is the pinned npm Pi
(``@earendil-works/pi-agent-core`` through the bridge, :func:`hpd.serve.pi_episode.run_pi_episode`) and the
model is whatever OpenAI-compatible endpoint Pi's own ``openai-completions`` provider talks to: a local
model served by ``hpd serve`` (started here on a free loopback port) or any ``--base-url``.

Per task: a fresh :class:`hpd.bench.replay.ReplayEnv` gives the pool's tool declarations and answers Pi's
tool executions (an error result is a thrown tool error in Pi, as in the Python harness); Pi starts from the
same system prompt (:data:`hpd.bench.episode.SYSTEM_PROMPT`) and user query; ``max_turns`` is applied
through Pi's ``finishTurn`` hook. The finished transcript (without system messages) is scored by
:func:`hpd.eval.rollout.score_transcript`, so both harnesses give the same row for the same transcript.
``generated_tokens`` is the sum of the assistant messages' ``usage.output`` (what the server reported).

Episodes run ``workers`` at a time (one Node process each); rows go to the shard log as episodes end, in
completion order, and a restart runs only the missing tasks. With ``sessions_dir`` every episode's Pi
transcript (system messages included: the session log ``hpd data import --format pi-session`` reads) is
written to ``<sessions_dir>/<uid with / and # as _>.jsonl``, one message per line.

Not mirrored from the Python policy: per-(task, turn) sampling seeds (Pi sends none), so sampled
(temperature > 0) runs are not reproducible here; greedy runs are.
"""

from __future__ import annotations

import re
import time
from concurrent.futures import ThreadPoolExecutor, as_completed
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Callable, Iterator, Sequence

from hpd.bench.episode import DEFAULT_MAX_TURNS, SYSTEM_PROMPT


class PiEpisodeError(RuntimeError):
    """A real-Pi episode failed (Node crashed or timed out); one line naming the task."""


class PiHarnessPolicy:
    """A policy for :func:`hpd.eval.variant.evaluate_variant` whose episodes run in the real Pi.

    Exactly one of ``base_url`` (an OpenAI-compatible endpoint) and ``serve_policy`` (a local
    ``hpd.policy.backends`` policy, served by ``hpd serve`` for the run) is given. ``inner`` is the same model as
    a Python-side :class:`hpd.eval.rollout.ModelEpisodePolicy` (Action-Acc acts through it)."""

    name = "pi"

    def __init__(self, *, base_url: str | None = None, serve_policy: Any = None, model_id: str = "hpd",
                 api_key: str | None = None, temperature: float = 0.0, max_new_tokens: int = 256,
                 workers: int = 4, timeout: float = 600.0, inner: Any = None, sessions_dir: str | Path | None = None):
        if (base_url is None) == (serve_policy is None):
            raise ValueError("give exactly one of base_url and serve_policy")
        self.base_url = base_url.rstrip("/") if base_url else None
        self.serve_policy = serve_policy
        self.model_id = model_id
        self.api_key = api_key
        self.temperature = float(temperature)
        self.max_new_tokens = int(max_new_tokens)
        self.workers = max(1, int(workers))
        self.timeout = float(timeout)
        self.inner = inner
        self.sessions_dir = Path(sessions_dir) if sessions_dir else None
        self.seed = getattr(inner, "seed", None)
        self.stats = {"episodes": 0, "generated_tokens": 0}

    def close(self) -> None:
        """Stop the model behind the local server (:meth:`ModelEpisodePolicy.close`), if this policy holds one."""
        if self.inner is not None:
            self.inner.close()

    def describe(self) -> dict:
        """The run's identity (the config hash): never the port of a server started here."""
        inner = self.inner.describe() if self.inner is not None else {}
        return {**inner, "harness": "pi", "endpoint": self.base_url or "hpd serve (local)", "model_id": self.model_id,
                "temperature": self.temperature, "max_new_tokens": self.max_new_tokens}

    @contextmanager
    def endpoint(self) -> Iterator[str]:
        """The base URL Pi talks to for the run (a local ``hpd serve`` lives as long as the block)."""
        if self.base_url is not None:
            yield self.base_url
            return
        from hpd.serve.app import BackgroundServer

        cap = max(self.max_new_tokens, 1)
        with BackgroundServer(self.serve_policy, model_name=self.model_id, max_tokens_cap=cap,
                              default_max_tokens=cap, record=0) as srv:
            yield srv.base_url


# Fields Pi fills from the wire or the clock, not from the model's action: what a transcript comparison ignores.
TRANSCRIPT_METADATA = frozenset({"timestamp", "durationMs", "usage", "api", "provider", "model", "responseId",
                                 "rawStopReason", "thinkingLevel"})


def comparable_transcript(messages: list[dict]) -> list[dict]:
    """A transcript without :data:`TRANSCRIPT_METADATA`, tool-call ids replaced by their order in the episode (the
    Python policy names them ``call_t<turn>_<k>``, ``hpd serve`` ``call_<request>_<choice>_<k>``); every other field
    is kept, so a new or different field shows up as a difference between the two harnesses."""
    ids: dict[str, str] = {}
    out = []
    for m in messages:
        n = {k: v for k, v in m.items() if k not in TRANSCRIPT_METADATA}
        if m.get("role") == "assistant":
            blocks = []
            for b in m.get("content") or []:
                if b.get("type") == "toolCall":
                    ids.setdefault(b["id"], f"#{len(ids)}")
                    b = {**b, "id": ids[b["id"]]}
                blocks.append(b)
            n["content"] = blocks
        if m.get("role") == "toolResult":
            n["toolCallId"] = ids.get(m["toolCallId"], "unknown:" + str(m["toolCallId"]))
        out.append(n)
    return out


def differing_episodes(a_dir: str | Path, b_dir: str | Path) -> list[str]:
    """Uids whose row or transcript (:func:`comparable_transcript`) differs between two evaluation folders of the
    same tasks (e.g. the Python harness and the real Pi), plus uids present in only one of them."""
    from .read import transcripts

    a = {r["uid"]: r for r in transcripts(a_dir, n=10_000)}
    b = {r["uid"]: r for r in transcripts(b_dir, n=10_000)}
    out = sorted(set(a) ^ set(b))
    for uid in sorted(set(a) & set(b)):
        ra, rb = dict(a[uid]), dict(b[uid])
        ma, mb = ra.pop("messages"), rb.pop("messages")
        if ra != rb or comparable_transcript(ma) != comparable_transcript(mb):
            out.append(uid)
    return out


def session_name(uid: str) -> str:
    """The session file name of a task uid (``parallel/Travel/hard_ver.json#3`` -> ``parallel_Travel_hard_ver.json_3.jsonl``)."""
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", uid) + ".jsonl"


def run_pi_task(task: Any, bench: Any, url: str, policy: PiHarnessPolicy, *, env_kwargs: dict | None = None,
                max_turns: int | None = DEFAULT_MAX_TURNS) -> tuple[dict, Any]:
    """One episode of ``task`` in the real Pi; returns ``(Pi's result, the task's ReplayEnv after it)``."""
    from hpd.bench.replay import ReplayEnv
    from hpd.serve.pi_episode import run_pi_episode

    env = ReplayEnv(task, bench, **(env_kwargs or {}))
    tools = {t.name: t for t in env.tools()}

    def execute(name: str, tool_call_id: str, args: dict) -> dict:
        return tools[name].execute(tool_call_id, args)

    res = run_pi_episode(url, prompts=[task.query], tools=[t.declaration() for t in tools.values()],
                         tool_handler=execute, system_prompt=SYSTEM_PROMPT, model_id=policy.model_id,
                         max_tokens=policy.max_new_tokens, temperature=policy.temperature, max_turns=max_turns,
                         api_key=policy.api_key, timeout=policy.timeout)
    return res, env


def _row(task: Any, res: dict, env: Any, judge: Any, keep_messages: bool) -> dict:
    from .rollout import score_transcript

    messages = [m for m in res["messages"] if m.get("role") != "system"]
    tokens = sum(int((m.get("usage") or {}).get("output") or 0) for m in messages if m.get("role") == "assistant")
    return score_transcript(task, messages, env, res["end_reason"], judge, keep_messages=keep_messages,
                            generated_tokens=tokens)


def run_pi_rollouts(bench: Any, tasks: Sequence[Any], policy: PiHarnessPolicy, *, log: Any = None,
                    env_kwargs: dict | None = None, max_turns: int | None = DEFAULT_MAX_TURNS, judge: Any = None,
                    keep_messages: bool = True, on_episode: Callable[[int, int], None] | None = None,
                    **_unused: Any) -> tuple[list[dict], dict]:
    """Run (or resume from ``log``) the episodes of ``tasks`` in the real Pi; returns ``(rows in task order,
    run info)`` like :func:`hpd.eval.rollout.run_rollouts` (``on_episode`` too). A Pi episode that fails (Node
    crash, timeout) raises :class:`PiEpisodeError` naming the task."""
    from hpd.runfolder import write_jsonl

    have = log.read() if log is not None else {}
    rows_by_uid = {t.uid: have[t.uid] for t in tasks if t.uid in have}
    todo = [t for t in tasks if t.uid not in rows_by_uid]
    info = {"harness": "pi", "resumed_rows": len(rows_by_uid), "new_rows": 0, "boundaries": 0, "seconds": 0.0}
    t0 = time.time()
    if on_episode is not None:
        on_episode(len(rows_by_uid), len(tasks))
    with policy.endpoint() as url, ThreadPoolExecutor(max_workers=policy.workers) as pool:
        futures = {pool.submit(run_pi_task, t, bench, url, policy, env_kwargs=env_kwargs, max_turns=max_turns): t
                   for t in todo}
        for fut in as_completed(futures):
            task = futures[fut]
            try:
                res, env = fut.result()
            except Exception as exc:
                for f in futures:
                    f.cancel()
                raise PiEpisodeError(f"task {task.uid}: the real-Pi episode failed: {exc}") from None
            if policy.sessions_dir is not None:
                write_jsonl(policy.sessions_dir / session_name(task.uid), res["messages"])
            row = _row(task, res, env, judge, keep_messages)
            info["boundaries"] += sum(m.get("role") == "assistant" for m in res["messages"])
            policy.stats["episodes"] += 1
            policy.stats["generated_tokens"] += row["generated_tokens"]
            if log is not None:
                log.append([row], sync=False)
            rows_by_uid[task.uid] = row
            info["new_rows"] += 1
            if on_episode is not None:
                on_episode(len(rows_by_uid), len(tasks))
    if log is not None:
        log.sync()
    info["seconds"] = round(time.time() - t0, 3)
    return [rows_by_uid[t.uid] for t in tasks], info
