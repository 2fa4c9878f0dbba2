"""Shared report helpers: atomic JSON writes and the common manifest fields every command records."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path


def write_json(path: str | os.PathLike, obj) -> Path:
    """Write ``obj`` as JSON (2-space indent, keys in insertion order) atomically (tmp + rename)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(obj, ensure_ascii=False, indent=2) + "\n", encoding="utf-8")
    os.replace(tmp, path)
    return path


def base_manifest(command: str, config: dict, data_path: str | None = None, seed: int | None = None) -> dict:
    """``{"command", "config", "code_version", "pi", "data", "seed", "time"}`` (docs/data-contracts.md, Manifests)."""
    import hpd

    return {
        "command": command,
        "config": config,
        "code_version": hpd.__version__,
        "pi": {"package": hpd.PI_PACKAGE, "version": hpd.PI_VERSION},
        "data": {"path": data_path},
        "seed": seed,
        "time": time.strftime("%Y-%m-%dT%H:%M:%S"),
    }
