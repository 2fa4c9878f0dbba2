"""``hpd data stats|split|fetch|import``: TRAJECT-Bench counts, the leakage-safe split, the pinned download,
and users' own harness traces turned into a TRAJECT-layout folder.

Thin layer over :mod:`hpd.bench.stats`, :mod:`hpd.views.token_lengths` (``stats --tokenizer``: real token
lengths of the T/I/R rows), :mod:`hpd.bench.split`, :mod:`hpd.bench.fetch` and :mod:`hpd.bench.traces`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

DATA_HELP = "TRAJECT-Bench-layout data folder (default: $HPD_TRAJECT_DIR or ../shared/traject-bench/public_data)"


def _load(data: Optional[Path]):
    from hpd.bench.loader import load_bench
    try:
        return load_bench(data)
    except (FileNotFoundError, ValueError) as e:
        raise typer.BadParameter(str(e)) from None


def _fail(msg: str, code: int = 2):
    """One line on stderr, no traceback."""
    typer.echo(f"error: {msg}", err=True)
    raise typer.Exit(code)


def _start(command: str, config: dict, data_path, seed=None) -> dict:
    """The command's run-folder manifest (hpd.runfolder), started now."""
    from hpd.bench.loader import data_checksum
    from hpd.runfolder import new_manifest
    return new_manifest(command, config, inputs={"data": data_checksum(data_path)}, seed=seed)


def _finish(out: Path, manifest: dict, outputs: dict[str, dict]) -> None:
    from hpd.runfolder import finish_manifest, write_json
    for name, obj in outputs.items():
        write_json(out / name, obj)
    write_json(out / "manifest.json", finish_manifest(manifest, outputs=sorted(outputs)))


sub = typer.Typer(help="TRAJECT-Bench data: counts, the leakage-safe split, download.", no_args_is_help=True)


@sub.command()
def stats(
    data: Optional[Path] = typer.Option(None, "--data", help=DATA_HELP),
    out: Optional[Path] = typer.Option(None, "--out", help="also write <out>/stats.json (and token_lengths.json "
                                       "with --tokenizer) and manifest.json"),
    tokenizer: Optional[Path] = typer.Option(
        None, "--tokenizer", help="local tokenizer folder (e.g. from `hpd model qwen3-tokenizer --out DIR`): "
        "also report p50/p95/max token lengths of the T, I and R prompts and targets over the boundaries, "
        "untrimmed, and the share of rows fitting each data.max_length of the shipped configs (every task by "
        "default: ~7 min on 2 busy cores for TRAJECT-Bench's ~18.9k boundaries; --sample N for less)"),
    sample: Optional[int] = typer.Option(None, "--sample", help="token lengths over a seeded random subset of N "
                                         "tasks (default: every task)"),
    seed: int = typer.Option(0, "--seed", help="seed of --sample"),
    pool_k: int = typer.Option(20, "--pool-k", help="tools shown per episode (gold + seeded distractors), "
                               "as `hpd replay --pool-k`"),
    privilege: str = typer.Option("plan", "--privilege", help="control-document level in the I and R rows: "
                                  "runtime|plan|oracle (default plan, as `hpd teach`)"),
    configs: Optional[Path] = typer.Option(None, "--configs", help="config folder whose *.yaml and ablations/*.yaml "
                                           "give the max_length values (default: this checkout's configs/)"),
    max_length: Optional[list[int]] = typer.Option(None, "--max-length", help="another max_length to report the "
                                                   "share of fitting rows for (repeatable)"),
    exact: bool = typer.Option(False, "--exact", help="encode every prompt whole (slow; the default sums cached, "
                               "exactly equal pieces and checks rows against the plain encoder)"),
    quiet: bool = typer.Option(False, "--quiet", help="no progress bar"),
) -> None:
    """Tasks per domain x type x difficulty, D2 boundaries, scorable steps, catalog coverage; with
    --tokenizer also real token lengths of the T/I/R rows."""
    from hpd.bench.stats import compute_stats, format_table
    tok = None
    if tokenizer is not None:
        from hpd.views.token_lengths import TokenizerError, load_tokenizer_dir
        if privilege not in ("runtime", "plan", "oracle"):
            _fail(f"--privilege must be runtime, plan or oracle, not {privilege!r}")
        if sample is not None and sample < 1:
            _fail("--sample must be >= 1")
        if pool_k < 1:
            _fail("--pool-k must be >= 1")
        if any(m < 1 for m in max_length or []):
            _fail("--max-length must be >= 1")
        try:
            tok = load_tokenizer_dir(tokenizer)
        except TokenizerError as e:
            _fail(str(e))
    elif sample is not None or max_length:
        _fail(f"{'--sample' if sample is not None else '--max-length'} needs --tokenizer (token lengths only)")
    b = _load(data)
    cfg = {} if tok is None else {"tokenizer": str(tokenizer), "sample": sample, "seed": seed,
                                  "pool_k": pool_k, "privilege": privilege, "exact": exact,
                                  "configs": str(configs) if configs else None,
                                  "max_length": sorted(set(max_length or []))}
    man = _start("hpd data stats", cfg, b.data_dir, seed if sample is not None else None)
    st = compute_stats(b)
    typer.echo(format_table(st))
    lengths = None
    if tok is not None:
        from hpd.boundary import StoreError
        from hpd.train.config import config_max_lengths
        from hpd.views.token_lengths import LengthMismatch, format_table as lengths_table, measure
        used = config_max_lengths(configs)
        for m in max_length or []:
            used.setdefault(m, [])
        try:
            lengths = measure(b, tok, tokenizer_path=tokenizer, sample=sample, seed=seed, pool_k=pool_k,
                              privilege=privilege, max_lengths=used, exact=exact, progress=not quiet)
        except (StoreError, LengthMismatch) as e:
            _fail(str(e))
        typer.echo("")
        typer.echo(lengths_table(lengths))
    if out is not None:
        _finish(out, man, {"stats.json": st, **({"token_lengths.json": lengths} if lengths is not None else {})})
        typer.echo(f"wrote {out / 'stats.json'}" + (f", {out / 'token_lengths.json'}" if lengths else ""))


@sub.command()
def split(
    out: Path = typer.Option(..., "--out", help="output folder for split.json and manifest.json"),
    data: Optional[Path] = typer.Option(None, "--data", help=DATA_HELP),
    seed: int = typer.Option(0, "--seed", help="seed of the group shuffle"),
    test_frac: float = typer.Option(0.10, "--test-frac", help="share of groups held out per (type, domain)"),
) -> None:
    """Leakage-safe R1 group split; writes <out>/split.json with sizes, group stats and leakage per key."""
    from hpd.bench.split import make_split
    if not 0.0 < test_frac < 1.0:
        raise typer.BadParameter("--test-frac must be in (0, 1)")
    b = _load(data)
    man = _start("hpd data split", {"seed": seed, "test_frac": test_frac}, b.data_dir, seed)
    sp = make_split(b.tasks, seed=seed, test_frac=test_frac)
    sz = sp["sizes"]
    typer.echo(f"tasks {sz['tasks']}: train {sz['train']}, test {sz['test']} ({sz['test_share']:.2%}); "
               f"groups {sz['groups']}, test groups {sz['test_groups']}; D2 boundaries {sz['boundaries_D2']}")
    typer.echo("leakage per key: " + ", ".join(f"{k}={v}" for k, v in sp["leakage"].items()))
    _finish(out, man, {"split.json": sp})
    typer.echo(f"wrote {out / 'split.json'}")
    if any(sp["leakage"].values()):
        typer.echo("ERROR: leakage found", err=True)
        raise typer.Exit(1)


@sub.command()
def fetch(
    out: Path = typer.Option(..., "--out", help="folder to lay public_data out in (then use --data OUT)"),
    url: Optional[str] = typer.Option(None, "--url", help="archive URL (default: GitHub archive at the pinned commit)"),
    timeout: float = typer.Option(120.0, "--timeout", help="download timeout, seconds"),
) -> None:
    """Download TRAJECT-Bench at the pinned commit, verify known checksums, lay files out for --data."""
    from hpd.bench.fetch import FetchError, fetch as do_fetch
    try:
        rep = do_fetch(out, url, timeout=timeout)
    except FetchError as e:
        typer.echo(f"ERROR: {e}", err=True)
        raise typer.Exit(2)
    typer.echo(f"{rep['files']} files -> {out}: {len(rep['verified'])} verified, {len(rep['unverified'])} "
               f"without a known checksum, {len(rep['absent'])} known files absent from the archive")
    typer.echo(f"use: --data {out}")


@sub.command(name="import")
def import_traces(
    files: list[Path] = typer.Argument(..., help="trace files (Pi session JSONL, or OpenAI chat-completions JSONL)"),
    fmt: str = typer.Option(..., "--format", help="pi-session | openai-chat (see docs/own-traces.md)"),
    out: Path = typer.Option(..., "--out", help="folder to write the TRAJECT layout to (then use --data OUT)"),
    domain: str = typer.Option("Imported", "--domain", help="domain folder and tools file name of the tasks"),
    skip_bad: bool = typer.Option(False, "--skip-bad", help="import the good traces and list the bad ones "
                                  "(default: any bad trace stops the import)"),
) -> None:
    """Turn your own harness traces into a TRAJECT-layout folder (tools from the trace, recorded outputs as
    replay responses, the final answer as the reference); writes <out>/import.json and manifest.json."""
    import re

    from hpd.bench.traces import FORMATS, read_traces, write_traject
    from hpd.runfolder import checksum, new_manifest, records_checksum

    if fmt not in FORMATS:
        _fail(f"--format must be one of {', '.join(FORMATS)}, not {fmt!r}")
    if not re.fullmatch(r"[A-Za-z0-9_]+", domain):
        _fail(f"--domain must be letters, digits and _ (a folder name), not {domain!r}")
    traces, errors, merged = read_traces(files, fmt)
    for e in errors:
        typer.echo(f"error: {e}", err=True)
    if errors and not skip_bad:
        _fail(f"{len(errors)} trace(s) cannot be imported (listed above); fix them or pass --skip-bad")
    if not traces:
        _fail("no trace could be imported")
    if any((out / d).exists() for d in ("parallel", "sequential", "tools")):
        _fail(f"{out} already holds a TRAJECT layout; choose an empty --out")
    man = new_manifest("hpd data import", {"format": fmt, "domain": domain, "skip_bad": skip_bad},
                       inputs={"traces": {"path": f"{len(files)} file(s)",
                                          "sha256": records_checksum([checksum(f) for f in files])}})
    counts = write_traject(traces, out, domain=domain, fmt=fmt)
    report = {**counts, "format": fmt, "files": len(files), "merged_records": merged,
              "skipped": [str(e) for e in errors]}
    _finish(out, man, {"import.json": report})
    typer.echo(f"{counts['tasks']} tasks ({counts['parallel']} parallel, {counts['sequential']} sequential), "
               f"{counts['tools']} tools ({counts['tools_inferred']} inferred), {len(errors)} skipped -> {out}")
    typer.echo(f"use: --data {out}")


def register(app: typer.Typer) -> None:
    app.add_typer(sub, name="data")
