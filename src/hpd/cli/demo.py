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
        model: str = typer.Option("tiny", "--model", help="Base model: tiny (random tiny Qwen3, full fine-tuning; "
                                                            "the default for now), smollm2 (SmolLM2-135M-Instruct "
                                                            "built into <out>/base, LoRA) or a local model folder (LoRA)."),
        updates: Optional[int] = typer.Option(None, help="Optimizer updates per trained variant (same for SFT, HPD-T, "
                                                         "HPD). Default: 500 (tiny), 40 (real model)."),
        n_per_domain: int = typer.Option(30, "--n-per-domain", help="Built-in benchmark size: tasks per domain and kind."),
        size: Optional[str] = typer.Option(None, help="Tiny model size: xs (~0.4M params, default) or s (~4M)."),
        test_limit: Optional[int] = typer.Option(None, help="Evaluate at most this many held-out tasks."),
        train_limit: Optional[int] = typer.Option(None, help="Replay/teach/train on at most this many train tasks."),
        teacher: str = typer.Option("oracle", help="oracle: scripted teacher reading the oracle document (fast); "
                                                    "model: the SFT-warmed model sampling K=2 at temperature 1."),
        lora: Optional[bool] = typer.Option(None, "--lora/--full-finetune",
                                            help="LoRA adapters or full fine-tuning. Default: full fine-tuning for "
                                                 "tiny (a LoRA adapter on the random tiny base barely learns), LoRA "
                                                 "for a real model."),
        global_batch: Optional[int] = typer.Option(None, "--global-batch",
                                                   help="Rows per update. Default: 8 (tiny), 4 (real model)."),
        lr: Optional[float] = typer.Option(None, "--lr",
                                           help="Constant learning rate. Default: 3e-3 (tiny), 3e-4 (real model, LoRA)."),
        max_new_tokens: Optional[int] = typer.Option(None, "--max-new-tokens",
                                                     help="Tokens per model turn (eval, model teacher). Default: 96."),
        max_turns: Optional[int] = typer.Option(None, "--max-turns",
                                                help="Turn budget per evaluated episode (default 8; the reference "
                                                     "replay keeps its own)."),
        probe_examples: int = typer.Option(8, "--probe-examples",
                                           help="Per view: examples scored before and after training "
                                                "(train/*/metrics.json); 0 = none."),
    ) -> None:
        """Run HPD end to end: data, split, base model, replay + documents, teach, train Base/SFT/HPD-T/HPD, evaluate natively, report.

        Writes everything under --out: results.json (one entry per variant with TS, F1, Step-SR, RC, Exact,
        Action-Acc), results.md, plots/metrics.png, report.html, the boundary inspector and manifests.
        """
        from hpd.demo import Demo, config_for_model, results_table, setup_threads

        setup_threads()
        console = Console()
        err = _option_error(data, teacher, size, model, probe_examples, lr,
                            {"--updates": updates, "--global-batch": global_batch, "--max-new-tokens": max_new_tokens,
                             "--max-turns": max_turns, "--test-limit": test_limit, "--train-limit": train_limit})
        if err:
            console.print(f"error: {err}", markup=False, highlight=False, soft_wrap=True)
            raise typer.Exit(2)
        cfg = config_for_model(model, out=out, seed=seed, data=data, updates=updates, size=size,
                               test_limit=test_limit, train_limit=train_limit,
                               full_finetune=None if lora is None else not lora, teacher=teacher,
                               n_per_domain=n_per_domain, global_batch=global_batch, lr=lr,
                               max_new_tokens=max_new_tokens, eval_turns=max_turns,
                               probe_examples=probe_examples)
        try:
            res = Demo(cfg, log=lambda s: console.print(s, markup=False, highlight=False)).run()
        except KeyboardInterrupt:
            console.print(f"interrupted; rerun the same command to resume from {out}", markup=False)
            raise typer.Exit(130)
        except Exception as exc:  # one line, not a traceback; finished stages stay on disk
            console.print(f"error: {type(exc).__name__}: {exc} (finished stages are kept in {out}; "
                          "rerun the same command to resume)", markup=False, highlight=False, soft_wrap=True)
            raise typer.Exit(1)
        rows = results_table(res)
        t = Table(title=f"hpd demo (seed {seed}): native evaluation on held-out tasks")
        for h in rows[0]:
            t.add_column(h, justify="right" if h != "variant" else "left")
        for r in rows[1:]:
            t.add_row(*r)
        console.print(t)
        console.print(f"results: {out / 'results.json'}   report: {out / 'report.html'}")


def _option_error(data, teacher: str, size, model: str, probe_examples: int, lr, positive: dict) -> str | None:
    """The first invalid ``hpd demo`` option as one line (None: all valid)."""
    if data is not None and not data.is_dir():
        return f"--data {data} is not a folder"
    if teacher not in ("oracle", "model"):
        return f"--teacher must be oracle or model, not {teacher!r}"
    if size is not None and size not in ("xs", "s"):
        return f"--size must be xs or s, not {size!r}"
    if model not in ("tiny", "smollm2") and not (Path(model) / "config.json").is_file():
        return f"--model must be tiny, smollm2 or a model folder; {model} has no config.json"
    if model != "tiny" and size is not None:
        return "--size is for --model tiny"
    if model == "smollm2":
        from hpd.policy.smollm2 import ModelSourceError, locate_gguf

        try:
            locate_gguf()
        except ModelSourceError as exc:
            return str(exc)
    bad = next((name for name, v in positive.items() if v is not None and v < 1), None)
    if bad:
        return f"{bad} must be >= 1"
    if probe_examples < 0:
        return "--probe-examples must be >= 0"
    if lr is not None and not lr > 0:
        return "--lr must be > 0"
    return None
