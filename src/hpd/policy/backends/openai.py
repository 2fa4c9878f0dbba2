"""OpenAI-compatible backend (API teachers, judges, our own ``hpd serve``, a vLLM server) over httpx.

* :meth:`OpenAIPolicy.act` (Pi-level, what rollouts and teachers use): ``POST {base_url}/chat/completions``
  with the messages and tools Pi's openai-completions provider would send
  (:func:`hpd.policy.chat.pi_to_openai`, :func:`hpd.policy.chat.openai_tools`), then the response is
  read the way that provider reads it (:func:`message_from_choice` = :func:`hpd.harness.wire.from_chat_completion`:
  content -> text, reasoning fields -> thinking, ``tool_calls`` -> toolCall blocks through Pi 1.6's
  ``parseToolCallArguments``, Pi's ``finish_reason`` and usage mapping). An HTTP or transport failure
  becomes an ``error`` assistant message (Pi's StreamFn contract: never throw), not an exception.
* :meth:`OpenAIPolicy.generate` (text-level, the common ``Policy`` interface): ``POST {base_url}/completions``
  with the rendered prompt (vLLM and ``hpd serve`` support it; chat-only APIs do not). ``token_ids``
  are not returned by that API, so they are ``[]``.
* Requests for several contexts run concurrently (``max_concurrency`` threads). Sampling defaults are
  full vocabulary: ``top_p=1.0`` is sent, and ``top_k`` is sent as a vLLM/hpd extension only when > 0
  (OpenAI's API has no ``top_k``; ``-1``/``0`` mean off on vLLM).
"""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Sequence

from hpd.harness import wire
from hpd.harness.messages import assistant_message
from hpd.policy import chat
from hpd.policy.backends.base import Candidate, Generation, Policy, seeds_for

def message_from_choice(choice: dict, *, model: str = "openai", provider: str = "openai-compatible",
                        usage: dict | None = None) -> dict:
    """One chat-completion ``choice`` -> Pi assistant message, as Pi's openai-completions provider builds it
    (:func:`hpd.harness.wire.from_chat_completion`, owned by the harness)."""
    resp: dict = {"choices": [{**(choice or {}), "index": 0}]}
    if usage is not None:
        resp["usage"] = usage
    return wire.from_chat_completion(resp, model=model, provider=provider)


class OpenAIPolicy(Policy):
    """``Policy`` over an OpenAI-compatible HTTP endpoint (see module doc)."""

    def __init__(self, base_url: str, model: str = "hpd", *, api_key: str | None = None, timeout: float = 120.0,
                 max_concurrency: int = 8, tokenizer: Any = None, extra_body: dict | None = None,
                 transport: Any = None):
        import httpx

        self.base_url = base_url.rstrip("/")
        self.model = model
        self.name = model
        self.tokenizer = tokenizer
        self.max_concurrency = max(1, int(max_concurrency))
        self.extra_body = dict(extra_body or {})
        key = api_key if api_key is not None else os.environ.get("OPENAI_API_KEY")
        headers = {"Authorization": f"Bearer {key}"} if key else {}
        self.client = httpx.Client(base_url=self.base_url, headers=headers, timeout=timeout, transport=transport)

    def close(self) -> None:
        self.client.close()

    def _sampling(self, *, n: int, temperature: float, top_k: int, top_p: float, max_new_tokens: int,
                  seed: int | None) -> dict:
        body: dict = {"model": self.model, "n": n, "temperature": float(temperature), "top_p": float(top_p),
                      "max_tokens": int(max_new_tokens)}
        if top_k and top_k > 0:
            body["top_k"] = int(top_k)
        if seed is not None:
            body["seed"] = int(seed)
        body.update(self.extra_body)
        return body

    def _map(self, fn, items: list) -> list:
        if len(items) <= 1 or self.max_concurrency == 1:
            return [fn(x) for x in items]
        with ThreadPoolExecutor(max_workers=min(self.max_concurrency, len(items))) as ex:
            return list(ex.map(fn, items))

    # ------------------------------------------------------------------ text level
    def generate(self, prompts: list[str], n: int = 1, temperature: float = 1.0, top_k: int = 0,
                 top_p: float = 1.0, max_new_tokens: int = 256, seed: int | Sequence[int] | None = None,
                 logprobs: bool = False) -> list[list[Generation]]:
        seeds = seeds_for(seed, len(prompts))

        def one(args):
            prompt, s = args
            body = {**self._sampling(n=n, temperature=temperature, top_k=top_k, top_p=top_p,
                                     max_new_tokens=max_new_tokens, seed=s), "prompt": prompt}
            if logprobs:
                body["logprobs"] = 0
            r = self.client.post("/completions", json=body)
            r.raise_for_status()
            gens = []
            for c in sorted(r.json().get("choices", []), key=lambda c: c.get("index", 0)):
                lp = ((c.get("logprobs") or {}).get("token_logprobs")) if logprobs else None
                gens.append(Generation(text=c.get("text", ""), token_ids=[], logprobs=lp,
                                       finish_reason="length" if c.get("finish_reason") == "length" else "stop"))
            return gens

        return self._map(one, list(zip(prompts, seeds)))

    # ------------------------------------------------------------------ Pi level
    def chat_request(self, ctx: dict, *, document: str | None = None, enable_thinking: bool = False) -> dict:
        """The request body Pi's provider would send for ``ctx`` (+ the I-view document, if any)."""
        messages = chat.pi_to_openai(ctx)
        if document is not None:
            messages = chat.inject_document(messages, document)
        body: dict = {"messages": messages}
        tools = chat.openai_tools(ctx.get("tools"))
        if tools:
            body["tools"] = tools
        if enable_thinking:
            body["chat_template_kwargs"] = {"enable_thinking": True}
        return body

    def act(self, contexts: list[dict], n: int = 1, *, documents: Sequence[str | None] | None = None,
            enable_thinking: bool = False, id_prefixes: Sequence[str] | None = None, temperature: float = 1.0,
            top_k: int = 0, top_p: float = 1.0, max_new_tokens: int = 256,
            seed: int | Sequence[int] | None = None, logprobs: bool = False) -> list[list[Candidate]]:
        docs = list(documents) if documents is not None else [None] * len(contexts)
        seeds = seeds_for(seed, len(contexts))

        def one(args):
            ctx, doc, s = args
            body = {**self.chat_request(ctx, document=doc, enable_thinking=enable_thinking),
                    **self._sampling(n=n, temperature=temperature, top_k=top_k, top_p=top_p,
                                     max_new_tokens=max_new_tokens, seed=s)}
            try:
                r = self.client.post("/chat/completions", json=body)
                r.raise_for_status()
                data = r.json()
            except Exception as exc:  # Pi: a failed request is an error message, never a throw
                err = assistant_message([], "error", error_message=f"{type(exc).__name__}: {exc}", model=self.model,
                                        provider="openai-compatible")
                return [Candidate(message=err, generation=Generation(text="", finish_reason="stop"))
                        for _ in range(n)]
            out = []
            for c in sorted(data.get("choices", []), key=lambda c: c.get("index", 0)):
                msg = message_from_choice(c, model=self.model, usage=data.get("usage"))
                text = (c.get("message") or {}).get("content") or ""
                out.append(Candidate(message=msg, generation=Generation(
                    text=text, finish_reason="length" if c.get("finish_reason") == "length" else "stop")))
            return out

        return self._map(one, list(zip(contexts, docs, seeds)))
