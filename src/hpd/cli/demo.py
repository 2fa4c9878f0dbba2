"""`hpd demo`: the whole HPD pipeline on the built-in benchmark, offline, on a CPU (see hpd.demo)."""

from __future__ import annotations

import signal
from pathlib import Path
from typing import Optional

import typer
from rich.console import Console
from rich.table import Table

from hpd.cli.options import dtype_option


def _all(v) -> str:
    return "all" if v is None else str(v)


def register(app: typer.Typer) -> None:
    # every per-model default below is read from hpd.demo.MODEL_DEFAULTS (model_defaults_text), the one table
    from hpd.demo import DEFAULT_EVAL_TURNS, DEFAULT_MODEL
    from hpd.demo import model_defaults_text as default

    @app.command()
    def demo(
        out: Path = typer.Option(Path("runs/demo"), help="Run folder (every stage resumes from what is here)."),
        seed: str = typer.Option("0", help="Seed of the LoRA init, training order and teacher sampling; a list "
                                           "(0,1,2) runs one cell per seed and reports mean ± std (hpd.study)."),
        data: Optional[Path] = typer.Option(None, help="A TRAJECT-Bench-shaped folder instead of the built-in benchmark."),
        model: str = typer.Option(DEFAULT_MODEL, "--model", help="Base model: smollm2 (SmolLM2-135M-Instruct from its PyPI "
                                                               "wheel, LoRA), tiny (random tiny Qwen3, full "
                                                               "fine-tuning; the fast path for tests) or a local "
                                                               "model folder (LoRA)."),
        defect_rate: str = typer.Option("0.12", "--defect-rate", help="Share of train boundaries whose reference "
                                                                      "action is defective (built-in benchmark; "
                                                                      "held-out stays clean). A list (0,0.12,0.25) "
                                                                      "runs the defect sweep."),
        updates: Optional[int] = typer.Option(None, help="Optimizer updates per trained variant (same for SFT, HPD-T, "
                                                         "HPD). " + default("updates")),
        n_per_domain: Optional[int] = typer.Option(None, "--n-per-domain",
                                                   help="Built-in benchmark size: tasks per domain and kind. "
                                                        + default("n_per_domain")),
        size: Optional[str] = typer.Option(None, help="Tiny model size: xs (~0.4M params, default) or s (~4M)."),
        test_limit: Optional[int] = typer.Option(None, help="Evaluate at most this many held-out tasks, spread "
                                                            "over kinds, domains and distinct trajectories. "
                                                            + default("test_limit", _all)),
        train_limit: Optional[int] = typer.Option(None, help="Replay/teach/train on at most this many train tasks."),
        train_sample: Optional[int] = typer.Option(None, "--train-sample",
                                                   help="Replay/teach/train on a seeded sample of this many train "
                                                        "tasks (the same in every cell). "
                                                        + default("train_sample", _all)),
        teach_attempts: Optional[int] = typer.Option(None, "--teach-attempts",
                                                     help="Teacher attempts per boundary (paper: 5, the default)."),
        teacher: str = typer.Option("auto", help="auto: measure base-doc and i-warm on a probe sample and keep the "
                                                  "higher first-attempt acceptance; base-doc: the base model reading "
                                                  "the control document; i-warm: the base model after a short I-view "
                                                  "warm-up; oracle: the scripted teacher (tests only). All but "
                                                  "oracle propose K=2 per attempt, up to 5 attempts, temperature 1."),
        lora: Optional[bool] = typer.Option(None, "--lora/--full-finetune",
                                            help="LoRA adapters or full fine-tuning (a LoRA adapter on the random "
                                                 "tiny base barely learns). " + default(
                                                     "full_finetune", lambda f: "full fine-tuning" if f else "LoRA")),
        global_batch: Optional[int] = typer.Option(None, "--global-batch",
                                                   help="Rows per update. " + default("global_batch")),
        lr: Optional[float] = typer.Option(None, "--lr",
                                           help="Peak learning rate. " + default("lr", lambda v: f"{v:g}")),
        lr_decay: Optional[str] = typer.Option(None, "--lr-decay",
                                               help="LR after the warm-up: constant (the paper's), linear or cosine "
                                                    "(towards 0 at the last update). " + default("lr_decay") +
                                                    " On the real model a constant LR missed the learning bar "
                                                    "(docs/demo.md)."),
        warmup: Optional[int] = typer.Option(None, "--warmup", help="Linear LR warm-up, in updates (the paper: 0). "
                                                                    + default("warmup_updates")),
        max_new_tokens: Optional[int] = typer.Option(None, "--max-new-tokens",
                                                     help="Tokens per model turn (eval, model teacher). "
                                                          + default("max_new_tokens") + " The longest built-in "
                                                          "reference action, a 4-call parallel batch, is ~200 "
                                                          "SmolLM2 tokens."),
        max_turns: Optional[int] = typer.Option(None, "--max-turns",
                                                help="Turn budget per evaluated episode (the reference replay "
                                                     "keeps its own). " + default(
                                                         "eval_turns", lambda v: str(DEFAULT_EVAL_TURNS if v is None
                                                                                     else v))),
        variants: str = typer.Option("Base,SFT,HPD-T,HPD", "--variants",
                                     help="The rows to train and evaluate, a comma-separated subset of Base, SFT, "
                                          "HPD-T, HPD (SFT is trained whenever HPD-T or HPD is asked for). With "
                                          "--baselines it may name some of DPO, GRPO, GSPO, GiGPO (default: all "
                                          "four). A run folder resumes with more rows later."),
        baselines: bool = typer.Option(False, "--baselines",
                                       help="Also train and evaluate the paper's Table 1 baselines: DPO (pairs from "
                                            "the teach stage) and GRPO, GSPO, GiGPO (online RL in the harness from "
                                            "the SFT model), each from its shipped configs/methods/ config "
                                            "(hpd.methods.baselines); the RL rollouts sample on the engine of "
                                            "--backend."),
        dpo_start: str = typer.Option("base", "--dpo-start",
                                      help="Where the DPO baseline starts: base (the base model, as SFT and HPD "
                                           "do; its reference is the base model) or sft (the cell's SFT adapter, "
                                           "trained further; its reference is that SFT policy, the DPO paper's "
                                           "recipe). On SmolLM2 the base model never calls a tool, and DPO from it "
                                           "never learns to (docs/experiments/2026-12-04-issue35-study.md)."),
        baseline_updates: Optional[int] = typer.Option(None, "--baseline-updates",
                                                       help="Optimizer updates of each baseline (default: the same "
                                                            "as SFT / HPD; an RL update is a whole rollout batch)."),
        lanes: int = typer.Option(1, "--lanes", help="A study (several --seed or --defect-rate values): run this "
                                                     "many cells side by side, each in its own process with the "
                                                     "cores split between them (hpd.study.run_lanes)."),
        probe_examples: int = typer.Option(8, "--probe-examples",
                                           help="Per view: examples scored before and after training "
                                                "(train/*/metrics.json); 0 = none."),
        skip_bad: bool = typer.Option(False, "--skip-bad", help="--data: skip malformed entries (counted, "
                                                                 "listed in manifest.json) instead of stopping."),
        registry: Optional[Path] = typer.Option(None, "--registry",
                                                help="Results registry (e.g. results/ in the repository): each "
                                                     "finished variant's metrics, slim per-task rows and manifest "
                                                     "are copied to <registry>/<study>/<arm>/defects-<r>/seed-<s>/"
                                                     "<variant>/ as soon as its evaluation ends, and a variant the "
                                                     "registry holds with the same config is not run again "
                                                     "(hpd.report.registry). Needs --study; every cell then lives "
                                                     "in <out>/defects-<r>/seed-<s>/."),
        study: Optional[str] = typer.Option(None, "--study", help="--registry: the study's name (its folder in "
                                                                   "the registry)."),
        arm: str = typer.Option("main", "--arm", help="--registry: the study arm, one configuration of this demo "
                                                      "(e.g. main, oracle-teacher); its cells differ only in "
                                                      "defect rate, seed and variant."),
        strict_catalog: bool = typer.Option(False, "--strict-catalog",
                                            help="--data: a step whose tool is missing from the catalog makes its "
                                                 "entry malformed (default: such steps, which TRAJECT-Bench "
                                                 "itself holds, are unscorable)."),
        dtype: str = dtype_option(note="Every stage: training (model.precision; LoRA and AdamW state stay "
                                       "fp32), the teacher, evaluation, the baselines' rollouts and reference "
                                       "log-probs. The manifest's dtype says what it resolved to."),
        backend: str = typer.Option("auto", "--backend", help="Generation engine of the teacher and the "
                                    "evaluations: auto (vllm for a real model where vLLM runs, else hf; the tiny "
                                    "model: hf) | hf (hpd's transformers backend) | vllm (vLLM's engine; on the "
                                    "CPU each variant's adapter is merged into the weights first)."),
        harness: str = typer.Option("pi", "--harness", help="The agent harness of every stage that depends on it "
                                    "(hpd.harnesses.registry): the reference replay and control documents "
                                    "(boundaries), the teacher's verification, the training records (the native "
                                    "view is the harness's request) and the evaluation. pi (hpd.harness) | "
                                    "smolagents (ToolCallingAgent: its own prompt, tool names and final_answer rule; "
                                    "training rows up to 4096 tokens instead of 2048, its prompt is longer). Shared "
                                    "folders of another harness than pi get its name (boundaries-smolagents, "
                                    "eval/base-smolagents)."),
    ) -> None:
        """Run HPD end to end: data, split, base model, replay + documents, teach, train Base/SFT/HPD-T/HPD, evaluate natively, report.

        Writes everything under --out: results.json (one entry per variant with TS, F1, Step-SR, RC, Exact,
        Action-Acc), results.md, plots/metrics.png, report.html, the boundary inspector and manifests.
        """
        from hpd.bench.entries import BadEntryError
        from hpd.demo import BACKENDS, DPO_STARTS, config_for_model, setup_threads
        from hpd.demo_estimate import choose_threads
        from hpd.runfolder import RunFolderError, os_error_line

        setup_threads()
        signal.signal(signal.SIGTERM, sigterm_as_interrupt)   # a kill is a Ctrl-C: the engine stops, resume line
        console = Console()
        seeds, rates, err = _lists(seed, defect_rate)
        rows, err = (None, err) if err else _variants(variants, baselines)
        if not err and lanes < 1:
            err = "--lanes must be >= 1"
        if not err and lanes > 1 and len(seeds) * len(rates) == 1:
            err = "--lanes runs the cells of a study side by side: give several --seed or --defect-rate values"
        if not err and (registry is None) != (study is None):
            err = "--registry DIR and --study NAME go together"
        if not err and data is not None and len(rates) > 1:
            err = "--defect-rate takes one value with --data (defects are injected into the built-in benchmark only)"
        err = err or _option_error(data, teacher, size, model, probe_examples, lr,
                                   {"--updates": updates, "--global-batch": global_batch,
                                    "--max-new-tokens": max_new_tokens, "--max-turns": max_turns,
                                    "--test-limit": test_limit, "--train-limit": train_limit,
                                    "--n-per-domain": n_per_domain, "--train-sample": train_sample,
                                    "--teach-attempts": teach_attempts, "--baseline-updates": baseline_updates},
                                   lr_decay, warmup)
        if not err and backend not in BACKENDS:
            err = f"--backend {backend!r}: choose from {', '.join(BACKENDS)}"
        err = err or _harness_error(harness, baselines)
        if not err and dpo_start not in DPO_STARTS:
            err = f"--dpo-start {dpo_start!r}: choose from {', '.join(DPO_STARTS)}"
        if err:
            console.print(f"error: {err}", markup=False, highlight=False, soft_wrap=True)
            raise typer.Exit(2)
        if model != "tiny":         # after the checks: a wrong flag fails at once; the tiny model's runs keep the default
            _, why = choose_threads()
            if why:
                console.print(why, markup=False, highlight=False, soft_wrap=True)
        cfg = config_for_model(model, out=out, seed=seeds[0], defect_rate=rates[0], data=data, updates=updates, size=size,
                               test_limit=test_limit, train_limit=train_limit,
                               full_finetune=None if lora is None else not lora, teacher=teacher,
                               n_per_domain=n_per_domain, global_batch=global_batch, lr=lr,
                               lr_decay=lr_decay, warmup_updates=warmup, max_new_tokens=max_new_tokens, eval_turns=max_turns,
                               probe_examples=probe_examples, train_sample=train_sample,
                               teach_attempts=teach_attempts, variants=rows, baselines=baselines or None,
                               baseline_updates=baseline_updates, dpo_start=dpo_start, skip_bad=skip_bad or None,
                               strict_catalog=strict_catalog or None, dtype=dtype,
                               backend=backend, harness=harness)
        try:
            reg = None
            if registry is not None:
                from hpd.report.registry import Registry

                reg = Registry(registry, study, arm)
            res = _run(cfg, seeds, rates, lambda s: console.print(s, markup=False, highlight=False), lanes, reg,
                       terminal=console.is_terminal)
        except KeyboardInterrupt:
            console.print(f"interrupted; rerun the same command to resume from {out}", markup=False)
            raise typer.Exit(130)
        except (RunFolderError, BadEntryError) as exc:   # another run's folder, unwritable --out, bad data
            console.print(f"error: {exc}", markup=False, highlight=False, soft_wrap=True)
            raise typer.Exit(2)
        except OSError as exc:   # a full disk: finished stages stay on disk
            console.print(f"error: {os_error_line(exc)}", markup=False, highlight=False, soft_wrap=True)
            raise typer.Exit(1)
        except Exception as exc:  # one line, not a traceback; finished stages stay on disk
            console.print(f"error: {type(exc).__name__}: {exc} (finished stages are kept in {out}; "
                          "rerun the same command to resume)", markup=False, highlight=False, soft_wrap=True)
            raise typer.Exit(1)
        _print(console, res, out)


def _harness_error(harness: str, baselines: bool) -> str | None:
    """``--harness``: a registered harness; the baselines run in Pi only."""
    from hpd.harnesses.registry import HARNESS_SPECS

    if harness not in HARNESS_SPECS:
        return f"--harness {harness!r}: choose from {', '.join(HARNESS_SPECS)}"
    if baselines and harness != "pi":
        return "--baselines runs in Pi only (the RL baselines' rollouts): leave out --harness or --baselines"
    return None


def _lists(seed: str, defect_rate: str) -> tuple[list[int], list[float], str | None]:
    """``--seed`` and ``--defect-rate`` as lists, or a one-line error."""
    try:
        seeds = [int(x) for x in seed.split(",") if x.strip()]
    except ValueError:
        return [0], [0.0], f"--seed must be an integer or a comma-separated list, not {seed!r}"
    try:
        rates = [float(x) for x in defect_rate.split(",") if x.strip()]
    except ValueError:
        return [0], [0.0], f"--defect-rate must be a number or a comma-separated list, not {defect_rate!r}"
    if not seeds or not rates or len(set(seeds)) != len(seeds) or len(set(rates)) != len(rates):
        return [0], [0.0], "--seed and --defect-rate need distinct values"
    if any(not 0.0 <= r < 0.5 for r in rates):
        return [0], [0.0], "--defect-rate values must be in [0, 0.5)"
    return seeds, rates, None


def sigterm_as_interrupt(signum, frame) -> None:
    """SIGTERM as Ctrl-C, once: a second SIGTERM (a repeated ``kill``, or ``pkill`` matching twice) is ignored, so it
    cannot cut the cleanup the first one started (the engine's stop, the resume line) with a traceback; SIGKILL
    still ends the process."""
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    raise KeyboardInterrupt


def _variants(text: str, baselines: bool = False) -> tuple[tuple[str, ...] | None, str | None]:
    """``--variants`` in the table's order (:data:`hpd.demo.VARIANTS`, then the baselines it names, which need
    ``--baselines``), or a one-line error."""
    from hpd.demo import BASELINE_VARIANTS, VARIANTS

    names = [x.strip() for x in text.split(",") if x.strip()]
    known = VARIANTS + (BASELINE_VARIANTS if baselines else ())
    bad = next((n for n in names if n not in known), None)
    if bad or not names or len(set(names)) != len(names):
        why = f"unknown variant {bad!r}" if bad else "distinct values are needed"
        if bad in BASELINE_VARIANTS:
            why = f"{bad} is a baseline: add --baselines"
        return None, f"--variants takes a comma-separated subset of {', '.join(known)}: {why}"
    return tuple(v for v in known if v in names), None


def _run(cfg, seeds: list[int], rates: list[float], log, lanes: int = 1, registry=None, terminal: bool = False) -> dict:
    """One demo folder, or a study (several seeds or rates, or a results registry: hpd.study). One folder on a
    terminal shows its progress as one line at the bottom (hpd.demo_estimate.TerminalLine), else as log lines."""
    from hpd.demo import Demo

    if len(seeds) == 1 and len(rates) == 1 and registry is None:
        if terminal and cfg.progress:
            from hpd.demo_estimate import TerminalLine

            with TerminalLine() as line:
                return Demo(cfg, log=line.log, on_progress=line.on_progress).run()
        return Demo(cfg, log=log).run()
    from hpd.study import run_study

    return run_study(cfg, seeds, rates, log=log, lanes=lanes, registry=registry)


def _print(console: Console, res: dict, out: Path) -> None:
    from hpd.demo import METRIC_KEYS, results_table
    from hpd.report.results import mean_std_text

    if "summary" not in res:
        rows = results_table(res)
        t = Table(title=f"hpd demo (seed {res['seed']}, model {res['model']['name']}): native evaluation on held-out tasks")
        for h in rows[0]:
            t.add_column(h, justify="right" if h != "variant" else "left")
        for r in rows[1:]:
            t.add_row(*r)
        console.print(t)
        console.print(f"results: {out / 'results.json'}   report: {out / 'report.html'}")
        return
    t = Table(title=f"hpd demo study: seeds {res['seeds']}, defect rates {res['defect_rates']} (mean ± std)")
    for h in ("defects", "variant", *METRIC_KEYS):
        t.add_column(h, justify="left" if h in ("defects", "variant") else "right")
    for rate, agg in res["summary"].items():
        for v, m in agg.items():
            t.add_row(f"{100 * float(rate):.0f}%", v, *(mean_std_text(m[k]) for k in METRIC_KEYS))
    console.print(t)
    console.print(f"study: {out / 'study.json'}   report: {out / 'report.html'}")


def _option_error(data, teacher: str, size, model: str, probe_examples: int, lr, positive: dict,
                  lr_decay: str | None = None, warmup: int | None = None) -> str | None:
    """The first invalid ``hpd demo`` option as one line (None: all valid)."""
    if data is not None and not data.is_dir():
        return f"--data {data} is not a folder"
    from hpd.demo import TEACHERS
    from hpd.train.config import LR_DECAYS

    if teacher not in TEACHERS:
        return f"--teacher must be one of {', '.join(TEACHERS)}, not {teacher!r}"
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
    if lr_decay is not None and lr_decay not in LR_DECAYS:
        return f"--lr-decay must be one of {', '.join(LR_DECAYS)}, not {lr_decay!r}"
    if warmup is not None and warmup < 0:
        return "--warmup must be >= 0"
    return None
