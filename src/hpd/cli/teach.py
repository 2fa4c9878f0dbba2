"""``hpd teach``: teacher proposals -> harness verification -> ranked targets (thin CLI over hpd.teacher)."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Optional

import typer

from hpd.cli.options import dtype_option


def _fail(con, msg) -> None:
    con.print(f"[red]error:[/red] {msg}")
    raise typer.Exit(2)


def _manifest(boundaries: Path, info: dict, split_file: Path | None, split: str, limit: int | None,
              model: Path | None, teacher: str, sampling: dict, seed: int, dtype: str | None = None) -> dict:
    """What ``hpd teach`` adds to the teach run's manifest (:func:`hpd.teacher.run.teach` writes it)."""
    from hpd.bench.loader import data_checksum
    from hpd.runfolder import checksum

    return {
        "command": "hpd teach",
        "inputs": {"boundaries": {"path": str(boundaries), "sha256": checksum(boundaries / "boundaries", "*.jsonl")},
                   "data": data_checksum(info["data"]) if info.get("data") else {"path": None, "sha256": None},
                   "split_file": split_file, "model": model},
        "seed": seed, "teacher": teacher, "model": str(model) if model else None, "sampling": sampling,
        "dtype": dtype,   # what the model teacher computes in (None: a scripted or API teacher)
        "boundaries_info": info,
        "result_fields": {"model": str(model) if model else None, "sampling": sampling,
                          "split_file": str(split_file) if split_file else None,
                          "split": split if split_file else None, "limit": limit},
    }


def teacher_dtype(t) -> str | None:
    """The dtype a model teacher computes in (its backend's ``dtype``: hf, vllm); None for the others."""
    own = getattr(getattr(t, "policy", None), "dtype", None)
    return own if isinstance(own, str) else None


def _run(con, items, teacher, cfg, out: Path, manifest: dict, overwrite: bool):
    """The teach loop behind a progress bar; a folder of another config is a one-line error."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn

    from hpd.teacher.run import ConfigMismatch, teach

    with Progress(TextColumn("teach"), BarColumn(), MofNCompleteColumn(), TextColumn("boundaries"),
                  TimeElapsedColumn(), TimeRemainingColumn(), console=con, transient=True) as bar:
        task = bar.add_task("teach", total=len(items))
        try:
            return teach(items, teacher, cfg, out, manifest=manifest, overwrite=overwrite,
                         on_wave=lambda n, total: bar.update(task, completed=n, total=total))
        except ConfigMismatch as exc:
            bar.stop()
            _fail(con, exc)


def teach_cmd(
    boundaries: Path = typer.Option(..., "--boundaries", help="Boundary shards from `hpd replay --out` (a folder)."),
    out: Path = typer.Option(..., "--out", help="Output folder (append-only shards, targets.jsonl, diagnostics)."),
    teacher: str = typer.Option("auto", "--teacher", help="auto | hf | vllm | openai | oracle | reference | "
                                "reference-perturbed | garbage. auto: the model teacher on vllm where vLLM runs, hf "
                                "for the tiny model or without vLLM (hpd.policy.backends.resolve_backend)"),
    model: Optional[Path] = typer.Option(None, "--model", help="Teacher model folder (hf/vllm); the base model by default."),
    k: int = typer.Option(2, "-K", "--k", help="Candidates per attempt (one batched call with n=K)."),
    attempts: int = typer.Option(5, "--attempts", help="Max attempts per boundary."),
    fallback: str = typer.Option("reference", "--fallback", help="After N failed attempts: reference (flagged) | drop."),
    privilege: str = typer.Option("plan", "--privilege", help="Control-document level the teacher sees: runtime | plan | oracle."),
    seed: int = typer.Option(0, "--seed"),
    stop_at_first: bool = typer.Option(True, "--stop-at-first/--all-attempts", help="Stop at the first attempt with a verified candidate."),
    batch: int = typer.Option(16, "--batch", help="Boundaries in flight per teacher call (does not change results)."),
    max_new_tokens: int = typer.Option(256, "--max-new-tokens"),
    limit: Optional[int] = typer.Option(None, "--limit", help="Only the first N training boundaries."),
    split_file: Optional[Path] = typer.Option(None, "--split-file", help="Split file (e.g. split.json of `hpd data split`): keep only --split tasks."),
    split: str = typer.Option("train", "--split", help="Split name inside --split-file."),
    data: Optional[Path] = typer.Option(None, "--data", help="Data folder for restoring harness states (default: the replay's)."),
    gen_batch: int = typer.Option(8, "--gen-batch", help="hf: sequences per forward pass (memory knob)."),
    device: Optional[str] = typer.Option(None, "--device", help="hf: cpu | cuda (default: cuda when available)."),
    dtype: str = dtype_option(note="hf and vllm teachers."),
    base_url: Optional[str] = typer.Option(None, "--base-url", help="OpenAI-compatible endpoint (--teacher openai)."),
    api_model: Optional[str] = typer.Option(None, "--api-model", help="Model name at --base-url."),
    overwrite: bool = typer.Option(False, "--overwrite", help="Discard an earlier run in --out instead of resuming it."),
    harness: Optional[str] = typer.Option(None, "--harness", help="pi | smolagents: checked against the harness "
                                          "the boundaries were replayed through (their restore recipe decides it)."),
) -> None:
    """Propose K candidates per boundary with a teacher that sees the control document, verify them
    on a fork of the harness, rank the verified ones against the reference, write targets."""
    from rich.console import Console

    from hpd.teacher.boundaries import BoundaryLoadError, load_items
    from hpd.teacher.diagnostics import render_table
    from hpd.teacher.factory import TeacherConfigError, build_teacher, resolve_teacher
    from hpd.teacher.run import TeachConfig

    con = Console(stderr=False)
    if privilege not in ("runtime", "plan", "oracle"):
        raise typer.BadParameter(f"--privilege must be runtime, plan or oracle, not {privilege!r}")
    if teacher == "oracle" and privilege != "oracle":
        privilege = "oracle"  # the oracle teacher reads the oracle-level document by definition
    try:
        cfg = TeachConfig(k=k, attempts=attempts, stop_at_first=stop_at_first, fallback=fallback,
                          privilege=privilege, seed=seed, batch_boundaries=batch)
    except ValueError as exc:
        raise typer.BadParameter(str(exc)) from None
    try:
        items, info = load_items(boundaries, split=split_file, split_name=split, limit=limit, privilege=privilege,
                                 data=data)
    except (BoundaryLoadError, ValueError) as exc:
        _fail(con, exc)
    if not items:
        _fail(con, "no training boundaries to teach")
    if harness is not None and harness != info.get("harness", "pi"):
        _fail(con, f"{boundaries} was replayed through {info.get('harness', 'pi')}, not {harness} "
                   f"(run `hpd replay --harness {harness}` first)")
    try:
        teacher = resolve_teacher(teacher, str(model) if model else None)
        t = build_teacher(teacher, model=str(model) if model else None, privilege=privilege,
                          max_new_tokens=max_new_tokens, base_url=base_url, api_model=api_model, device=device,
                          **({"batch_size": gen_batch} if teacher == "hf" else {}),
                          **({"dtype": dtype} if teacher in ("hf", "vllm") else {}))
    except TeacherConfigError as exc:
        raise typer.BadParameter(str(exc)) from None
    manifest = _manifest(boundaries, info, split_file, split, limit, model, teacher,
                         getattr(t, "sampling", lambda: {})(), seed, teacher_dtype(t))
    con.print(f"teach: {len(items)} boundaries, teacher={teacher}, K={k}, attempts={attempts}, privilege={privilege}")
    t0 = time.perf_counter()
    res = _run(con, items, t, cfg, out, manifest, overwrite)
    dt = time.perf_counter() - t0
    render_table(res.diagnostics, con)
    try:
        _write_inspector(boundaries, out, res.records)
    except Exception as exc:  # the inspector is a convenience; never fail the stage on it
        con.print(f"[yellow]inspector not written:[/yellow] {exc}")
    con.print(f"{len(items)} boundaries in {dt:.1f}s ({len(items) / max(dt, 1e-9):.1f} boundaries/s); wrote {out}/targets.jsonl, "
              f"{out}/diagnostics.json, {out}/coverage.png, {out}/inspector.html")


def _write_inspector(boundaries: Path, out: Path, records: list[dict], max_tasks: int | None = 1000) -> Path:
    """``<out>/inspector.html``: the replay's boundaries with this run's candidates, verdicts and targets."""
    from hpd.boundary.store import iter_records
    from hpd.report.inspector import write_inspector
    from hpd.teacher.inspect import merge_slots

    by_id = {r["boundary_id"]: r for r in records}
    return write_inspector(boundaries, out / "inspector.html", max_tasks=max_tasks,
                           records=merge_slots(iter_records(boundaries), by_id))


def register(app: typer.Typer) -> None:
    app.command("teach")(teach_cmd)
