"""``hpd eval``: run a policy natively in the harness over TRAJECT-Bench tasks and print the metric table.

Thin layer: it parses options, builds the policy (:func:`hpd.eval.variant.make_episode_policy`; ``reference``
replays the gold actions) and calls :func:`hpd.eval.variant.evaluate_variant`, which writes
``<out>/metrics.json``, ``<out>/tasks.jsonl``, the shard log ``<out>/shards/`` and ``<out>/manifest.json``.

``--harness pi`` runs every episode in the real npm Pi (the bridge) against ``hpd serve`` (started here for
``--model DIR``) or against ``--base-url``; its Pi session logs go to ``<out>/sessions/``.
``--backend openai --base-url URL --model NAME`` evaluates any OpenAI-compatible endpoint.
"""

from __future__ import annotations

from contextlib import contextmanager
from pathlib import Path
from typing import Optional

import typer

from hpd.cli.options import dtype_option

TABLE_KEYS = ("TS", "F1", "Step-SR", "Step-SR_macro", "RC", "Exact", "Action-Acc",
              "EM_TRAJECT", "Inclusion", "Inclusion_buggy", "Usage", "TS_judge")


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


def _load_tasks(data: Path, skip_bad: bool, strict_catalog: bool, split_file: Path | None, split: str | None,
                limit: int | None, spread: bool = False):
    """The benchmark and the tasks to evaluate (the split's, the first ``limit`` in order or, with ``spread``,
    spread over kinds and domains as hpd demo's held-out set); bad input is a one-line error."""
    from hpd.bench.entries import BadEntryError, skipped_lines
    from hpd.bench.loader import load_bench
    from hpd.bench.split import SplitFileError, select

    try:
        bench = load_bench(data, skip_bad=skip_bad, strict_catalog=strict_catalog)
    except BadEntryError as e:
        typer.echo(f"error: {e}", err=True)
        raise typer.Exit(2) from None
    except (FileNotFoundError, ValueError) as e:
        raise typer.BadParameter(str(e)) from None
    for line in skipped_lines(bench.bad):
        typer.echo(line, err=True)
    tasks = bench.tasks
    if split_file is not None:
        try:
            tasks = select(tasks, split_file, split)
        except SplitFileError as e:
            raise typer.BadParameter(f"cannot use split file {split_file}: {e}") from None
    if spread:
        from hpd.demo import held_out

        tasks = held_out(tasks, limit)
    else:
        tasks = tasks[:limit] if limit is not None else tasks
    if not tasks:
        raise typer.BadParameter("no tasks selected")
    return bench, tasks


def eval_cmd(
    out: Path = typer.Option(..., "--out", help="output folder: metrics.json, tasks.jsonl, manifest.json"),
    policy: str = typer.Option("reference", "--policy", help="policy: reference | model"),
    data: Optional[Path] = typer.Option(None, "--data", help="TRAJECT-Bench-layout data folder "
                                        "(default: $HPD_TRAJECT_DIR or ../shared/traject-bench/public_data)"),
    split_file: Optional[Path] = typer.Option(None, "--split-file", help="split.json from `hpd data split`"),
    split: Optional[str] = typer.Option(None, "--split", help="part of --split-file to evaluate (train|test)"),
    limit: Optional[int] = typer.Option(None, "--limit", help="only the first N selected tasks"),
    spread: bool = typer.Option(False, "--spread", help="with --limit: N tasks spread over kinds and domains, "
                                "hpd demo's held-out set (hpd.demo.held_out: with the demo's data, split file and "
                                "--split test, the cells' tasks), instead of the first N in split order"),
    pool_k: int = typer.Option(20, "--pool-k", help="tools per episode: gold + seeded same-domain distractors"),
    full_domain: bool = typer.Option(False, "--full-domain", help="show the whole domain catalog instead"),
    allow_global: bool = typer.Option(False, "--allow-global", help="replay: allow the cross-task global cache"),
    max_turns: int = typer.Option(15, "--max-turns", help="turn budget per episode (our policy)"),
    perturb: Optional[str] = typer.Option(None, "--perturb", help="reference only: drop_call|shuffle (metric checks)"),
    judge_url: Optional[str] = typer.Option(None, "--judge-url", help="OpenAI-compatible base URL: enables TS_judge"),
    judge_model: str = typer.Option("judge", "--judge-model", help="judge model name"),
    judge_cache: Optional[Path] = typer.Option(None, "--judge-cache", help="JSONL verdict cache (default <out>/judge_cache.jsonl)"),
    batch_size: int = typer.Option(256, "--batch-size", help="episodes advanced together"),
    model: Optional[str] = typer.Option(None, "--model", help="local model dir, or with --backend openai the "
                                        "endpoint's model name (implies --policy model)"),
    adapter: Optional[Path] = typer.Option(None, "--adapter", help="PEFT LoRA adapter dir for --model"),
    backend: str = typer.Option("auto", "--backend", help="model backend: auto | hf | vllm | openai (any "
                                "OpenAI-compatible endpoint: --base-url, --model NAME). auto: openai with --base-url, "
                                "hf for the tiny model or without vLLM, else vllm (adapters merged on the CPU)"),
    base_url: Optional[str] = typer.Option(None, "--base-url", help="--backend openai: the endpoint, e.g. "
                                           "http://127.0.0.1:8000/v1 (hpd serve)"),
    api_key: Optional[str] = typer.Option(None, "--api-key", help="--backend openai: bearer token (default "
                                          "$OPENAI_API_KEY)"),
    harness: str = typer.Option("python", "--harness", help="python: hpd.harness (batched, in process); pi: the "
                                "real npm Pi through the bridge, against hpd serve or --base-url; smolagents: "
                                "smolagents' ToolCallingAgent (batched, in process; --max-turns is its max_steps)"),
    pi_workers: int = typer.Option(4, "--pi-workers", help="--harness pi: episodes (Node processes) at once"),
    temperature: float = typer.Option(0.0, "--temperature", help="model sampling temperature (0 = greedy)"),
    max_new_tokens: int = typer.Option(256, "--max-new-tokens", help="model: tokens per turn"),
    dtype: str = dtype_option(note="--backend hf and vllm."),
    seed: int = typer.Option(0, "--seed", help="model sampling seed"),
    shard_size: int = typer.Option(64, "--shard-size", help="episodes per chunk of the resumable run (<out>/shards)"),
    overwrite: bool = typer.Option(False, "--overwrite", help="replace an evaluation of another config in --out"),
    skip_bad: bool = typer.Option(False, "--skip-bad", help="skip malformed data entries (counted) instead of stopping"),
    strict_catalog: bool = typer.Option(False, "--strict-catalog", help="a step whose tool is missing from the "
                                        "catalog makes its entry malformed (default: an unscorable step)"),
) -> None:
    """Evaluate a policy inside the harness; print the metric table and write <out>/metrics.json."""
    from hpd.runfolder import RunFolderError, os_error_line, prepare_out
    from hpd.eval.variant import EvalError, evaluate_variant, make_episode_policy
    from hpd.policy.backends import resolve_backend

    if (split is None) != (split_file is None):
        raise typer.BadParameter("--split and --split-file go together")
    if max_turns < 1 or pool_k < 1 or batch_size < 1 or pi_workers < 1 or (limit is not None and limit < 1):
        raise typer.BadParameter("--max-turns, --pool-k, --batch-size, --pi-workers and --limit must be >= 1")
    if backend == "auto":   # resolved only where a model generates (--policy reference runs no backend)
        backend = "openai" if base_url is not None else resolve_backend("auto", model) if model else "hf"
    if model is not None:
        policy = "model"
        if backend != "openai" and base_url is None and not (Path(model) / "config.json").is_file():
            raise typer.BadParameter(f"{model} is not a model directory (no config.json)")
    try:
        pol = make_episode_policy(policy, perturb=perturb, model=model, adapter=str(adapter) if adapter else None,
                                  backend=backend, temperature=temperature, max_new_tokens=max_new_tokens,
                                  seed=seed, harness=harness, base_url=base_url, api_key=api_key,
                                  pi_workers=pi_workers, sessions_dir=out / "sessions", dtype=dtype)
    except EvalError as e:
        raise typer.BadParameter(str(e)) from None
    try:   # the backend stops however the run ends (a vLLM engine would outlive it in a process that goes on)
        bench, tasks = _load_tasks(data, skip_bad, strict_catalog, split_file, split, limit, spread)
        judge = None
        if judge_url:
            from hpd.eval.judge import Judge
            judge = Judge(judge_url, judge_model, cache_path=judge_cache or (out / "judge_cache.jsonl"))
        try:
            prepare_out(out)
            with _episode_bar(f"hpd eval {harness}") as on_episode:
                summary = evaluate_variant(
                    bench, tasks, pol, out, pool_k=pool_k, full_domain=full_domain, allow_global=allow_global,
                    max_turns=max_turns, judge=judge, batch_size=batch_size, shard_size=shard_size, split=split,
                    config={"split": split, "split_file": str(split_file) if split_file else None, "limit": limit,
                            **({"spread": True} if spread else {}),
                            "judge_url": judge_url, "judge_model": judge_model, "harness": harness,
                            "base_url": base_url},
                    inputs={"split_file": split_file, "model": None if backend == "openai" else model,
                            "adapter": adapter},
                    command="hpd eval", on_episode=on_episode,
                    overwrite=overwrite, harness="smolagents" if harness == "smolagents" else "pi")
        except (EvalError, RunFolderError) as e:
            typer.echo(f"error: {e}", err=True)
            raise typer.Exit(2) from None
        except OSError as e:   # a full disk: the finished episodes stay in <out>/shards
            typer.echo(f"error: {os_error_line(e)}", err=True)
            raise typer.Exit(1) from None
        typer.echo(format_metrics(summary))
        typer.echo(f"wrote {out / 'metrics.json'}")
    finally:
        pol.close()


def register(app: typer.Typer) -> None:
    app.command(name="eval")(eval_cmd)


@contextmanager
def _episode_bar(desc: str):
    """A tqdm bar on stderr over the episodes (resumed ones counted from the start); yields ``on_episode``."""
    from tqdm.auto import tqdm

    bar = None

    def on_episode(done: int, total: int) -> None:
        nonlocal bar
        if bar is None:
            bar = tqdm(total=total, initial=done, desc=desc, unit="episode", dynamic_ncols=True)
        else:
            bar.update(done - bar.n)
    try:
        yield on_episode
    finally:
        if bar is not None:
            bar.close()
