"""Scoring with bfcl-eval's own checkers, and BFCL's own aggregates.

Per entry, exactly the rules of BFCL's evaluation runner (``eval_checker/eval_runner.py``) for an FC model whose
result file holds ``[{name: "<json arguments>"}]`` or text (:mod:`hpd.bfcl.prompt`); the result value is decoded
the way BFCL's FC handler decodes it (``json.loads`` of each call's arguments; text does not decode):

* AST categories (``simple_*``, ``multiple``, ``parallel*``, ``live_simple`` ...): a result that does not decode
  fails with ``ast_decoder:decoder_failed`` (hpd adds why its parser found no call); otherwise BFCL's
  ``ast_checker(function docs, decoded calls, possible answer, language, category, model)``, the language being
  Java / JavaScript for ``simple_java`` / ``simple_javascript`` (BFCL's type converters), else Python.
* ``irrelevance`` / ``live_irrelevance`` pass iff no call decodes, ``live_relevance`` iff one does.
* Multi-turn: a result that is not a list of turns is an ``inference_error``; fewer turns than the ground truth is
  ``force_terminated``; otherwise each step is decoded with ``convert_to_function_call`` and BFCL's
  ``multi_turn_checker`` (which re-executes the model's calls and the ground truth and compares state and
  responses turn by turn) runs **in the sandbox** (:mod:`hpd.bfcl.sandbox`); a sandbox timeout fails the entry
  with ``hpd:sandbox_error``.

Outputs, in BFCL's own layouts under the run folder (all written through :mod:`hpd.runfolder`):
``score/<model>/<group>/BFCL_v4_<category>_score.json`` (a header ``{"accuracy", "correct_count",
"total_count"}`` then the failing entries, as ``bfcl evaluate`` writes them) and BFCL's leaderboard tables
``score/data_{overall,non_live,live,multi_turn,agentic,format_sensitivity}.csv``, computed by BFCL's own
``generate_leaderboard_csv`` from the same table ``bfcl evaluate`` builds. Its aggregate rules apply unchanged:
non-live is the unweighted mean of the AST sub-scores (simple = mean of Python, Java, JavaScript), live the
count-weighted mean, multi-turn the unweighted mean, Overall = 10 % non-live + 10 % live + 10 % irrelevance +
30 % multi-turn + 40 % agentic, and **a category not evaluated counts as 0** (its cell shows N/A). hpd never
evaluates web search and memory, so Overall is at most 0.60 here; with ``--sample`` every aggregate is over the
sample (``total_count`` = the sample size, as with ``bfcl evaluate --partial-eval``).
"""

from __future__ import annotations

import csv
import io
import json
import tempfile
from collections import Counter
from pathlib import Path
from typing import Any

from hpd.bfcl import lib
from hpd.bfcl.data import Case, is_multi_turn, is_relevance
from hpd.runfolder import write_jsonl, write_text

#: metrics.json ``aggregates`` key -> (BFCL CSV, column): BFCL's own summary numbers.
AGGREGATES = {
    "overall": ("data_overall.csv", "Overall Acc"),
    "non_live": ("data_non_live.csv", "Non-Live Overall Acc"),
    "live": ("data_live.csv", "Live Overall Acc"),
    "multi_turn": ("data_multi_turn.csv", "Multi Turn Overall Acc"),
    "agentic": ("data_agentic.csv", "Agentic Overall Acc"),
    "relevance": ("data_overall.csv", "Relevance Detection"),
    "irrelevance": ("data_overall.csv", "Irrelevance Detection"),
}
CSV_FILES = ("data_overall.csv", "data_non_live.csv", "data_live.csv", "data_multi_turn.csv", "data_agentic.csv",
             "data_format_sensitivity.csv")


def _language(category: str):
    from bfcl_eval.constants.enums import Language

    return {"simple_java": Language.JAVA, "simple_javascript": Language.JAVASCRIPT}.get(category, Language.PYTHON)


def decode_ast(result: Any) -> list[dict]:
    """BFCL's FC ``decode_ast`` (``OpenAICompletionsHandler``): ``[{name: json.loads(args)}]``; raises on text."""
    if not isinstance(result, list):
        raise ValueError("the model did not call a function (text reply)")
    out = []
    for call in result:
        name = list(call.keys())[0]
        out.append({name: json.loads(call[name])})
    return out


def decode_execute(step: Any) -> list[str]:
    """BFCL's FC ``decode_execute``: ``convert_to_function_call`` (the strings the executor ``eval``s)."""
    from bfcl_eval.model_handler.utils import convert_to_function_call

    return convert_to_function_call(step)


def _failure(case: Case, rec: dict, error: Any, error_type: str, **extra: Any) -> dict:
    parse = [p for p in (rec.get("hpd") or {}).get("parse", []) if p]
    return {"id": case.id, "model_name": lib.REGISTRY, "test_category": case.category, "valid": False,
            "error": error, "error_type": error_type, "hpd_parse": parse, "prompt": case.eval_entry,
            "model_result_raw": rec.get("result"), **extra}


def score_relevance(case: Case, rec: dict) -> dict:
    from bfcl_eval.utils import is_empty_output

    try:
        decoded = decode_ast(rec["result"])
        has_call = not is_empty_output(decoded)
    except Exception:
        decoded, has_call = None, False
    if ("irrelevance" in case.category) != has_call:
        return {"valid": True}
    if "irrelevance" in case.category:
        return _failure(case, rec, ["Valid syntax. Successfully decode AST when it should not."],
                        "irrelevance_error:decoder_success", decoded_result=decoded)
    return _failure(case, rec, ["Invalid syntax. Failed to decode AST when it should have."],
                    "relevance_error:decoder_failed", decoded_result=decoded)


def score_ast(case: Case, rec: dict) -> dict:
    from bfcl_eval.eval_checker.ast_eval.ast_checker import ast_checker
    from bfcl_eval.utils import is_function_calling_format_output

    answer = case.answer["ground_truth"]
    try:
        decoded = decode_ast(rec["result"])
    except Exception as e:
        return _failure(case, rec, [f"Invalid syntax. Failed to decode AST. {e}"], "ast_decoder:decoder_failed",
                        possible_answer=answer)
    if not is_function_calling_format_output(decoded):
        return _failure(case, rec, ["Did not output in the specified format."],
                        "ast_decoder:decoder_wrong_output_format", possible_answer=answer)
    res = ast_checker(case.eval_entry["function"], decoded, answer, _language(case.category), case.category,
                      lib.REGISTRY)
    if res["valid"]:
        return {"valid": True}
    return _failure(case, rec, res["error"], res["error_type"], model_result_decoded=decoded, possible_answer=answer)


def score_multi_turn(case: Case, rec: dict, worker: Any) -> dict:
    from bfcl_eval.eval_checker.multi_turn_eval.multi_turn_utils import is_empty_execute_response

    from hpd.bfcl.sandbox import SandboxError

    gt, result = case.answer["ground_truth"], rec["result"]
    if not isinstance(result, list):
        msg = "Error during inference phase. Model did not output a list of model responses."
        return _failure(case, rec, {"error_message": [msg], "error_type": "multi_turn:inference_error"},
                        "multi_turn:inference_error", possible_answer=gt)
    if len(result) != len(gt):
        end = (rec.get("hpd") or {}).get("end")
        return _failure(case, rec, {"error_message": [f"Model was force-terminated during inference phase. The length "
                                                      f"of the model result turns ({len(result)}) does not match the "
                                                      f"length of the ground truth turns ({len(gt)})."],
                                    "error_type": "multi_turn:force_terminated", "hpd_end": end},
                        "multi_turn:force_terminated", possible_answer=gt)
    decoded = []
    for turn in result:
        steps = []
        for step in turn:
            try:
                calls = decode_execute(step)
            except Exception:
                continue
            if not is_empty_execute_response(calls):
                steps.append(calls)
        decoded.append(steps)
    entry = {k: case.eval_entry[k] for k in ("id", "initial_config", "involved_classes") if k in case.eval_entry}
    entry.setdefault("initial_config", {})
    try:
        res = worker.request("check", decoded=decoded, ground_truth=gt, entry=entry, category=case.category,
                             model_name=lib.REGISTRY)
    except SandboxError as e:
        res = {"valid": False, "error_message": str(e), "error_type": "hpd:sandbox_error"}
    if res.get("valid"):
        return {"valid": True}
    return _failure(case, rec, res, res.get("error_type", "multi_turn:unknown"), model_result_decoded=decoded,
                    possible_answer=gt)


def score_case(case: Case, rec: dict, worker: Any) -> dict:
    """One entry -> ``{"valid": True}`` or BFCL's failure entry (with ``error_type`` and hpd's parse reasons).
    A checker that raises (``bfcl evaluate`` would stop there) fails the entry with ``hpd:checker_error``."""
    try:
        if is_multi_turn(case.category):
            return score_multi_turn(case, rec, worker)
        if is_relevance(case.category):
            return score_relevance(case, rec)
        return score_ast(case, rec)
    except Exception as e:
        return _failure(case, rec, [f"{type(e).__name__}: {e}"], "hpd:checker_error")


def reply_issues(rec: dict, multi_turn: bool) -> set[str]:
    """Why an entry's replies were not (all) calls: ``no_call`` (single-turn only: in multi-turn a text reply is
    how a turn ends), ``malformed_call``, ``generation_error``, ``force_quit``, ``sandbox_error``."""
    h = rec.get("hpd") or {}
    issues = {str(r).split(":")[0] for r in h.get("parse", []) if r}
    if multi_turn:
        issues.discard("no_call")
        if h.get("end", "complete") != "complete":
            issues.add(str(h["end"]).split(":")[0])
    if h.get("error"):
        issues.add("generation_error")
    return issues


def category_summary(case_rows: list[tuple[Case, dict, dict]]) -> dict:
    """Accuracy, counts, BFCL failure types and hpd's reply issues (entries per issue) for one category."""
    total = len(case_rows)
    correct = sum(1 for _, _, s in case_rows if s["valid"])
    errors = Counter(s["error_type"] for _, _, s in case_rows if not s["valid"])
    issues = Counter(i for c, rec, _ in case_rows for i in reply_issues(rec, is_multi_turn(c.category)))
    return {"accuracy": correct / total if total else 0.0, "correct": correct, "total": total,
            "errors": dict(sorted(errors.items())),
            "reply_issues": {k: issues.get(k, 0) for k in ("no_call", "malformed_call", "generation_error",
                                                           "force_quit", "sandbox_error")}}


def score_file_rows(summary: dict, failures: list[dict]) -> list[dict]:
    """BFCL's score file: the header line, then every failing entry."""
    header = {"accuracy": summary["accuracy"], "correct_count": summary["correct"], "total_count": summary["total"]}
    from bfcl_eval.utils import make_json_serializable

    return [header, *(make_json_serializable(f) for f in failures)]


def leaderboard_table(results: dict[str, list[dict]], summaries: dict[str, dict]) -> dict:
    """The table ``bfcl evaluate`` builds (``record_cost_latency`` + ``record_result`` per category)."""
    from bfcl_eval.eval_checker.eval_runner_helper import record_cost_latency, record_result

    table: dict = {}
    for cat, recs in results.items():
        record_cost_latency(table, lib.REGISTRY, recs)
        s = summaries[cat]
        record_result(table, lib.REGISTRY, cat, s["accuracy"], s["total"])
        table[lib.REGISTRY][cat]["correct_count"] = s["correct"]
    latency = table.get(lib.REGISTRY, {}).get("latency", {}).get("data", [])
    if len(latency) == 1:   # BFCL's statistics.stdev raises on one latency: hpd shows N/A (bfcl evaluate crashes)
        latency.clear()
    return table


def leaderboard_csvs(table: dict) -> dict[str, str]:
    """BFCL's ``generate_leaderboard_csv`` on ``table``: ``{file name: CSV text}`` (computed in a scratch folder)."""
    import contextlib

    from bfcl_eval.eval_checker.eval_runner_helper import generate_leaderboard_csv

    with tempfile.TemporaryDirectory(prefix="hpd-bfcl-csv-") as tmp:
        with contextlib.redirect_stdout(io.StringIO()):
            generate_leaderboard_csv(table, Path(tmp))
        return {name: (Path(tmp) / name).read_text(encoding="utf-8") for name in CSV_FILES}


def csv_row(text: str) -> dict[str, str]:
    """A leaderboard CSV's (only) model row as ``{column: cell}``."""
    rows = list(csv.reader(io.StringIO(text)))
    return dict(zip(rows[0], rows[1])) if len(rows) > 1 else {}


def percent(cell: str | None) -> float | None:
    """``"12.34%"`` -> 0.1234; ``"N/A"`` (a category BFCL did not see) -> None."""
    if cell is None or not cell.endswith("%"):
        return None
    return round(float(cell[:-1]) / 100, 6)


def aggregates(csvs: dict[str, str]) -> tuple[dict, dict]:
    """``(aggregates, leaderboard)``: BFCL's summary numbers under stable keys, and every CSV row verbatim."""
    rows = {name[len("data_"):-len(".csv")]: csv_row(text) for name, text in csvs.items()}
    agg = {key: percent(rows[f[len("data_"):-len(".csv")]].get(col)) for key, (f, col) in AGGREGATES.items()}
    return agg, rows


def group_dir(category: str) -> str:
    """BFCL's folder for a category's result / score file (``non_live``, ``live``, ``multi_turn``)."""
    from bfcl_eval.utils import get_directory_structure_by_category

    return get_directory_structure_by_category(category)


def result_path(out: Path, category: str) -> Path:
    return Path(out) / "result" / lib.REGISTRY / group_dir(category) / f"BFCL_v4_{category}_result.json"


def score_path(out: Path, category: str) -> Path:
    return Path(out) / "score" / lib.REGISTRY / group_dir(category) / f"BFCL_v4_{category}_score.json"


def score_run(out: Path, cases: dict[str, list[Case]], records: dict[str, dict], worker: Any,
              progress: Any = None) -> dict:
    """Score every selected entry; write BFCL's score files and leaderboard CSVs; return the metric block."""
    lib.load()
    summaries, results, entries = {}, {}, []
    for cat, cs in cases.items():
        rows = []
        for case in cs:
            rec = records[case.id]
            rows.append((case, rec, score_case(case, rec, worker)))
            if progress is not None:
                progress(1)
        summaries[cat] = category_summary(rows)
        results[cat] = [rec for _, rec, _ in rows]
        write_jsonl(score_path(out, cat), score_file_rows(summaries[cat], [s for _, _, s in rows if not s["valid"]]))
        entries += [{"id": c.id, "category": cat, "valid": s["valid"], "error_type": s.get("error_type"),
                     "parse": [p for p in (rec.get("hpd") or {}).get("parse", []) if p]} for c, rec, s in rows]
    csvs = leaderboard_csvs(leaderboard_table(results, summaries))
    for name, text in csvs.items():
        write_text(Path(out) / "score" / name, text)
    agg, board = aggregates(csvs)
    return {"categories": summaries, "aggregates": agg, "leaderboard": board, "entries": entries}
