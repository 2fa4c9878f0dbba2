"""THE evaluation recipe: :func:`evaluate_variant`, what ``hpd eval`` and ``hpd demo`` both run.

One call evaluates one policy (a "variant": the reference, a base model, a trained adapter, later an RL or
preference baseline) on a list of tasks, natively inside the harness, in one run folder:

1. the episodes (:func:`hpd.eval.rollout.run_rollouts`: the one wave loop and the one scorer), resumable
   from the shard log ``<out>/shards/part-*.jsonl`` (one row per task, with its transcript);
2. Action-Acc at the gold-history boundaries (docs/metrics.md): the reference scores its own gold calls
   (:func:`hpd.eval.reference.reference_action_acc`), a model policy acts on the native contexts that
   boundary replay captures (:mod:`hpd.eval.action_acc`); a perturbed reference has none;
3. the metric table (:func:`hpd.eval.rollout.summarize`) with Action-Acc and a per-kind table, written to
   ``<out>/metrics.json``; the rows without transcripts to ``<out>/tasks.jsonl``; the run-folder manifest
   (:mod:`hpd.runfolder`) to ``<out>/manifest.json``. A folder holding another config is refused.

Policies come from :func:`make_episode_policy` (``reference`` or ``model``); a new kind of policy plugs in
there and needs only ``act(states)`` and ``describe()`` (:class:`hpd.bench.episode.EpisodePolicy`).
``harness="pi"`` wraps a model in :class:`hpd.eval.pi_rollout.PiHarnessPolicy`: its episodes run in the real
npm Pi (:func:`hpd.eval.pi_rollout.run_pi_rollouts`) and are scored by the same scorer. ``backend="openai"``
evaluates any OpenAI-compatible endpoint (``model`` is then the endpoint's model name, ``base_url`` its URL).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable, Sequence

from hpd.bench.episode import DEFAULT_MAX_TURNS
from hpd.runfolder import (RunFolderError, config_hash, finish_manifest, new_manifest, open_shards, read_json,
                           read_manifest, write_json, write_jsonl)

from .pi_rollout import PiEpisodeError, PiHarnessPolicy, run_pi_rollouts
from .read import read_metrics, transcripts  # noqa: F401  (the readers of a finished evaluation, re-exported)
from .reference import ReferencePolicy, reference_action_acc
from .rollout import ModelEpisodePolicy, make_model_policy, run_rollouts, summarize

POLICIES = ("reference", "model")
HARNESSES = ("python", "pi", "smolagents")
MODEL_EPISODE_BATCH = 64   # episodes in flight for a model policy (bounds generation memory)


class EvalError(ValueError):
    """A one-line problem with an evaluation's input (unknown policy, unloadable model, other config)."""


def make_episode_policy(name: str, *, perturb: str | None = None, model: str | None = None,
                        adapter: str | None = None, backend: str = "hf", temperature: float = 0.0,
                        max_new_tokens: int = 256, seed: int = 0, batch_size: int = 32, harness: str = "python",
                        base_url: str | None = None, api_key: str | None = None, pi_workers: int = 4,
                        sessions_dir: str | Path | None = None, dtype: str = "auto", generator: Any = None):
    """The episode policy of ``hpd eval --policy`` (``reference`` | ``model``), in the Python harness, (``harness="pi"``)
    the real Pi, or (``harness="smolagents"``) smolagents' ``ToolCallingAgent`` in process (the same policy
    objects as ``python``; :func:`evaluate_variant` then runs the episodes with ``harness="smolagents"``);
    one-line :class:`EvalError`.
    ``generator``: an already built generation backend for ``model`` (a view of a shared vLLM engine with the
    adapter, say) used instead of loading one."""
    if harness not in HARNESSES:
        raise EvalError(f"unknown --harness {harness!r}; choose from {', '.join(HARNESSES)}")
    if (backend == "openai") != (base_url is not None):
        raise EvalError("--backend openai and --base-url URL go together")
    if name == "reference":
        if harness == "pi":
            raise EvalError("--harness pi evaluates a model (--model), not the reference")
        try:
            return ReferencePolicy(perturb=perturb)
        except ValueError as e:
            raise EvalError(str(e)) from None
    if name != "model":
        raise EvalError(f"unknown --policy {name!r}; choose from {', '.join(POLICIES)}")
    if not model:
        raise EvalError("--policy model needs --model DIR (or --model NAME with --backend openai)")
    try:
        if backend == "openai":
            from hpd.policy.backends.openai import OpenAIPolicy

            inner = ModelEpisodePolicy(OpenAIPolicy(base_url, model, api_key=api_key), temperature=temperature,
                                       max_new_tokens=max_new_tokens, seed=seed, name=model)
        elif generator is not None:
            inner = ModelEpisodePolicy(generator, temperature=temperature, max_new_tokens=max_new_tokens, seed=seed)
        else:
            inner = make_model_policy(model, adapter=adapter, backend=backend, temperature=temperature,
                                      max_new_tokens=max_new_tokens, seed=seed, batch_size=batch_size, dtype=dtype)
    except Exception as e:  # unreadable model dir, missing vllm, ...
        raise EvalError(f"cannot load model {model}: {e}") from None
    if harness in ("python", "smolagents"):
        return inner
    from hpd.harness.bridge import BridgeUnavailable, check_bridge

    try:
        check_bridge()
    except BridgeUnavailable as e:
        raise EvalError(f"--harness pi needs the Node bridge: {e}") from None
    served = {"base_url": base_url} if backend == "openai" else {"serve_policy": inner.policy}
    return PiHarnessPolicy(**served, model_id=model if backend == "openai" else "hpd", api_key=api_key,
                           temperature=temperature, max_new_tokens=max_new_tokens, workers=pi_workers, inner=inner,
                           sessions_dir=sessions_dir)


def _action_acc(bench, tasks, policy, *, pool_k: int | None, full_domain: bool, allow_global: bool,
                batch_size: int, harness: str = "pi") -> dict:
    if isinstance(policy, ReferencePolicy):
        if policy.perturb is not None:
            return {"Action-Acc": None, "n_boundaries": None}
        return reference_action_acc(bench, tasks, pool_k)
    if isinstance(policy, PiHarnessPolicy) and policy.inner is not None:
        policy = policy.inner   # Action-Acc: the same model acting at the gold-history boundaries
    if isinstance(policy, ModelEpisodePolicy):
        from hpd.boundary import ReplayConfig
        from hpd.eval.action_acc import action_acc, boundary_contexts, policy_act

        items = boundary_contexts(bench, tasks, ReplayConfig(pool_k=pool_k, full_domain=full_domain,
                                                             allow_global=allow_global, harness=harness))
        return action_acc(bench, items, policy_act(policy), pool_k=pool_k, full_domain=full_domain,
                          batch_size=batch_size, harness=harness)
    return {"Action-Acc": None, "n_boundaries": None}


def evaluate_variant(bench: Any, tasks: Sequence[Any], policy: Any, out: str | Path, *, pool_k: int = 20,
                     full_domain: bool = False, allow_global: bool = False,
                     max_turns: int | None = DEFAULT_MAX_TURNS, judge: Any = None, batch_size: int = 256,
                     shard_size: int = 64, action_batch_size: int = 32, split: str | None = None,
                     config: dict | None = None, inputs: dict | None = None, command: str | None = None,
                     overwrite: bool = False, harness: str = "pi",
                     on_episode: Callable[[int, int], None] | None = None) -> dict:
    """Evaluate ``policy`` on ``tasks`` into the run folder ``out`` (see module docstring); returns the
    summary written to ``metrics.json``. ``batch_size`` episodes advance together (at most
    :data:`MODEL_EPISODE_BATCH` for a model policy); ``action_batch_size`` contexts per Action-Acc call.
    ``config`` adds fields that identify the run (split, limit, variant); ``inputs`` adds manifest inputs
    (the data folder is always one). ``harness``: the :mod:`hpd.harnesses.registry` harness the episodes run
    in, in process (``smolagents``: its own loop and rules, ``max_turns`` as its ``max_steps``; Action-Acc at
    the boundaries of the reference replayed through it); recorded in the config when it is not Pi's.
    ``on_episode(done, total)``: the episodes written so far, at the start and after each one (a progress bar)."""
    from hpd.bench.loader import data_checksum
    from hpd.harnesses.registry import get_harness

    try:
        get_harness(harness)
    except ValueError as e:
        raise EvalError(str(e)) from None
    if harness != "pi" and isinstance(policy, PiHarnessPolicy):
        raise EvalError("the real npm Pi runs Pi's loop, not another harness's")

    if not tasks:
        raise EvalError("no tasks selected")
    out = Path(out)
    k = None if full_domain else pool_k
    env_kwargs = {"k": k, "full_domain": full_domain, "allow_global": allow_global}
    cfg = {"policy": policy.describe(), "pool_k": pool_k, "full_domain": full_domain, "allow_global": allow_global,
           "max_turns": max_turns, "shard_size": shard_size, "tasks": config_hash([t.uid for t in tasks]), **(config or {})}
    if harness != "pi":
        cfg["agent_harness"] = harness
    man = new_manifest(command, cfg, inputs={"data": data_checksum(bench.data_dir), **(inputs or {})},
                       seed=getattr(policy, "seed", None), n_tasks=len(tasks), dtype=cfg["policy"].get("dtype"))
    old = read_manifest(out) if (out / "manifest.json").is_file() else None
    if old is not None and old.get("status") == "complete" and old.get("config_hash") == man["config_hash"] \
            and (out / "metrics.json").is_file() and not overwrite:
        return read_json(out / "metrics.json", "metrics")   # this very evaluation, finished before
    try:
        log = open_shards(out, man, what="an evaluation", key="uid", overwrite=overwrite)
    except RunFolderError as e:
        raise EvalError(str(e)) from None
    write_json(out / "manifest.json", man)
    is_model = isinstance(policy, ModelEpisodePolicy)
    run = run_pi_rollouts if isinstance(policy, PiHarnessPolicy) else run_rollouts
    extra = {"harness": harness} if harness != "pi" else {}
    with log:
        try:
            rows, info = run(bench, tasks, policy, log=log, shard_size=shard_size, env_kwargs=env_kwargs,
                             batch_size=min(batch_size, MODEL_EPISODE_BATCH) if is_model else batch_size,
                             max_turns=max_turns, judge=judge, on_episode=on_episode, **extra)
        except PiEpisodeError as e:
            raise EvalError(str(e)) from None
    rows = [{k_: v for k_, v in r.items() if k_ != "messages"} for r in rows]
    summary = summarize(rows)
    summary["rollout"] = info
    if hasattr(policy, "stats"):
        summary["rollout"]["policy_stats"] = dict(policy.stats)
    summary.update(_action_acc(bench, tasks, policy, pool_k=k, full_domain=full_domain, allow_global=allow_global,
                               batch_size=action_batch_size, harness=harness))
    summary["by_kind"] = {kind: summarize_kind(rows, kind) for kind in sorted({r["kind"] for r in rows})}
    summary["policy"] = getattr(policy, "name", type(policy).__name__)
    summary["split"] = split
    write_json(out / "metrics.json", summary)
    write_jsonl(out / "tasks.jsonl", rows)
    write_json(out / "manifest.json", finish_manifest(man, outputs=["metrics.json", "tasks.jsonl", "shards/"]))
    return summary


def summarize_kind(rows: list[dict], kind: str) -> dict:
    """The metric table of the rows of one task kind (``parallel`` / ``sequential``)."""
    from hpd.eval.metrics import aggregate

    return aggregate([r for r in rows if r["kind"] == kind])
