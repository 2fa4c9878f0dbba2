"""``hpd bfcl`` end to end in one run folder: :func:`run_bfcl`.

1. select the categories and the (optionally sampled) entries (:mod:`hpd.bfcl.data`);
2. generate, resumable: finished entries are appended to ``<out>/shards/part-*.jsonl`` (the run folder's shard log)
   and skipped when the command is run again with the same config (a folder of another config is refused);
3. write BFCL result files ``<out>/result/<model>/<group>/BFCL_v4_<category>_result.json`` (sorted by BFCL's
   ``sort_key``, as ``bfcl generate`` leaves them);
4. score them (:mod:`hpd.bfcl.score`) -> BFCL score files and leaderboard CSVs under ``<out>/score/``;
5. write ``metrics.json`` (stable keys, below), ``results.md``, ``plots/bfcl.png``, ``entries.jsonl`` (every
   entry: valid, error type, why a reply did not parse) and ``manifest.json``;
6. optionally (``crosscheck=True``) score the result files again with bfcl-eval's own evaluation
   (:mod:`hpd.bfcl.official`) and record whether every number matches (``crosscheck.json``).

``metrics.json`` keys: ``benchmark``, ``bfcl_eval``, ``model``, ``adapter``, ``backend``, ``categories``
(``{category: {accuracy, correct, total, errors, reply_issues}}``), ``aggregates`` (``overall``,
``non_live``, ``live``, ``multi_turn``, ``agentic``, ``relevance``, ``irrelevance``: BFCL's own numbers as
fractions, ``null`` where BFCL shows N/A), ``leaderboard`` (BFCL's CSV rows verbatim), ``skipped``
(``{category: reason}``), ``sample`` (``{n, seed}``), ``n_entries``, ``isolation``, ``generation``,
``crosscheck`` (``null`` unless asked).
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from hpd.bfcl import data, lib
from hpd.bfcl.run import GenConfig, drive, episodes_for
from hpd.runfolder import (RunFolderError, config_hash, finish_manifest, new_manifest, open_shards, read_json,
                           read_manifest, write_json, write_jsonl)

METRICS_KEYS = ("benchmark", "bfcl_eval", "model", "adapter", "backend", "categories", "aggregates", "leaderboard",
                "skipped", "sample", "n_entries", "isolation", "generation", "crosscheck")


class BFCLError(ValueError):
    """A one-line problem with a BFCL run's input (unknown category, unloadable model, a folder of another run)."""


def make_policy(backend: str, model: str, *, adapter: str | None = None, base_url: str | None = None,
                served_model: str | None = None, batch_size: int = 32, dtype: str = "auto") -> Any:
    """The policy of ``hpd bfcl --backend``: ``hf`` / ``vllm`` load ``model`` (+ ``adapter``) in ``dtype`` (auto |
    float32 | bfloat16, :mod:`hpd.policy.dtype`); ``openai`` sends the prompts hpd renders (with ``model``'s
    tokenizer) to ``base_url``'s ``/completions``."""
    from hpd.policy.backends import make_policy as make

    if backend == "openai":
        if not base_url:
            raise BFCLError("--backend openai needs --base-url")
        if adapter:
            raise BFCLError("--backend openai serves whatever the endpoint serves; pass no --adapter")
        from transformers import AutoTokenizer

        tok = AutoTokenizer.from_pretrained(model)
        return make("openai", base_url, model=served_model or str(model), tokenizer=tok)
    if backend == "hf":
        return make("hf", model, adapter=adapter, batch_size=batch_size, dtype=dtype)
    return make(backend, model, adapter=adapter, dtype=dtype)


def _records_in_order(recs: list[dict]) -> list[dict]:
    from bfcl_eval.utils import sort_key

    return sorted(recs, key=sort_key)


def write_results(out: Path, cases: dict[str, list[data.Case]], records: dict[str, dict]) -> None:
    """BFCL result files, one per category (module doc)."""
    from hpd.bfcl.score import result_path

    for cat, cs in cases.items():
        write_jsonl(result_path(out, cat), _records_in_order([records[c.id] for c in cs]))


def _progress(total: int, initial: int, desc: str, enabled: bool):
    if not enabled:
        return None
    from tqdm.auto import tqdm

    return tqdm(total=total, initial=initial, desc=desc, unit="entry", dynamic_ncols=True, leave=False)


def run_bfcl(out: str | Path, policy: Any, *, categories: str | list[str] | None = None, sample: int | None = None,
             seed: int = 0, gen: GenConfig | None = None, describe: dict | None = None, progress: bool = False,
             sandbox_timeout: float = 60.0, crosscheck: bool = False, overwrite: bool = False,
             command: str | None = None, inputs: dict | None = None) -> dict:
    """Evaluate ``policy`` (an :class:`hpd.policy.backends.Policy`) on BFCL v4 into ``out``; returns metrics.json."""
    from hpd.bfcl.sandbox import Executor, Worker, isolation
    from hpd.bfcl.score import score_run

    lib.load()
    gen = gen or GenConfig()
    try:
        scored, skipped = data.parse_categories(categories)
    except data.CategoryError as e:
        raise BFCLError(str(e)) from None
    if sample is not None and sample < 1:
        raise BFCLError("--sample must be >= 1")
    cases = data.select(scored, sample, seed) if scored else {}
    ids = [c.id for cs in cases.values() for c in cs]
    out = Path(out)
    desc = describe or {"policy": getattr(policy, "name", type(policy).__name__)}
    cfg = {**desc, "categories": scored, "sample": sample, "seed": seed, "ids": config_hash(ids),
           "bfcl_eval": lib.installed_version(), "max_new_tokens": gen.max_new_tokens,
           "temperature": gen.temperature, "enable_thinking": gen.enable_thinking}
    man = new_manifest(command, cfg, inputs=inputs, seed=seed, n_entries=len(ids), dtype=desc.get("dtype"))
    old = read_manifest(out) if (out / "manifest.json").is_file() else None
    if old and old.get("status") == "complete" and old.get("config_hash") == man["config_hash"] \
            and (out / "metrics.json").is_file() and not overwrite and not crosscheck:
        return read_json(out / "metrics.json", "metrics")
    try:
        log = open_shards(out, man, what="a BFCL run", key="id", overwrite=overwrite)
    except RunFolderError as e:
        raise BFCLError(str(e)) from None
    write_json(out / "manifest.json", man)
    t0 = time.time()
    with log, Worker(timeout=sandbox_timeout) as worker:
        records = {k: v for k, v in log.read().items() if k in set(ids)}
        todo = [c for cs in cases.values() for c in cs if c.id not in records]
        bar = _progress(len(ids), len(records), "hpd bfcl: generate", progress)

        def done(rec: dict) -> None:
            log.append([rec])
            records[rec["id"]] = rec
            if bar is not None:
                bar.update(1)

        drive(episodes_for(todo, Executor(worker)), policy, policy.tokenizer, gen, done)
        if bar is not None:
            bar.close()
        t_gen = time.time() - t0
        write_results(out, cases, records)
        bar = _progress(len(ids), 0, "hpd bfcl: score", progress)
        scores = score_run(out, cases, records, worker, progress=None if bar is None else bar.update)
        if bar is not None:
            bar.close()
        info = dict(worker.info)
    metrics = {
        "benchmark": "BFCL v4", "bfcl_eval": lib.installed_version(), "model": desc.get("model"),
        "adapter": desc.get("adapter"), "backend": desc.get("backend"), "categories": scores["categories"],
        "aggregates": scores["aggregates"], "leaderboard": scores["leaderboard"], "skipped": skipped,
        "sample": {"n": sample, "seed": seed}, "n_entries": len(ids),
        "isolation": {"mode": isolation(), "worker": {k: info.get(k) for k in ("readonly_fs", "network_interfaces")}},
        "generation": {"generated_now": len(todo), "resumed": len(ids) - len(todo), "generate_s": round(t_gen, 2),
                       "score_s": round(time.time() - t0 - t_gen, 2), "max_new_tokens": gen.max_new_tokens,
                       "temperature": gen.temperature, "enable_thinking": gen.enable_thinking},
        "crosscheck": None,
    }
    if crosscheck and scored:
        from hpd.bfcl.official import crosscheck as run_crosscheck

        try:
            cc = run_crosscheck(out, metrics)
        except Exception as e:  # bfcl-eval's own evaluation failed: a finding, not a crash
            cc = {"match": False, "differences": [], "error": f"{type(e).__name__}: {e}"}
        write_json(out / "crosscheck.json", cc)
        metrics["crosscheck"] = {"match": cc["match"], "n_differences": len(cc["differences"]),
                                 "error": cc.get("error")}
    write_json(out / "metrics.json", metrics)
    write_jsonl(out / "entries.jsonl", scores["entries"])
    from hpd.bfcl.report import write_report

    outputs = write_report(out, metrics)
    write_json(out / "manifest.json", finish_manifest(
        man, outputs=["metrics.json", "entries.jsonl", "result/", "score/", "shards/", *outputs,
                      *(["crosscheck.json"] if metrics["crosscheck"] else [])]))
    return metrics
