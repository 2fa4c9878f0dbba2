"""``hpd data stats|split|fetch``: TRAJECT-Bench counts, the leakage-safe split, and the pinned download.

Thin layer over :mod:`hpd.bench.stats`, :mod:`hpd.bench.split` and :mod:`hpd.bench.fetch`.
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


def _write(out: Path, name: str, obj: dict, command: str, config: dict, data_path: str | None, seed=None) -> None:
    from hpd.report.common import base_manifest, write_json
    write_json(out / name, obj)
    write_json(out / "manifest.json", base_manifest(command, config, data_path, seed))


def register(app: typer.Typer) -> None:
    sub = typer.Typer(help="TRAJECT-Bench data: counts, the leakage-safe split, download.", no_args_is_help=True)

    @sub.command()
    def stats(
        data: Optional[Path] = typer.Option(None, "--data", help=DATA_HELP),
        out: Optional[Path] = typer.Option(None, "--out", help="also write <out>/stats.json and manifest.json"),
    ) -> None:
        """Tasks per domain x type x difficulty, D2 boundaries, scorable steps, catalog coverage."""
        from hpd.bench.stats import compute_stats, format_table
        b = _load(data)
        st = compute_stats(b)
        typer.echo(format_table(st))
        if out is not None:
            _write(out, "stats.json", st, "data stats", {}, str(b.data_dir))
            typer.echo(f"wrote {out / 'stats.json'}")

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
        sp = make_split(b.tasks, seed=seed, test_frac=test_frac)
        sz = sp["sizes"]
        typer.echo(f"tasks {sz['tasks']}: train {sz['train']}, test {sz['test']} ({sz['test_share']:.2%}); "
                   f"groups {sz['groups']}, test groups {sz['test_groups']}; D2 boundaries {sz['boundaries_D2']}")
        typer.echo("leakage per key: " + ", ".join(f"{k}={v}" for k, v in sp["leakage"].items()))
        _write(out, "split.json", sp, "data split", {"seed": seed, "test_frac": test_frac}, str(b.data_dir), seed)
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

    app.add_typer(sub, name="data")
