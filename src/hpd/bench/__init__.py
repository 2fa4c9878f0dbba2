"""``hpd.bench``: TRAJECT-Bench-shaped data as an environment for ``hpd.harness``.

- :mod:`hpd.bench.loader`  ``load_bench(data) -> Bench`` / ``load_tasks(data)``; ``Task``, ``Step``;
- :mod:`hpd.bench.catalog` tools files -> ``CatalogTool`` + JSON Schema (``Catalog``);
- :mod:`hpd.bench.canon`   canonical names, values, call signatures (docs/traject-bench.md sec 9.1);
- :mod:`hpd.bench.pool`    the per-task tool pool and the executor's schema check;
- :mod:`hpd.bench.match`   exact / near matching of a call against a gold step;
- :mod:`hpd.bench.replay`  ``ReplayEnv`` (the offline replay executor, an ``Environment``);
- :mod:`hpd.bench.episode` episodes in the harness driven by a batch policy;
- :mod:`hpd.bench.split`   leakage-safe R1 group split; :mod:`hpd.bench.stats` counts;
- :mod:`hpd.bench.fetch`   download the benchmark at a pinned commit;
- :mod:`hpd.bench.builtin` the built-in generated benchmark (separate owner).
"""

from hpd.bench.canon import canon_args, canon_name, canon_value, signature
from hpd.bench.catalog import Catalog, CatalogTool
from hpd.bench.loader import Bench, Step, Task, load_bench, load_tasks, resolve_data_dir

__all__ = [
    "Bench", "Catalog", "Step", "Task", "CatalogTool", "canon_args", "canon_name", "canon_value", "load_bench",
    "load_tasks", "resolve_data_dir", "signature", "ReplayEnv", "ToolPool",
]


def __getattr__(name):  # lazy: these import the harness only when used
    if name == "ReplayEnv":
        from hpd.bench.replay import ReplayEnv
        return ReplayEnv
    if name == "ToolPool":
        from hpd.bench.pool import ToolPool
        return ToolPool
    raise AttributeError(name)
