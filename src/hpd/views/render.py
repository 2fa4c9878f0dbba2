"""Adapter from the view builder to THE renderer (``hpd.policy.chat``).

Every view is rendered by the same module the policy is served with, so the tokens trained on are
the tokens seen at serving time. This adapter only binds a tokenizer and the thinking flag; it adds
no formatting of its own except the R view's fixed reconstruction instruction (see below).

R view (our choice, documented): the prompt is the native context plus ONE extra user message with
:data:`RECONSTRUCT_INSTRUCTION`, rendered with the same ``render_prompt``; the completion is the
control document rendered by ``render_text_completion`` (document text + end-of-turn). An explicit
instruction keeps the R prompt distinct from the T prompt (identical context, different target),
which otherwise would teach the model to emit a document where it should act.
The paper does not publish the exact R prompt; this wording is ours.
"""

from __future__ import annotations

from typing import Any

from hpd.policy import chat

RECONSTRUCT_INSTRUCTION = (
    "Reconstruct the control document for the current harness state: the contract, the tools that are "
    "executable now, what is pending, and whether the run may end. Write only the document."
)


def reconstruction_context(ctx: dict, instruction: str = RECONSTRUCT_INSTRUCTION) -> dict:
    """The R-view prompt context: ``ctx`` with one user message carrying the fixed instruction appended."""
    out = dict(ctx)
    out["messages"] = list(ctx.get("messages", [])) + [
        {"role": "user", "content": [{"type": "text", "text": instruction}], "timestamp": 0}
    ]
    return out


class Renderer:
    """Binds a tokenizer to the renderer module (default ``hpd.policy.chat``).

    ``module`` may be any object exposing ``render_prompt``, ``render_action``,
    ``render_text_completion`` and ``encode_example`` with the signatures in docs/data-contracts.md (tests
    substitute a stand-in through it).
    """

    def __init__(self, tokenizer: Any, *, enable_thinking: bool = False, module: Any = None,
                 instruction: str = RECONSTRUCT_INSTRUCTION) -> None:
        self.module = chat if module is None else module
        self.tokenizer = tokenizer
        self.enable_thinking = enable_thinking
        self.instruction = instruction

    def prompt(self, ctx: dict, document: str | None = None) -> str:
        return self.module.render_prompt(self.tokenizer, ctx, document=document, enable_thinking=self.enable_thinking)

    def action(self, msg: dict) -> str:
        return self.module.render_action(self.tokenizer, msg, enable_thinking=self.enable_thinking)

    def text_completion(self, text: str) -> str:
        return self.module.render_text_completion(self.tokenizer, text)

    def encode(self, prompt: str, completion: str) -> tuple[list[int], list[int]]:
        p, c = self.module.encode_example(self.tokenizer, prompt, completion)
        return list(p), list(c)

    def r_context(self, ctx: dict) -> dict:
        return reconstruction_context(ctx, self.instruction)
