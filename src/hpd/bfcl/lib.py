"""The one door to ``bfcl-eval`` (pinned ``bfcl-eval==2026.3.23``): every hpd module imports BFCL through here.

Two things must happen before any ``bfcl_eval`` module is imported, and :func:`load` does both once per process:

* ``BFCL_PROJECT_ROOT``: ``bfcl_eval.constants.eval_config`` creates ``result/``, ``score/`` and ``.file_locks/``
  under it *at import*, and BFCL's file helpers take their lock files there. Unset, that root is
  ``site-packages`` itself; hpd points it at a private scratch folder (an explicit setting is kept). hpd never
  reads or writes results through that root: every path it passes to BFCL is explicit.
* ``bfcl_eval.constants.model_config`` imports every vendor handler (anthropic, cohere, mistralai, google-genai,
  boto3, qwen-agent, writer-sdk ...), which hpd does not install (``pip install --no-deps``, see requirements.txt).
  The checkers use that module only for ``MODEL_CONFIG_MAPPING[name].underscore_to_dot`` (``convert_func_name``)
  and the leaderboard CSV (display name, url, prices, org, license), so hpd puts a stub module in its place
  holding one entry, :data:`REGISTRY` -> :class:`ModelConfig` (``is_fc_model=True, underscore_to_dot=True``:
  the tools hpd shows the model have BFCL's ``.`` -> ``_`` renaming, as every OpenAI-style FC model does).
  :func:`official_handler_class` gives BFCL's own ``OpenAICompletionsHandler`` for the official evaluation
  (:mod:`hpd.bfcl.official`), which decodes result files the way ``bfcl evaluate`` does for FC models.
"""

from __future__ import annotations

import atexit
import os
import shutil
import sys
import tempfile
import types
from dataclasses import dataclass
from typing import Any

BFCL_VERSION = "2026.3.23"
#: The registry name of the evaluated policy in BFCL's folders (``result/<REGISTRY>/...``). It must not contain
#: ``_``: ``bfcl evaluate`` maps a result folder's name back to the registry with ``_`` -> ``/``.
REGISTRY = "hpd-policy"
_MODEL_CONFIG = "bfcl_eval.constants.model_config"


class BFCLUnavailable(RuntimeError):
    """bfcl-eval (or one of the dependencies its checkers import) is not installed; one line."""


@dataclass
class ModelConfig:
    """The fields of BFCL's own ``ModelConfig`` (``constants/model_config.py``) that its code reads."""

    model_name: str
    display_name: str
    url: str
    org: str
    license: str
    model_handler: Any
    input_price: float | None = None
    output_price: float | None = None
    is_fc_model: bool = True
    underscore_to_dot: bool = True


def policy_config(display_name: str = REGISTRY, handler: Any = None) -> ModelConfig:
    """The registry entry of the evaluated policy (a local model: no prices, hence BFCL's latency-based cost)."""
    return ModelConfig(model_name=REGISTRY, display_name=display_name, url="local", org="hpd", license="local",
                       model_handler=handler)


def _install_model_config_stub() -> None:
    if _MODEL_CONFIG in sys.modules:            # the real module (or our stub) is already there
        mapping = getattr(sys.modules[_MODEL_CONFIG], "MODEL_CONFIG_MAPPING", None)
        if isinstance(mapping, dict):
            mapping.setdefault(REGISTRY, policy_config())
        return
    stub = types.ModuleType(_MODEL_CONFIG)
    stub.__doc__ = "hpd stub for bfcl-eval's model registry (hpd.bfcl.lib)"
    stub.ModelConfig = ModelConfig
    stub.MODEL_CONFIG_MAPPING = {REGISTRY: policy_config()}
    sys.modules[_MODEL_CONFIG] = stub


_LOADED = False


def load(*, check: bool = True) -> None:
    """Prepare the process for ``bfcl_eval`` imports (module doc); a one-line :class:`BFCLUnavailable` if missing.
    ``check=False`` (the sandbox worker) only sets the root and the stub, importing nothing."""
    global _LOADED
    if _LOADED:
        return
    if not os.environ.get("BFCL_PROJECT_ROOT"):
        root = tempfile.mkdtemp(prefix="hpd-bfcl-root-")
        atexit.register(shutil.rmtree, root, True)
        os.environ["BFCL_PROJECT_ROOT"] = root
    for sub in ("result", "score", ".file_locks"):   # what BFCL's import creates (a sandbox worker cannot)
        os.makedirs(os.path.join(os.environ["BFCL_PROJECT_ROOT"], sub), exist_ok=True)
    _install_model_config_stub()
    if not check:
        return
    try:
        import bfcl_eval  # noqa: F401
        from bfcl_eval.eval_checker.ast_eval import ast_checker  # noqa: F401
        from bfcl_eval.model_handler import utils  # noqa: F401
    except ImportError as e:
        raise BFCLUnavailable(f"bfcl-eval=={BFCL_VERSION} is not usable ({e}); install it with "
                              f"`pip install --no-deps bfcl-eval=={BFCL_VERSION}` plus the BFCL lines of "
                              "requirements.txt") from None
    _LOADED = True


def installed_version() -> str | None:
    """The installed bfcl-eval version (None when it is not installed)."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("bfcl-eval")
    except PackageNotFoundError:
        return None


def set_display_name(name: str) -> None:
    """Name the policy in BFCL's leaderboard CSVs (the ``Model`` column)."""
    load()
    sys.modules[_MODEL_CONFIG].MODEL_CONFIG_MAPPING[REGISTRY].display_name = name


def official_handler_class():
    """BFCL's own ``OpenAICompletionsHandler`` (needs the ``openai`` package; it never sends a request here)."""
    load()
    from bfcl_eval.model_handler.api_inference.openai_completion import OpenAICompletionsHandler

    return OpenAICompletionsHandler
