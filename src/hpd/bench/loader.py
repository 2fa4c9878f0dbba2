"""Load any folder laid out like TRAJECT-Bench ``public_data`` into ``Task`` records.

Layout read: ``<data>/{parallel,sequential}/<Domain>/*.json`` (each a list of task dicts) and
``<data>/tools/*.json`` (the catalog, see ``hpd.bench.catalog``). Nothing assumes which domains or files
exist; a JSON file whose first item has none of the task keys (e.g. ``sequential/Travel/sequence.json``, the
templates) is skipped and reported in ``Bench.skipped``. Task files are read entry by entry
(:mod:`hpd.bench.entries`): a malformed entry stops the load with one line naming file, record index and
field, or with ``skip_bad`` is skipped and listed in ``Bench.bad``.

Quirks handled (docs/traject-bench.md sec 2):

* the step list is ``tool list`` (space) or ``tool_list`` (underscore, ``sequential/Travel/simple_ver.json``);
* parallel and sequential steps have different keys; parallel has no ``execution_status`` (counts as
  ``success``); for sequential a missing status is inferred from an ``ERROR:`` prefix of the output;
* ``final_answer`` is a string (parallel) or ``{answer, reason}`` (sequential); ``reason`` is kept apart
  and never used as a reference;
* ``optional parameters`` may be missing; gold mixes the required/optional lists, so arguments are merged
  into one dict (first non-empty value wins on a name clash), the gold's required names are kept aside;
* tool names may contain several ``": "``: the full name is the identity, never split;
* tools missing from the catalog: ``Step.key`` is None and the step is not scorable.

Labelled reference defects (the built-in benchmark's ``defect_rate``, docs/data-contracts.md "Reference
defects"; no TRAJECT file has the label): a step key ``"defect": {"kind": ...}`` marks an injected defective step
(``Step.defect`` = the kind; the step is never scorable); a task key ``"defect": {"kind":
"premature_finish", "final_after_steps": k}`` says the reference answers after its first ``k`` steps
(``Task.final_after`` = k; the remaining steps stay scorable gold the reference never issues).

``scorable(step) = tool resolves into the catalog AND status == "success" AND no defect label`` (sec 9.3).
Task uid = ``<path relative to data dir>#<index>``. Kind = ``trajectory_type`` if present, else the top
folder (``parallel``/``sequential``). Difficulty = the file stem without ``_ver`` (``simple``, ``hard``,
``traj_query``).
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hpd.bench import entries
from hpd.bench.canon import is_empty, signature
from hpd.bench.catalog import Catalog
from hpd.bench.entries import BadEntry, BadEntryError

DEFAULT_REL = Path("..") / "shared" / "traject-bench" / "public_data"


@dataclass(eq=False, slots=True)
class Step:
    """One gold step. ``description`` is the gold step's ``tool description``; for sequential tasks it is
    the chain-role instruction and leaks the plan, so it must never be shown to a policy."""

    index: int
    tool: str                      # the name as written in the data
    key: str | None                # catalog key (canon name) or None when not in the catalog
    arguments: dict[str, Any]      # required + optional merged, data values as written
    required_names: list[str]
    output: str
    status: str                    # "success" | "failed"
    scorable: bool
    description: str = ""
    sig: tuple = ()
    defect: str | None = None      # kind of a labelled injected defect (never scorable), else None

    def call(self) -> dict:
        """The call as a policy would emit it: catalog name (or the raw name) and non-empty arguments."""
        return {"name": self.tool, "arguments": {k: v for k, v in self.arguments.items() if not is_empty(v)}}


@dataclass(eq=False, slots=True)
class Task:
    uid: str
    path: str
    index: int
    kind: str                      # "parallel" | "sequential"
    domain: str
    difficulty: str
    query: str
    steps: list[Step]
    final_answer: str
    final_reason: str = ""
    meta: dict = field(default_factory=dict)
    final_after: int | None = None  # labelled premature_finish: the reference answers after this many steps

    @property
    def scorable_steps(self) -> list[Step]:
        return [s for s in self.steps if s.scorable]

    @property
    def n_boundaries(self) -> int:
        """D2 boundaries: parallel 2, sequential len(steps) + 1 (``final_after`` + 1 when the reference answers
        early, a labelled premature_finish)."""
        if self.kind == "parallel":
            return 2
        return (len(self.steps) if self.final_after is None else self.final_after) + 1


def resolve_data_dir(data: str | os.PathLike | None = None) -> Path:
    """``--data``, else ``$HPD_TRAJECT_DIR``, else ``../shared/traject-bench/public_data`` (from the cwd, then
    from the repository root). Raises ``FileNotFoundError`` with a one-line message."""
    if data:
        p = Path(data).expanduser()
    elif os.environ.get("HPD_TRAJECT_DIR"):
        p = Path(os.environ["HPD_TRAJECT_DIR"]).expanduser()
    else:
        from hpd.resources import checkout

        p = Path.cwd() / DEFAULT_REL
        if not p.is_dir() and checkout() is not None:
            p = checkout() / DEFAULT_REL
    if not p.is_dir():
        raise FileNotFoundError(f"TRAJECT-Bench data folder not found: {p} (use --data or HPD_TRAJECT_DIR)")
    return p.resolve()


def _merge_args(step: dict) -> tuple[dict[str, Any], list[str]]:
    args: dict[str, Any] = {}
    req_names: list[str] = []
    for key in ("required parameters", "required_parameters", "optional parameters", "optional_parameters"):
        lst = step.get(key) or []
        if isinstance(lst, dict):
            lst = [{"name": k, "value": v} for k, v in lst.items()]
        for p in lst:
            if not isinstance(p, dict) or "name" not in p:
                continue
            n = str(p["name"]).strip()
            v = p.get("value")
            if key.startswith("required"):
                req_names.append(n)
            if n not in args or (is_empty(args[n]) and not is_empty(v)):
                args[n] = v
    return args, req_names


def _final_answer(fa: Any) -> tuple[str, str]:
    if isinstance(fa, dict):
        return str(fa.get("answer") or ""), str(fa.get("reason") or "")
    return ("" if fa is None else str(fa)), ""


def _parse_task(e: dict, rel: str, i: int, top: str, domain: str, difficulty: str, catalog: Catalog) -> Task:
    raw_steps = e.get("tool list")
    if raw_steps is None:
        raw_steps = e.get("tool_list") or []
    kind = str(e.get("trajectory_type") or top).lower()
    kind = "sequential" if kind.startswith("seq") else "parallel"
    steps: list[Step] = []
    for j, s in enumerate(raw_steps):
        name = str(s.get("tool name") or s.get("tool_name") or "")
        args, req = _merge_args(s)
        out = s.get("executed_output")
        out = "" if out is None else (out if isinstance(out, str) else str(out))
        status = s.get("execution_status")
        if status is None:
            status = "failed" if (kind == "sequential" and out.startswith("ERROR:")) else "success"
        status = "success" if str(status).lower() == "success" else "failed"
        key = catalog.resolve(name) if name else None
        defect = _defect_kind(s.get("defect"))
        steps.append(Step(index=j, tool=name, key=key, arguments=args, required_names=req, output=out,
                          status=status, scorable=(key is not None and status == "success" and defect is None),
                          description=str(s.get("tool description") or ""),
                          sig=signature(key or name, args), defect=defect))
    fa, reason = _final_answer(e.get("final_answer"))
    gi = e.get("generation_info") or {}
    meta = {k: e[k] for k in ("sequence_name", "num_tools_used", "num_successful_tools", "tool count") if k in e}
    if isinstance(gi, dict):
        meta.update({k: gi[k] for k in ("domain_index", "sequence_index", "trajectory_index") if k in gi})
    final_after = None
    td = e.get("defect")
    if _defect_kind(td) == "premature_finish" and isinstance(td.get("final_after_steps"), int):
        final_after = max(0, min(len(steps), td["final_after_steps"]))
        meta["defect"] = dict(td)
    return Task(uid=f"{rel}#{i}", path=rel, index=i, kind=kind, domain=domain, difficulty=difficulty,
                query=str(e.get("query") or ""), steps=steps, final_answer=fa, final_reason=reason, meta=meta,
                final_after=final_after)


def _defect_kind(label: Any) -> str | None:
    """The kind of a defect label (``{"kind": ...}``), else None."""
    if isinstance(label, dict) and isinstance(label.get("kind"), str) and label["kind"]:
        return label["kind"]
    return None


TASK_KEYS = ("query", "tool list", "tool_list", "final_answer")   # any of them in item 0: a task file


@dataclass
class Bench:
    """A loaded data folder: tasks (file order), catalog (with gold facts observed), skipped files."""

    data_dir: Path
    tasks: list[Task]
    catalog: Catalog
    skipped: list[str] = field(default_factory=list)
    bad: list[BadEntry] = field(default_factory=list)   # malformed entries skipped (``skip_bad``)
    _by_uid: dict[str, Task] | None = None

    def task(self, uid: str) -> Task:
        if self._by_uid is None:
            self._by_uid = {t.uid: t for t in self.tasks}
        return self._by_uid[uid]

    @property
    def domains(self) -> list[str]:
        return sorted({t.domain for t in self.tasks})

    def pool(self, task: Task, k: int | None = 20, *, full_domain: bool = False):
        from hpd.bench.pool import ToolPool
        return ToolPool.for_task(task, self.catalog, k=k, full_domain=full_domain)

    def env(self, task: Task, **kw):
        """A fresh ``ReplayEnv`` for ``task`` (kwargs: see ``ReplayEnv``)."""
        from hpd.bench.replay import ReplayEnv
        return ReplayEnv(task, self, **kw)


def load_bench(data: str | os.PathLike | None = None, *, skip_bad: bool = False,
               strict_catalog: bool = False) -> Bench:
    """Load every task and the catalog of a data folder (see module docstring).

    A malformed entry (:mod:`hpd.bench.entries`: not UTF-8, bad JSON, truncated file, missing field, wrong
    type; with ``strict_catalog`` also a step whose tool is missing from the catalog) raises a one-line
    :class:`BadEntryError` naming file, record index and field; with ``skip_bad`` it is skipped instead and
    listed in ``Bench.bad`` (task uids keep their file index)."""
    d = resolve_data_dir(data)
    catalog = Catalog.load(d)
    tasks: list[Task] = []
    skipped: list[str] = []
    bad: list[BadEntry] = []

    def problem(entry: BadEntry) -> None:
        if not skip_bad:
            raise BadEntryError(entry, f"bad TRAJECT-Bench entry {entry.line(d)} (--skip-bad skips such entries)")
        bad.append(entry)

    for top in ("parallel", "sequential"):
        tdir = d / top
        if not tdir.is_dir():
            continue
        for f in sorted(tdir.glob("*/*.json")):
            rel = f.relative_to(d).as_posix()
            got = _file_tasks(f, rel, top, catalog, problem, strict_catalog)
            if got is None:
                skipped.append(rel)
            else:
                tasks += got
    for t in tasks:
        for s in t.steps:
            if s.scorable:
                catalog.observe(s.key, s.arguments)
    return Bench(data_dir=d, tasks=tasks, catalog=catalog, skipped=skipped, bad=bad)


def _file_tasks(f: Path, rel: str, top: str, catalog: Catalog, problem, strict_catalog: bool) -> list[Task] | None:
    """The tasks of one file, entry by entry (``problem(BadEntry)`` on each malformed one); None when the
    file is not a task list (e.g. ``sequential/Travel/sequence.json``, the templates)."""
    try:
        text = entries.read_text(f.read_bytes())
    except OSError as e:
        problem(BadEntry(rel, 0, None, "unreadable", f"cannot read the file ({e.strerror})"))
        return []
    domain = f.parent.name
    difficulty = f.stem[:-4] if f.stem.endswith("_ver") else f.stem
    out: list[Task] = []
    try:
        for i, e, raw in entries.items(text, rel):
            if i == 0 and not (isinstance(e, dict) and any(k in e for k in TASK_KEYS)):
                return None
            bad = _entry_problem(e, raw, rel, i)
            if bad is not None:
                problem(bad)
                continue
            task = _parse_task(e, rel, i, top, domain, difficulty, catalog)
            unknown = _unknown_tool(task, e) if strict_catalog else None
            if unknown is not None:
                problem(unknown)
                continue
            out.append(task)
    except entries.NotAList:
        try:
            json.loads(text)
        except ValueError as e:
            problem(BadEntry(rel, 0, None, "bad-json", f"not valid JSON ({e})"))
            return []
        return None
    except BadEntryError as e:      # bad JSON / truncated: the rest of the file cannot be read
        problem(e.entry)
    return out


def _entry_problem(e, raw: str, rel: str, i: int) -> BadEntry | None:
    field_ = entries.non_utf8_field(e, raw)
    if field_ is not None:
        return BadEntry(rel, i, field_, "not-utf8", "holds bytes that are not UTF-8")
    bad = entries.check_task(e)
    return None if bad is None else BadEntry(rel, i, bad[1], bad[0], bad[2])


def _unknown_tool(task: Task, e: dict) -> BadEntry | None:
    """A step (not a labelled defect) whose tool is missing from the catalog, as a ``unknown-tool`` entry."""
    key = "tool list" if "tool list" in e else "tool_list"
    for s in task.steps:
        if s.key is None and s.defect is None:
            return BadEntry(task.path, task.index, f"{key}[{s.index}].tool name", "unknown-tool",
                            f"tool {s.tool!r} is not in the catalog (tools/*.json)")
    return None


def load_tasks(data: str | os.PathLike | None = None) -> list[Task]:
    """All tasks of a data folder (``load_bench(data).tasks``)."""
    return load_bench(data).tasks


def data_checksum(data: str | os.PathLike) -> dict:
    """The manifest input entry of a data folder: its path and the sha256 over every ``*.json`` file under
    it (relative path + bytes), i.e. over everything :func:`load_bench` can read."""
    from hpd.runfolder import input_entry

    return input_entry(data, pattern="*.json")
