"""Training boundaries -> :class:`~hpd.teacher.item.TeachItem` s (adapter over :mod:`hpd.boundary`).

``load_items(dir, split=None, limit=None)`` reads the boundary shards written by ``hpd replay``,
keeps the boundaries of the split's train tasks when ``split`` (a ``split.json`` of ``hpd data
split``) is given, and wraps each one: ``restore`` = :func:`hpd.boundary.restore` (a live Harness at
the boundary), ``document`` = the stored rendering at a privilege level, ``can_end`` = the runtime
snapshot's ``reference.end_complies`` (every scorable reference step observed).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Iterable

from .item import TeachItem


class BoundaryLoadError(ValueError):
    pass


def item_from_boundary(b: Any, restore_fn=None) -> TeachItem:
    """Wrap one :class:`hpd.boundary.model.Boundary`. Its live state comes from ``b.harness`` (a
    fork kept by ``replay_task(..., keep_forks=True)``) when present, else ``restore_fn(b)``."""

    def restore(b=b):
        h = getattr(b, "harness", None)
        if h is not None:
            return h.fork()
        if restore_fn is None:
            raise BoundaryLoadError(f"{b.uid}: no live harness and no restore function")
        return restore_fn(b)

    def document(priv: str, b=b) -> str:
        try:
            return b.document_text(priv)
        except KeyError:
            return ""

    return TeachItem(id=b.uid, context=b.context, reference=b.reference, restore=restore, document=document,
                     can_end=b.can_end, task_uid=b.task_uid, kind=b.kind,
                     meta={"index": b.index, "reference_meta": b.reference_meta})


def items_from_boundaries(bs: Iterable[Any], bench: Any = None, config: Any = None) -> list[TeachItem]:
    """TeachItems for in-memory Boundaries (e.g. from ``replay_task``); ``bench`` + ``config`` (the
    ReplayConfig used) restore states for boundaries replayed without ``keep_forks``."""
    fn = None
    if bench is not None:
        from hpd.boundary import restore
        fn = lambda b: restore(b, bench, config)  # noqa: E731
    return [item_from_boundary(b, fn) for b in bs]


def load_items(path: str | Path, *, split: str | Path | None = None, split_name: str = "train",
               limit: int | None = None, privilege: str = "plan", data: str | Path | None = None,
               bench: Any = None) -> tuple[list[TeachItem], dict]:
    """TeachItems for the boundaries in a ``hpd replay`` output folder (see module docstring).

    The replay's manifest gives the ReplayConfig and the data path used to restore live harness
    states (``data`` overrides the path); ``split`` keeps only the tasks of ``split_name``."""
    from hpd.boundary import ReplayConfig, StoreError, load_boundaries, restore
    from hpd.boundary.run import read_split_file

    path = Path(path)
    man_path = path / "manifest.json"
    if not path.is_dir() or not man_path.is_file():
        raise BoundaryLoadError(f"--boundaries {path}: not a replay output folder (run `hpd replay --out {path}` first)")
    try:
        man = json.loads(man_path.read_text())
        rcfg = ReplayConfig.from_record(man["config"])
    except (json.JSONDecodeError, KeyError, TypeError, ValueError) as exc:
        raise BoundaryLoadError(f"{man_path}: unreadable replay manifest ({exc})") from None
    if man.get("status") not in (None, "complete"):
        raise BoundaryLoadError(f"{path}: the replay run is not complete (status {man.get('status')!r}); finish it first")
    if privilege not in rcfg.privileges:
        raise BoundaryLoadError(f"{path}: documents were compiled for {list(rcfg.privileges)}, not {privilege!r}")
    try:
        bs = load_boundaries(path)
        if split is not None:
            keep = set(read_split_file(split, split_name))
            bs = [b for b in bs if b.task_uid in keep]
    except StoreError as exc:
        raise BoundaryLoadError(str(exc)) from None
    n_all = len(bs)
    if limit is not None:
        bs = bs[: max(0, limit)]
    data_dir = Path(data) if data else Path((man.get("data") or {}).get("path", ""))
    state: dict = {"bench": bench}

    from collections import OrderedDict

    forks: OrderedDict = OrderedDict()  # task uid -> {boundary index: Harness}, a small LRU

    def restore_fn(b):
        """A live harness at ``b``: replay its task once (no document compile) keeping a fork at
        every boundary, so restoring all boundaries of a task costs one replay, not one each.
        Equivalent to :func:`hpd.boundary.restore` (same config, same reference turns)."""
        if state["bench"] is None:
            from hpd.bench.loader import load_bench
            if not data_dir.is_dir():
                raise BoundaryLoadError(f"data folder {data_dir} of the replay run is missing (pass --data)")
            state["bench"] = load_bench(data_dir)
        per = forks.get(b.task_uid)
        if per is None:
            from hpd.boundary import replay_task
            try:
                got = replay_task(state["bench"].task(b.task_uid), state["bench"], rcfg, keep_forks=True, compile_docs=False)
                per = {x.index: x.harness for x in got}
            except Exception:
                return restore(b, state["bench"], rcfg)
            forks[b.task_uid] = per
            while len(forks) > 256:
                forks.popitem(last=False)
        h = per.get(b.index)
        return h.fork() if h is not None else restore(b, state["bench"], rcfg)

    info = {"n_all": n_all, "n_selected": len(bs), "data": str(data_dir), "replay_config_hash": man.get("config_hash"),
            "split": str(split) if split else None, "split_name": split_name if split else None}
    return [item_from_boundary(b, restore_fn) for b in bs], info
