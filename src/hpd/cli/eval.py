"""``hpd eval``: run a policy natively in the harness over TRAJECT-Bench tasks and print the metric table.

Policies are built by ``make_policy(name, opts)``; ``reference`` replays the gold actions. A model policy
plugs in by adding a branch there (options such as ``--model/--adapter`` go into ``opts``) that returns an
``hpd.bench.episode.EpisodePolicy``. Writes ``<out>/metrics.json`` (stable keys, ``hpd.eval.metrics``),
``<out>/tasks.jsonl`` (one row per task) and ``<out>/manifest.json``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Optional

import typer

POLICIES = ("reference", "model")
TABLE_KEYS = ("TS", "F1", "Step-SR", "Step-SR_macro", "RC", "Exact", "Action-Acc",
              "EM_TRAJECT", "Inclusion", "Inclusion_buggy", "Usage", "TS_judge")


def make_policy(name: str, opts: dict):
    """The ``EpisodePolicy`` for ``--policy`` (extension point for model policies)."""
    if name == "reference":
        from hpd.eval.reference import ReferencePolicy
        return ReferencePolicy(perturb=opts.get("perturb"))
    if name == "model":  # a local model (policy helper: hpd.eval.rollout); needs --model
        from hpd.eval.rollout import make_model_policy
        if not opts.get("model"):
            raise typer.BadParameter("--policy model needs --model DIR")
        try:
            return make_model_policy(opts["model"], adapter=opts.get("adapter"), backend=opts.get("backend", "hf"),
                                     temperature=opts.get("temperature", 0.0),
                                     max_new_tokens=opts.get("max_new_tokens", 256), seed=opts.get("seed", 0))
        except Exception as e:  # unreadable model dir, missing vllm, ...
            raise typer.BadParameter(f"cannot load model {opts['model']}: {e}") from None
    raise typer.BadParameter(f"unknown --policy {name!r}; choose from {', '.join(POLICIES)}")


def format_metrics(summary: dict) -> str:
    lines = [f"{'metric':<18}{'value':>8}"]
    for k in TABLE_KEYS:
        if summary.get(k) is not None:
            lines.append(f"{k:<18}{summary[k]:>8.3f}")
    lines.append(f"{'n_tasks':<18}{summary['n_tasks']:>8}")
    if summary.get("n_boundaries") is not None:
        lines.append(f"{'n_boundaries':<18}{summary['n_boundaries']:>8}  (dropped, unscorable target: {summary.get('n_dropped')})")
    lines.append(f"{'scorable steps':<18}{summary['n_scorable_steps']:>8}")
    lines.append("match levels: " + ", ".join(f"{k}={v}" for k, v in summary.get("match_levels", {}).items()))
    return "\n".join(lines)


def register(app: typer.Typer) -> None:
    @app.command(name="eval")
    def eval_cmd(
        out: Path = typer.Option(..., "--out", help="output folder: metrics.json, tasks.jsonl, manifest.json"),
        policy: str = typer.Option("reference", "--policy", help=f"policy: {', '.join(POLICIES)}"),
        data: Optional[Path] = typer.Option(None, "--data", help="TRAJECT-Bench-layout data folder "
                                            "(default: $HPD_TRAJECT_DIR or ../shared/traject-bench/public_data)"),
        split_file: Optional[Path] = typer.Option(None, "--split-file", help="split.json from `hpd data split`"),
        split: Optional[str] = typer.Option(None, "--split", help="part of --split-file to evaluate (train|test)"),
        limit: Optional[int] = typer.Option(None, "--limit", help="only the first N selected tasks"),
        pool_k: int = typer.Option(20, "--pool-k", help="tools per episode: gold + seeded same-domain distractors"),
        full_domain: bool = typer.Option(False, "--full-domain", help="show the whole domain catalog instead"),
        allow_global: bool = typer.Option(False, "--allow-global", help="replay: allow the cross-task global cache"),
        max_turns: int = typer.Option(15, "--max-turns", help="turn budget per episode (our policy)"),
        perturb: Optional[str] = typer.Option(None, "--perturb", help="reference only: drop_call|shuffle (metric checks)"),
        judge_url: Optional[str] = typer.Option(None, "--judge-url", help="OpenAI-compatible base URL: enables TS_judge"),
        judge_model: str = typer.Option("judge", "--judge-model", help="judge model name"),
        judge_cache: Optional[Path] = typer.Option(None, "--judge-cache", help="JSONL verdict cache (default <out>/judge_cache.jsonl)"),
        batch_size: int = typer.Option(256, "--batch-size", help="episodes advanced together"),
        model: Optional[Path] = typer.Option(None, "--model", help="local model dir (implies --policy model)"),
        adapter: Optional[Path] = typer.Option(None, "--adapter", help="PEFT LoRA adapter dir for --model"),
        backend: str = typer.Option("hf", "--backend", help="model backend: hf | vllm"),
        temperature: float = typer.Option(0.0, "--temperature", help="model sampling temperature (0 = greedy)"),
        max_new_tokens: int = typer.Option(256, "--max-new-tokens", help="model: tokens per turn"),
        seed: int = typer.Option(0, "--seed", help="model sampling seed"),
        shard_size: int = typer.Option(64, "--shard-size", help="model: episodes per resumable shard (<out>/rollouts)"),
    ) -> None:
        """Evaluate a policy inside the harness; print the metric table and write <out>/metrics.json."""
        from hpd.bench.loader import load_bench
        from hpd.bench.split import select
        from hpd.eval.reference import evaluate, reference_action_acc
        from hpd.report.common import base_manifest, write_json

        if (split is None) != (split_file is None):
            raise typer.BadParameter("--split and --split-file go together")
        if perturb is not None and perturb not in ("drop_call", "shuffle"):
            raise typer.BadParameter("--perturb must be drop_call or shuffle")
        if max_turns < 1 or pool_k < 1 or batch_size < 1 or (limit is not None and limit < 1):
            raise typer.BadParameter("--max-turns, --pool-k, --batch-size and --limit must be >= 1")
        if model is not None:
            policy = "model"
            if not (model / "config.json").is_file():
                raise typer.BadParameter(f"{model} is not a model directory (no config.json)")
        pol = make_policy(policy, {"perturb": perturb, "model": str(model) if model else None,
                                   "adapter": str(adapter) if adapter else None, "backend": backend,
                                   "temperature": temperature, "max_new_tokens": max_new_tokens, "seed": seed})
        try:
            bench = load_bench(data)
        except (FileNotFoundError, ValueError) as e:
            raise typer.BadParameter(str(e)) from None
        tasks = bench.tasks
        if split_file is not None:
            try:
                sp = json.loads(Path(split_file).read_text(encoding="utf-8"))
                tasks = select(tasks, sp, split)
            except (OSError, ValueError) as e:
                raise typer.BadParameter(f"cannot use split file {split_file}: {e}") from None
        if limit is not None:
            tasks = tasks[:limit]
        if not tasks:
            raise typer.BadParameter("no tasks selected")
        judge = None
        if judge_url:
            from hpd.eval.judge import Judge
            judge = Judge(judge_url, judge_model, cache_path=judge_cache or (out / "judge_cache.jsonl"))
        env_kwargs = {"k": None if full_domain else pool_k, "full_domain": full_domain, "allow_global": allow_global}
        if policy == "model":  # resumable, batched rollouts (hpd.eval.rollout), shards in <out>/rollouts
            from hpd.eval.rollout import evaluate as evaluate_model
            rows, summary = evaluate_model(
                bench, tasks, pol, out_dir=out / "rollouts", batch_size=min(batch_size, 64), shard_size=shard_size,
                env_kwargs=env_kwargs, max_turns=max_turns, judge=judge, data_path=str(bench.data_dir),
                config={"policy": pol.describe(), "adapter": str(adapter) if adapter else None,
                        "split": split, "split_file": str(split_file) if split_file else None, "limit": limit})
        else:
            rows, summary = evaluate(bench, tasks, pol, batch_size=batch_size, env_kwargs=env_kwargs,
                                     max_turns=max_turns, judge=judge)
        if policy == "reference" and perturb is None:
            summary.update(reference_action_acc(bench, tasks, None if full_domain else pool_k))
        elif policy == "model":  # the model at every gold-history boundary (native contexts from replay)
            from hpd.boundary import ReplayConfig
            from hpd.eval.action_acc import action_acc, boundary_contexts, policy_act
            k = None if full_domain else pool_k
            items = boundary_contexts(bench, tasks, ReplayConfig(pool_k=k, full_domain=full_domain,
                                                                 allow_global=allow_global))
            summary.update(action_acc(bench, items, policy_act(pol), pool_k=k, full_domain=full_domain))
        else:
            summary.update({"Action-Acc": None, "n_boundaries": None})
        by_kind = {}
        from hpd.eval.metrics import aggregate
        for kind in sorted({r["kind"] for r in rows}):
            by_kind[kind] = {k: v for k, v in aggregate([r for r in rows if r["kind"] == kind]).items()}
        summary["by_kind"] = by_kind
        summary["policy"] = policy
        summary["split"] = split
        typer.echo(format_metrics(summary))
        config = {"policy": policy, "split": split, "split_file": str(split_file) if split_file else None,
                  "limit": limit, "pool_k": pool_k, "full_domain": full_domain, "allow_global": allow_global,
                  "max_turns": max_turns, "perturb": perturb, "judge_url": judge_url, "judge_model": judge_model}
        if policy == "model":
            config.update({"model": pol.describe(), "adapter": str(adapter) if adapter else None})
        write_json(out / "metrics.json", summary)
        with open(out / "tasks.jsonl", "w", encoding="utf-8") as f:
            for r in rows:
                f.write(json.dumps(r, ensure_ascii=False) + "\n")
        write_json(out / "manifest.json", base_manifest("eval", config, str(bench.data_dir), None))
        typer.echo(f"wrote {out / 'metrics.json'}")
