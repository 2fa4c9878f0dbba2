"""Build a teacher from CLI/config names: ``auto`` | ``hf`` | ``vllm`` | ``openai`` (model teachers, through
:mod:`hpd.policy.backends`) or a scripted one (``oracle``, ``reference``, ``reference-perturbed``,
``garbage``; no model, for tests and ablations)."""

from __future__ import annotations

from typing import Any

from .proposal import (
    TEACHERS,
    GarbageTeacher,
    OracleTeacher,
    PolicyTeacher,
    ReferencePerturbedTeacher,
    ReferenceTeacher,
)

SCRIPTED = {"oracle": OracleTeacher, "reference": ReferenceTeacher,
            "reference-perturbed": ReferencePerturbedTeacher, "garbage": GarbageTeacher}


class TeacherConfigError(ValueError):
    pass


def resolve_teacher(name: str, model: str | None) -> str:
    """``auto`` -> the model teacher's engine by :func:`hpd.policy.backends.resolve_backend` (``vllm`` where vLLM
    runs, ``hf`` for the tiny model or without it, as ``hpd eval --backend auto``); any other name is itself."""
    if name != "auto":
        return name
    if not model:
        raise TeacherConfigError("--teacher auto needs --model DIR (the base model is the default teacher)")
    from hpd.policy.backends import resolve_backend

    return resolve_backend("auto", model)


def build_teacher(name: str, *, model: str | None = None, privilege: str = "plan", max_new_tokens: int = 256,
                  base_url: str | None = None, api_model: str | None = None, device: str | None = None,
                  **backend_kw: Any):
    if name in SCRIPTED:
        return SCRIPTED[name]()
    if name not in TEACHERS:
        raise TeacherConfigError(f"unknown teacher {name!r}; choose one of {', '.join(TEACHERS)}")
    if name in ("hf", "vllm"):
        if not model:
            raise TeacherConfigError(f"--teacher {name} needs --model DIR (the base model is the default teacher)")
        kw = dict(backend_kw)
        if device:
            kw["device"] = device
        from hpd.policy.backends import make_policy
        if name == "hf":
            policy = make_policy("hf", model, **kw)
        else:
            kw.pop("batch_size", None)
            try:
                policy = make_policy("vllm", model, **kw)
            except Exception as exc:  # BackendUnavailable (no vllm / no GPU): a clear one-liner
                raise TeacherConfigError(f"vllm teacher unavailable: {exc}") from None
    else:
        if not base_url:
            raise TeacherConfigError("--teacher openai needs --base-url (an OpenAI-compatible endpoint)")
        from hpd.policy.backends.openai import OpenAIPolicy
        backend_kw.pop("batch_size", None)
        backend_kw.pop("dtype", None)     # the endpoint computes in whatever it computes in
        policy = OpenAIPolicy(base_url, api_model or model or "default", **backend_kw)
    return PolicyTeacher(policy, getattr(policy, "tokenizer", None), privilege=privilege,
                         max_new_tokens=max_new_tokens, name=name)
