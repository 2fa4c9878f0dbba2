"""`hpd demo`: the whole HPD pipeline on the built-in benchmark, offline, on a CPU (see hpd.demo)."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer
from rich.console import Console
from rich.table import Table


def register(app: typer.Typer) -> None:
    @app.command()
    def demo(
        out: Path = typer.Option(Path("runs/demo"), help="Run folder (every stage resumes from what is here)."),
        seed: int = typer.Option(0, help="Model init, training order and teacher sampling seed."),
        data: Optional[Path] = typer.Option(None, help="A TRAJECT-Bench-shaped folder instead of the built-in benchmark."),
        updates: int = typer.Option(500, help="Optimizer updates per trained variant (same for SFT, HPD-T, HPD)."),
        n_per_domain: int = typer.Option(30, "--n-per-domain", help="Built-in benchmark size: tasks per domain and kind."),
        size: str = typer.Option("xs", help="Tiny model size: xs (~0.4M params) or s (~4M)."),
        test_limit: Optional[int] = typer.Option(None, help="Evaluate at most this many held-out tasks."),
        train_limit: Optional[int] = typer.Option(None, help="Replay/teach/train on at most this many train tasks."),
        teacher: str = typer.Option("oracle", help="oracle: scripted teacher reading the oracle document (fast); "
                                                    "model: the SFT-warmed tiny model sampling K=2 at temperature 1."),
        lora: bool = typer.Option(False, "--lora", help="Train LoRA adapters instead of full fine-tuning (a LoRA "
                                                         "adapter on the random tiny base barely learns)."),
    ) -> None:
        """Run HPD end to end: data, split, tiny model, replay + documents, teach, train Base/SFT/HPD-T/HPD, evaluate natively, report.

        Writes everything under --out: results.json (one entry per variant with TS, F1, Step-SR, RC, Exact,
        Action-Acc), results.md, plots/metrics.png, report.html, the boundary inspector and manifests.
        """
        from hpd.demo import Demo, DemoConfig, results_table, setup_threads

        setup_threads()
        console = Console()
        if data is not None and not data.is_dir():
            console.print(f"[red]error:[/red] --data {data} is not a folder")
            raise typer.Exit(2)
        if teacher not in ("oracle", "model"):
            console.print(f"[red]error:[/red] --teacher must be oracle or model, not {teacher!r}")
            raise typer.Exit(2)
        if size not in ("xs", "s"):
            console.print(f"[red]error:[/red] --size must be xs or s, not {size!r}")
            raise typer.Exit(2)
        cfg = DemoConfig(out=out, seed=seed, data=data, updates=updates, size=size, test_limit=test_limit,
                         train_limit=train_limit, full_finetune=not lora, teacher=teacher,
                         n_per_domain=n_per_domain)
        try:
            res = Demo(cfg, log=lambda s: console.print(s, markup=False, highlight=False)).run()
        except KeyboardInterrupt:
            console.print(f"interrupted; rerun the same command to resume from {out}", markup=False)
            raise typer.Exit(130)
        except Exception as exc:  # one line, not a traceback; finished stages stay on disk
            console.print(f"error: {type(exc).__name__}: {exc} (finished stages are kept in {out}; "
                          "rerun the same command to resume)", markup=False, highlight=False)
            raise typer.Exit(1)
        rows = results_table(res)
        t = Table(title=f"hpd demo (seed {seed}): native evaluation on held-out tasks")
        for h in rows[0]:
            t.add_column(h, justify="right" if h != "variant" else "left")
        for r in rows[1:]:
            t.add_row(*r)
        console.print(t)
        console.print(f"results: {out / 'results.json'}   report: {out / 'report.html'}")
