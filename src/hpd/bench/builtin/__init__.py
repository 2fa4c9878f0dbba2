"""hpd.bench.builtin: the project's own offline benchmark and its live simulated-tool environment.

- :func:`generate` writes a folder in the TRAJECT-Bench ``public_data`` layout (parallel simple/hard
  twins, sequential templates x 5, mixed-domain tool catalogs) plus ``builtin_manifest.json``.
- :func:`execute` runs any built-in tool on any arguments: tools really compute (seeded lookup
  tables, geometry, arithmetic, conversions), so calls off the reference path get real answers.
- :class:`BuiltinEnv` is the harness ``Environment`` (``tools()``, ``fork()``) backed by those tools.
- :mod:`.defects`: ``generate(..., defect_rate=r)`` labels a seeded share of the train-split reference actions
  as defective; :func:`boundary_defect` / :func:`defect_accounting` count them on replayed boundaries.
"""

from .defects import boundary_defect, defect_accounting
from .env import BuiltinEnv, is_builtin_dir, read_manifest
from .generate import GENERATOR_VERSION, build, generate
from .registry import ToolDef, ToolInputError
from .tools import TOOLS, call, domain_catalog, domains, execute, get_tool

__all__ = ["BuiltinEnv", "GENERATOR_VERSION", "TOOLS", "ToolDef", "ToolInputError", "boundary_defect", "build",
           "call", "defect_accounting", "domain_catalog", "domains", "execute", "generate", "get_tool",
           "is_builtin_dir", "read_manifest"]
