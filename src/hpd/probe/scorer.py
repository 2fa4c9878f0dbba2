"""One model variant scoring boundaries: prompt and reference continuation rendered by THE renderer
(:class:`hpd.views.Renderer`, the tokens the model is trained on and served with), one forward pass per
boundary, the Figure 3 measures of :mod:`hpd.probe.measures`.

A forward pass over ``prompt + continuation`` keeps the logits of the last ``n + 1`` positions only
(``logits_to_keep``: a 150k-token vocabulary over an 8k-token prompt would need gigabytes); row ``j`` of
the log-softmax predicts continuation token ``j``, row 0 is the first assistant position. The opening's
log-probs come from the same pass when the continuation itself starts with the opening's first ``m - 1``
tokens (always when the opening is one token), else from a second pass over ``prompt + opening``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch

from hpd.views import Renderer

from .measures import boundary_measures, opening_ids


class ProbeError(ValueError):
    """A one-line problem with a probe's input (unloadable model or adapter, bad variant, no boundaries)."""


def reference_kind(message: dict) -> str:
    """``call`` when the reference message holds a tool call, else ``finish`` (it ends the run)."""
    content = message.get("content")
    blocks = content if isinstance(content, list) else []
    return "call" if any(b.get("type") == "toolCall" for b in blocks if isinstance(b, dict)) else "finish"


def load_variant(model_dir: str | Path, adapter: str | Path | None, *, device: str | None = None,
                 dtype: str = "auto") -> tuple[Any, Any]:
    """``(model, tokenizer)`` of the base model plus a PEFT adapter folder; a folder with a ``config.json``
    and no ``adapter_config.json`` is a whole fine-tuned model (``train/<name>/model`` of full fine-tuning)
    and replaces the base. Loaded through :class:`hpd.policy.backends.hf.HFPolicy` in ``dtype`` resolved for the
    device (:mod:`hpd.policy.dtype`)."""
    from hpd.policy.backends.hf import HFPolicy
    from hpd.policy.dtype import default_device, resolve_dtype_name

    path, peft = Path(model_dir), None
    if adapter is not None:
        a = Path(adapter)
        if (a / "adapter_config.json").is_file():
            peft = str(a)
        elif (a / "config.json").is_file():
            path = a
        else:
            raise ProbeError(f"{a}: neither a PEFT adapter (adapter_config.json) nor a model folder (config.json)")
    dev = device or default_device()
    try:
        pol = HFPolicy(str(path), adapter=peft, device=dev, dtype=resolve_dtype_name(dtype, dev))
    except Exception as e:  # noqa: BLE001 - unreadable folder, wrong architecture, ...
        raise ProbeError(f"cannot load {path}{' + ' + peft if peft else ''}: {str(e).splitlines()[0]}") from None
    return pol.model, pol.tokenizer


class BoundaryScorer:
    """The Figure 3 measures of boundaries under one model (module doc)."""

    def __init__(self, model: Any, tokenizer: Any, *, enable_thinking: bool = False):
        self.model = model.eval()
        self.device = next(model.parameters()).device
        self.renderer = Renderer(tokenizer, enable_thinking=enable_thinking)
        self.opening = opening_ids(tokenizer)

    @torch.no_grad()
    def rows(self, prompt_ids: list[int], cont_ids: list[int]) -> torch.Tensor:
        """``[len(cont_ids), vocab]`` log-softmax in float64 on the model's device; row j is the distribution
        that predicts ``cont_ids[j]``. (float32 log-probs sum to 1 only within ~1e-6, which made
        ``p_finish`` exceed 1 on SmolLM2.)"""
        ids = torch.tensor([list(prompt_ids) + list(cont_ids)], device=self.device)
        logits = self.model(input_ids=ids, use_cache=False, logits_to_keep=len(cont_ids) + 1).logits[0, :-1]
        return torch.log_softmax(logits.double(), dim=-1)

    def measure(self, boundary: Any) -> dict:
        """The measures of one :class:`hpd.boundary.Boundary` (its native context and reference action)."""
        prompt = self.renderer.prompt(boundary.context)
        p_ids, c_ids = self.renderer.encode(prompt, self.renderer.action(boundary.reference))
        rows = self.rows(p_ids, c_ids)
        m = len(self.opening)
        same_pass = len(c_ids) >= m and c_ids[:m - 1] == self.opening[:m - 1]
        orows = rows[:m] if same_pass else self.rows(p_ids, self.opening)
        pick = lambda r, ids: r.gather(1, torch.tensor(ids, device=r.device)[:, None])[:, 0].cpu()  # noqa: E731
        return {**boundary_measures(rows[0].cpu(), self.opening, pick(orows, self.opening), pick(rows, c_ids)),
                "n_prompt": len(p_ids)}
