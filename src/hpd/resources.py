"""Where hpd's own files are: the configs that ship with the package, and the folders of a source checkout.

* The shipped configs (``configs/``: train, method, accelerate and study configs) are package data,
  ``hpd/configs``, found through :mod:`importlib.resources` (:func:`configs_dir`, :func:`shipped_config`). In a
  checkout ``src/hpd/configs`` is a link to the repository's ``configs/``, the one copy that is edited; a wheel
  holds the files themselves (``[tool.setuptools.package-data]``).
* :func:`config_file`: a ``--config`` path as given, or, when no such file is there, the shipped copy of a
  ``configs/...`` path, so ``hpd train --config configs/qwen3-8b.yaml`` works from a checkout's root and, from
  any folder, with an installed wheel.
* :func:`checkout`: the source checkout hpd runs from (its ``bridge/`` and the ``../shared`` data folder beside
  it), None for an installed wheel. These folders are not package data.
"""

from __future__ import annotations

import os
from pathlib import Path


def configs_dir() -> Path:
    """The shipped ``configs/`` folder (``hpd/configs`` of the installed package)."""
    from importlib.resources import files

    root = files("hpd") / "configs"
    if not isinstance(root, Path):   # setuptools installs hpd as files; a zipped import would land here
        raise FileNotFoundError(f"hpd's shipped configs are not files on disk ({root!r})")
    return root


def shipped_config(*parts: str) -> Path:
    """A file of the shipped configs, e.g. ``shipped_config("methods", "dpo-smollm2.yaml")``; a one-line
    ``FileNotFoundError`` when hpd ships none of that name."""
    f = configs_dir().joinpath(*parts)
    if not f.is_file():
        raise FileNotFoundError(f"configs/{'/'.join(parts)}: hpd ships no such config")
    return f


def config_file(path: str | os.PathLike) -> Path:
    """``path`` when it names a file (or is not a relative ``configs/...`` path), else the shipped copy of that
    ``configs/...`` file when there is one (module doc)."""
    p = Path(path)
    if p.exists() or p.is_absolute() or len(p.parts) < 2 or p.parts[0] != "configs":
        return p
    shipped = configs_dir().joinpath(*p.parts[1:])
    return shipped if shipped.is_file() else p


def checkout() -> Path | None:
    """The root of the source checkout this hpd is imported from (``src/hpd`` inside it), or None."""
    root = Path(__file__).resolve().parents[2]        # src/hpd/resources.py -> the repository root
    return root if (root / "pyproject.toml").is_file() and (root / "src" / "hpd").is_dir() else None
