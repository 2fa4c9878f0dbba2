"""``hpd replay``: replay reference trajectories through the harness into Boundary shards + documents.

Thin layer over :func:`hpd.boundary.run_replay`; prints the diagnostics (boundaries per task, document
token lengths per privilege level, share of non-compliant reference actions) and writes
``<out>/manifest.json`` (``n_tasks``, ``n_boundaries``), ``<out>/replay_stats.json``, the shards and
``<out>/inspector.html``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

PRIV_CHOICES = ("runtime", "plan", "oracle", "all")


def _load_tokenizer(path: str):
    try:
        from transformers import AutoTokenizer

        return AutoTokenizer.from_pretrained(path, local_files_only=True)
    except Exception as e:  # noqa: BLE001 - any failure is a bad parameter
        raise typer.BadParameter(f"cannot load a tokenizer from {path}: {str(e).splitlines()[0]}") from None


def _print_stats(stats: dict) -> None:
    bpt = stats["boundaries_per_task"]
    typer.echo(f"tasks {stats['n_tasks']}  boundaries {stats['n_boundaries']}  (D2 count {stats['n_boundaries_d2']}, "
               f"{'matches' if stats['matches_d2'] else 'DIFFERS'})")
    typer.echo(f"boundaries per task: mean {bpt['mean']}  min {bpt['min']}  max {bpt['max']}  hist {bpt['hist']}")
    for k, v in bpt["by_task_kind"].items():
        typer.echo(f"  {k}: {v['tasks']} tasks, mean {v['mean']}, hist {v['hist']}")
    typer.echo(f"document tokens ({stats['token_method']}):")
    for p, d in stats["doc_tokens"].items():
        typer.echo(f"  {p:8s} mean {d.get('mean')}  p50 {d.get('p50')}  p90 {d.get('p90')}  p99 {d.get('p99')}  "
                   f"max {d.get('max')}")
    nc = stats["noncompliant_reference"]
    typer.echo(f"non-compliant reference actions: {nc['n']} ({nc['share']:.2%})  {nc['issues']}")
    us = stats["unscorable_reference"]
    typer.echo(f"unscorable reference actions (dropped from Action-Acc): {us['n']} ({us['share']:.2%})")
    typer.echo(f"privilege levels compiled: {', '.join(stats['privileges'])}")


def register(app: typer.Typer) -> None:
    @app.command()
    def replay(
        data: Optional[Path] = typer.Option(None, "--data", help="TRAJECT-Bench-layout data folder "
                                            "(default: $HPD_TRAJECT_DIR or ../shared/traject-bench/public_data)"),
        out: Path = typer.Option(..., "--out", help="output folder (shards, manifest.json, inspector.html)"),
        privilege: str = typer.Option("all", "--privilege", help="document level(s) to compile: runtime|plan|oracle|all"),
        split_file: Optional[Path] = typer.Option(None, "--split-file", help="restrict to the uids of a split file"),
        split: Optional[str] = typer.Option(None, "--split", help="split name inside --split-file (e.g. train, test)"),
        limit: Optional[int] = typer.Option(None, "--limit", help="replay only the first N selected tasks"),
        sample: Optional[int] = typer.Option(None, "--sample", help="replay a seeded random subset of N selected "
                                             "tasks (kept in load order; applied before --limit)"),
        seed: int = typer.Option(0, "--seed", help="seed of --sample"),
        parallel: str = typer.Option("one_turn", "--parallel", help="grouping of parallel reference calls: one_turn|one_per_turn"),
        sequential: str = typer.Option("one_per_turn", "--sequential", help="grouping of sequential calls: one_turn|one_per_turn"),
        max_turns: str = typer.Option("auto", "--max-turns", help="turn budget: auto (reference turns + 2), none, or N"),
        pool_k: int = typer.Option(20, "--pool-k", help="tools shown per episode (gold + seeded distractors)"),
        shard_tasks: int = typer.Option(250, "--shard-tasks", help="tasks per shard"),
        tokenizer: Optional[str] = typer.Option(None, "--tokenizer", help="local tokenizer folder for exact token counts"),
        inspector_tasks: int = typer.Option(500, "--inspector-tasks", help="tasks embedded in the inspector (0 = all)"),
        overwrite: bool = typer.Option(False, "--overwrite", help="replace a replay with another config in --out"),
        workers: int = typer.Option(1, "--workers", help="processes replaying shards in parallel (same output)"),
        quiet: bool = typer.Option(False, "--quiet", help="no progress lines"),
        harness: str = typer.Option("pi", "--harness", help="the harness the reference is replayed through: pi "
                                    "(hpd.harness) | smolagents (ToolCallingAgent; its own prompt, tool names and "
                                    "final_answer rule; --max-turns is its max_steps)"),
        skip_bad: bool = typer.Option(False, "--skip-bad", help="skip malformed data entries (counted, listed in "
                                      "manifest.json) instead of stopping"),
        strict_catalog: bool = typer.Option(False, "--strict-catalog", help="a step whose tool is missing from the "
                                            "catalog makes its entry malformed (default: an unscorable step)"),
    ) -> None:
        """Replay reference trajectories through the harness; write Boundary shards, documents and the inspector."""
        from hpd.bench.entries import BadEntry, BadEntryError, skipped_lines
        from hpd.boundary import ReplayConfig, run_replay
        from hpd.runfolder import RunFolderError, os_error_line

        if privilege not in PRIV_CHOICES:
            raise typer.BadParameter(f"--privilege must be one of {', '.join(PRIV_CHOICES)}")
        privs = ("runtime", "plan", "oracle") if privilege == "all" else (privilege,)
        if max_turns == "auto":
            mt = "auto"
        elif max_turns == "none":
            mt = None
        else:
            try:
                mt = int(max_turns)
            except ValueError:
                raise typer.BadParameter("--max-turns must be auto, none or an integer") from None
        if workers < 1:
            raise typer.BadParameter("--workers must be >= 1")
        if shard_tasks < 1:
            raise typer.BadParameter("--shard-tasks must be >= 1")
        try:
            cfg = ReplayConfig(parallel=parallel, sequential=sequential, max_turns=mt, pool_k=pool_k, privileges=privs,
                               harness=harness)
        except ValueError as e:
            raise typer.BadParameter(str(e)) from None
        tok = _load_tokenizer(tokenizer) if tokenizer else None
        try:
            res = run_replay(
                data, out, cfg, split_file=split_file, split=split, limit=limit, sample=sample, seed=seed,
                shard_tasks=shard_tasks, tokenizer=tok, tokenizer_path=tokenizer, overwrite=overwrite,
                progress=None if quiet else (lambda s: typer.echo(s, err=True)), workers=workers,
                skip_bad=skip_bad, strict_catalog=strict_catalog,
            )
            from hpd.report.inspector import write_inspector

            path = write_inspector(out, out / "inspector.html",
                                   max_tasks=None if inspector_tasks == 0 else inspector_tasks)
        except (RunFolderError, BadEntryError, FileNotFoundError) as e:
            typer.echo(f"error: {e}", err=True)
            raise typer.Exit(2) from None
        except OSError as e:   # a full disk: finished shards stay on disk
            typer.echo(f"error: {os_error_line(e)}", err=True)
            raise typer.Exit(1) from None
        for line in skipped_lines([BadEntry(**r) for r in res["manifest"]["bad_entries"]]):
            typer.echo(line, err=True)
        _print_stats(res["stats"])
        typer.echo(f"inspector: {path.name}")
        typer.echo(f"wrote {out / 'manifest.json'}")
