"""The README's headline table, generated from the results registry (``results/<study>/``).

:func:`headline` renders the main arm's mean ± std over seeds per variant and defect rate, and the paired
HPD − SFT / HPD-T − SFT differences with their bootstrap intervals, from :func:`hpd.report.studystats.study_report`;
a study with no registered cell gives one line saying so; a study evaluated in more than one harness (Figure 4)
gives its by-harness table (:mod:`hpd.report.harness_table`) instead. :func:`update_readme` writes it between the
README's ``<!-- results:<study>:begin -->`` and ``<!-- results:<study>:end -->`` markers, or, when the README has
none for that study, the unnamed ``<!-- results:begin -->`` / ``<!-- results:end -->`` (``hpd report --study
results/<study> --readme README.md``); a test checks that every committed block holds exactly what the committed
registry gives.
"""

from __future__ import annotations

import re
from pathlib import Path

from hpd.report.results import mean_std_text
from hpd.runfolder import write_text

BEGIN, END = "<!-- results:begin -->", "<!-- results:end -->"
#: a named block: ``<!-- results:<study>:begin -->``
NAMED = re.compile(r"<!-- results:([\w.+-]+):begin -->")
KEYS = ("TS", "F1", "Step-SR", "RC", "Action-Acc")


class HeadlineError(ValueError):
    """A README without the results markers."""


def _summary_rows(doc: dict) -> list[str]:
    out = ["| arm | defects | variant | seeds | " + " | ".join(KEYS) + " |", "|---" * (len(KEYS) + 4) + "|"]
    for r in doc["summary"]:
        cells = " | ".join(mean_std_text(r["metrics"][k]) for k in KEYS)
        out.append(f"| {r['arm']} | {100 * r['defect_rate']:.0f}% | {r['variant']} | {len(r['seeds'])} | {cells} |")
    return out


def _comparison_rows(doc: dict) -> list[str]:
    if not doc["comparisons"]:
        return []
    out = ["", "| paired difference | defects | pairs | TS [95% CI] | RC [95% CI] | McNemar p (TS) |",
           "|---|---|---|---|---|---|"]
    for c in doc["comparisons"]:
        ci = {k: c["metrics"][k] for k in ("TS", "RC")}
        txt = [("–" if m["diff"] is None else f"{m['diff']:+.3f} [{m['ci_low']:+.3f}, {m['ci_high']:+.3f}]")
               for m in ci.values()]
        out.append(f"| {c['name']} | {100 * c['defect_rate']:.0f}% | {c['n_pairs']} | {txt[0]} | {txt[1]} | "
                   f"{c['mcnemar_TS']['p']:.3g} |")
    return out


def markers(study: str | None = None) -> tuple[str, str]:
    """The block's markers: the unnamed pair, or those of ``study``."""
    return (BEGIN, END) if study is None else (f"<!-- results:{study}:begin -->", f"<!-- results:{study}:end -->")


def named_blocks(text: str) -> list[str]:
    """The study names of the named blocks in ``text``."""
    return NAMED.findall(text)


def headline(study_dir: str | Path) -> str:
    """The headline block's markdown for ``results/<study>`` (see module doc)."""
    from hpd.report.harness_table import harness_markdown, harnesses_of
    from hpd.report.studystats import StudyReportError, dtype_caveats, study_report

    study_dir = Path(study_dir)
    try:
        doc = study_report(study_dir, seed=0)   # the full report's resamples: the same intervals
    except StudyReportError:
        return (f"No cell of the study `{study_dir.name}` is in the registry yet (`{study_dir.as_posix()}/`); "
                "`hpd study status` lists what is running and what is missing.")
    lines = [f"From `{study_dir.as_posix()}/` ({len(doc['cells'])} registered cells; "
             f"`hpd report --study {study_dir.as_posix()}` gives every metric, the intervals and the plots):", ""]
    if len(harnesses_of(doc["harnesses"])) > 1:
        return "\n".join(lines + [harness_markdown(doc["harnesses"])])
    caveats = dtype_caveats(doc["comparisons"])
    return "\n".join(lines + _summary_rows(doc) + _comparison_rows(doc) + ([""] + caveats if caveats else []))


def replace_block(text: str, block: str, where: str = "README.md", study: str | None = None) -> str:
    """``text`` with the markers' content replaced by ``block``; a one-line error when a marker is missing."""
    begin, end = markers(study)
    pat = re.compile(re.escape(begin) + r".*?" + re.escape(end), re.S)
    if not pat.search(text):
        raise HeadlineError(f"{where} has no {begin} ... {end} block for the headline table")
    return pat.sub(lambda _: f"{begin}\n{block}\n{end}", text, count=1)


def read_block(text: str, study: str | None = None) -> str | None:
    """What stands between the markers (None without them)."""
    begin, end = markers(study)
    m = re.search(re.escape(begin) + r"\n(.*?)\n" + re.escape(end), text, re.S)
    return m.group(1) if m else None


def update_readme(readme: str | Path, study_dir: str | Path) -> str:
    """Write :func:`headline` of ``study_dir`` into ``readme``'s block for that study (its named block, else the
    unnamed one); returns the block."""
    readme = Path(readme)
    text = readme.read_text(encoding="utf-8")
    name = Path(study_dir).name
    block = headline(study_dir)
    write_text(readme, replace_block(text, block, str(readme), name if name in named_blocks(text) else None))
    return block
