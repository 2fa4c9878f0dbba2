"""Training boundaries -> :class:`~hpd.teacher.item.TeachItem` s (adapter over :mod:`hpd.boundary`).

``load_items(dir, split=None, limit=None)`` opens a ``hpd replay`` folder (:func:`hpd.boundary.open_run`),
keeps the boundaries of the split's train tasks when ``split`` (a ``split.json`` of ``hpd data
split``) is given, and wraps each one: ``restore`` = the run's :class:`hpd.boundary.Restorer` (a live
Harness at the boundary), ``document`` = the stored rendering at a privilege level, ``can_end`` = the
runtime snapshot's ``reference.end_complies`` (every scorable reference step observed).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Iterable

from .item import TeachItem


class BoundaryLoadError(ValueError):
    pass


def item_from_boundary(b: Any, restore_fn=None) -> TeachItem:
    """Wrap one :class:`hpd.boundary.record.Boundary`. Its live state comes from ``b.harness`` (a
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
        from hpd.boundary import ReplayConfig, Restorer
        fn = Restorer(config or ReplayConfig(), bench=bench)
    return [item_from_boundary(b, fn) for b in bs]


def load_items(path: str | Path, *, split: str | Path | None = None, split_name: str = "train",
               limit: int | None = None, privilege: str = "plan", data: str | Path | None = None,
               bench: Any = None) -> tuple[list[TeachItem], dict]:
    """TeachItems for the boundaries in a ``hpd replay`` output folder (:func:`hpd.boundary.open_run`): live
    harness states come from the run's restorer (``data`` overrides the run's data folder); ``split`` keeps
    only the tasks of ``split_name``."""
    from hpd.bench.split import SplitFileError, read_split
    from hpd.boundary import StoreError, open_run

    try:
        run = open_run(path, privilege=privilege)
        bs = run.boundaries()
        if split is not None:
            keep = set(read_split(split, split_name))
            bs = [b for b in bs if b.task_uid in keep]
    except (StoreError, SplitFileError) as exc:
        raise BoundaryLoadError(str(exc)) from None
    n_all = len(bs)
    if limit is not None:
        bs = bs[: max(0, limit)]
    restorer = run.restorer(bench=bench, data=data)
    info = {"n_all": n_all, "n_selected": len(bs), "data": str(restorer.data_dir) if restorer.data_dir else None,
            "replay_config_hash": run.manifest.get("config_hash"),
            **({"harness": run.config.harness} if run.config.harness != "pi" else {}),
            "split": str(split) if split else None, "split_name": split_name if split else None}
    return [item_from_boundary(b, restorer) for b in bs], info
