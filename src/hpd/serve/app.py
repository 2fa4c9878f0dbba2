"""``hpd serve``: an OpenAI-compatible server for a local policy, using THE renderer and parser.

Endpoints: ``POST /v1/chat/completions`` (tools, ``tool_calls`` in responses, ``stream=true`` as
server-sent events like OpenAI's), ``POST /v1/completions`` (raw prompt text; what the ``openai``
backend's ``generate`` uses), ``GET /v1/models``, ``GET /health``.

Request -> prompt: :func:`hpd.policy.chat.render_chat_request` (the same normalisation + chat template
as training, so the ids equal the training ids for the same boundary). Thinking follows
``chat_template_kwargs.enable_thinking`` (Pi's ``qwen-chat-template`` format) or top-level
``enable_thinking`` (Pi's ``qwen`` format), else the server default.

Generation -> response: :func:`hpd.policy.chat.parse_completion`; ``message.content`` is the visible
text (``null`` when empty), ``message.reasoning_content`` the thinking, ``message.tool_calls[]`` one
entry per parsed call with ``function.arguments`` = the argument text the model wrote (re-serialised
when it parsed), so Pi's own argument parsing reaches the same ``argumentsError`` as ours.
``finish_reason``: ``length`` when ``max_tokens`` was hit, ``tool_calls`` when there are calls, else
``stop``. Tool-call ids are ``call_<request>_<choice>_<k>``.

Streaming (departure): the completion is generated first, then sent as OpenAI-shaped chunks (role,
reasoning, content in pieces, one chunk per tool call with its name + id followed by its arguments,
the finish chunk, the usage chunk when ``stream_options.include_usage``, ``data: [DONE]``). Clients
see the same protocol as with token streaming, just later.

Concurrency (departure): requests are served one at a time (a lock around generation); a batch of
episodes should go through :mod:`hpd.eval.rollout`, which batches in-process.

Sampling: ``temperature`` (default 1.0), ``top_p`` (default 1.0), ``top_k`` (vLLM extension; default 0
= off), ``n``, ``seed``, ``max_tokens``/``max_completion_tokens`` (capped at the server's
``max_tokens_cap``; Pi sends up to 32000 by default), ``logprobs`` (sampled-token logprobs).
``app.state.requests`` keeps the last ``record`` requests' prompt text, prompt ids and completion ids
(tests compare them with the training ids).
"""

from __future__ import annotations

import itertools
import json
import threading
import time
from collections import deque
from typing import Any

from fastapi import Request  # module level: FastAPI resolves the string annotations against module globals

from hpd.policy import chat
from hpd.policy.backends.base import Policy


class BadRequest(ValueError):
    """A request we reject with HTTP 400 (OpenAI error shape)."""


def _int(body: dict, *names: str, default: int | None = None) -> int | None:
    for n in names:
        v = body.get(n)
        if v is not None:
            if isinstance(v, bool) or not isinstance(v, (int, float)):
                raise BadRequest(f"'{n}' must be a number")
            return int(v)
    return default


def _float(body: dict, name: str, default: float) -> float:
    v = body.get(name)
    if v is None:
        return default
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        raise BadRequest(f"'{name}' must be a number")
    return float(v)


class Server:
    """The request handling behind the FastAPI app (usable without HTTP in tests)."""

    def __init__(self, policy: Policy, *, model_name: str = "hpd", enable_thinking: bool = False,
                 max_tokens_cap: int = 1024, default_max_tokens: int = 512, record: int = 64):
        self.policy = policy
        self.tokenizer = policy.tokenizer
        self.model_name = model_name
        self.enable_thinking = enable_thinking
        self.max_tokens_cap = int(max_tokens_cap)
        self.default_max_tokens = int(default_max_tokens)
        self.lock = threading.Lock()
        self.counter = itertools.count()
        self.requests: deque = deque(maxlen=max(0, int(record)))

    # ------------------------------------------------------------------ sampling
    def _sampling(self, body: dict) -> dict:
        n = _int(body, "n", default=1)
        if n is None or n < 1 or n > 64:
            raise BadRequest("'n' must be between 1 and 64")
        max_tokens = _int(body, "max_completion_tokens", "max_tokens", default=self.default_max_tokens)
        if max_tokens is None or max_tokens < 1:
            raise BadRequest("'max_tokens' must be >= 1")
        temperature = _float(body, "temperature", 1.0)
        if temperature < 0:
            raise BadRequest("'temperature' must be >= 0")
        top_p = _float(body, "top_p", 1.0)
        if not 0 < top_p <= 1:
            raise BadRequest("'top_p' must be in (0, 1]")
        top_k = _int(body, "top_k", default=0) or 0
        return {"n": n, "max_new_tokens": min(max_tokens, self.max_tokens_cap), "temperature": temperature,
                "top_p": top_p, "top_k": max(0, top_k), "seed": _int(body, "seed"),
                "logprobs": bool(body.get("logprobs"))}

    def _generate(self, prompts: list[str], sampling: dict):
        """The policy's generations; an engine refusal (``finish_reason="error"``, e.g. a prompt that
        fills the model's context window) is a 400, as vLLM answers it."""
        with self.lock:
            gens = self.policy.generate(prompts, **sampling)
        for per in gens:
            for g in per:
                if getattr(g, "finish_reason", None) == "error":
                    raise BadRequest(getattr(g, "error", None) or "generation failed")
        return gens

    # ------------------------------------------------------------------ chat
    def chat_completion(self, body: dict) -> dict:
        if not isinstance(body, dict):
            raise BadRequest("request body must be a JSON object")
        msgs = body.get("messages")
        if not isinstance(msgs, list) or not msgs:
            raise BadRequest("'messages' must be a non-empty list")
        if body.get("tools") is not None and not isinstance(body.get("tools"), list):
            raise BadRequest("'tools' must be a list")
        sampling = self._sampling(body)
        prompt = chat.render_chat_request(self.tokenizer, body, enable_thinking=self.enable_thinking)
        k = next(self.counter)
        gens = self._generate([prompt], sampling)[0]
        prompt_ids = self.tokenizer(prompt, add_special_tokens=False)["input_ids"]
        if self.requests.maxlen:
            self.requests.append({"prompt": prompt, "prompt_ids": list(prompt_ids),
                                  "completion_ids": [list(g.token_ids) for g in gens], "body": body})
        choices = []
        for i, g in enumerate(gens):
            parsed = chat.parse_completion(g.text)
            choice: dict = {"index": i, "message": chat.to_openai_message(parsed, id_prefix=f"call_{k}_{i}"),
                            "finish_reason": chat.finish_reason_for(parsed, g.finish_reason == "length"),
                            "logprobs": None}
            if sampling["logprobs"] and g.logprobs is not None:
                choice["logprobs"] = {"content": [
                    {"token": self.tokenizer.convert_ids_to_tokens(t), "logprob": lp}
                    for t, lp in zip(g.token_ids, g.logprobs)]}
            choices.append(choice)
        completion_tokens = sum(len(g.token_ids) for g in gens)
        return {
            "id": f"chatcmpl-{k}", "object": "chat.completion", "created": int(time.time()),
            "model": body.get("model") or self.model_name, "choices": choices,
            "usage": {"prompt_tokens": len(prompt_ids), "completion_tokens": completion_tokens,
                      "total_tokens": len(prompt_ids) + completion_tokens},
        }

    def stream_chunks(self, response: dict, *, include_usage: bool, piece: int = 16):
        """OpenAI ``chat.completion.chunk`` objects for a finished response (see module doc)."""
        base = {"id": response["id"], "object": "chat.completion.chunk", "created": response["created"],
                "model": response["model"]}

        def chunk(index: int, delta: dict, finish: str | None = None) -> dict:
            return {**base, "choices": [{"index": index, "delta": delta, "logprobs": None, "finish_reason": finish}]}

        for c in response["choices"]:
            i, m = c["index"], c["message"]
            yield chunk(i, {"role": "assistant", "content": ""})
            if m.get("reasoning_content"):
                r = m["reasoning_content"]
                for s in range(0, len(r), piece):
                    yield chunk(i, {"reasoning_content": r[s:s + piece]})
            text = m.get("content") or ""
            for s in range(0, len(text), piece):
                yield chunk(i, {"content": text[s:s + piece]})
            for k, tc in enumerate(m.get("tool_calls") or []):
                yield chunk(i, {"tool_calls": [{"index": k, "id": tc["id"], "type": "function",
                                                "function": {"name": tc["function"]["name"], "arguments": ""}}]})
                args = tc["function"]["arguments"]
                for s in range(0, len(args), piece):
                    yield chunk(i, {"tool_calls": [{"index": k, "function": {"arguments": args[s:s + piece]}}]})
            yield chunk(i, {}, c["finish_reason"])
        if include_usage:
            yield {**base, "choices": [], "usage": response["usage"]}

    # ------------------------------------------------------------------ text completions
    def completion(self, body: dict) -> dict:
        if not isinstance(body, dict):
            raise BadRequest("request body must be a JSON object")
        prompts = body.get("prompt")
        if isinstance(prompts, str):
            prompts = [prompts]
        if not isinstance(prompts, list) or not prompts or not all(isinstance(p, str) for p in prompts):
            raise BadRequest("'prompt' must be a string or a list of strings")
        sampling = self._sampling(body)
        k = next(self.counter)
        gens = self._generate(prompts, sampling)
        choices, n_out = [], 0
        for pi, per in enumerate(gens):
            for j, g in enumerate(per):
                n_out += len(g.token_ids)
                lp = {"token_logprobs": g.logprobs} if sampling["logprobs"] and g.logprobs is not None else None
                choices.append({"index": pi * sampling["n"] + j, "text": g.text, "logprobs": lp,
                                "finish_reason": "length" if g.finish_reason == "length" else "stop"})
        n_in = sum(len(self.tokenizer(p, add_special_tokens=False)["input_ids"]) for p in prompts)
        return {"id": f"cmpl-{k}", "object": "text_completion", "created": int(time.time()),
                "model": body.get("model") or self.model_name, "choices": choices,
                "usage": {"prompt_tokens": n_in, "completion_tokens": n_out, "total_tokens": n_in + n_out}}


def create_app(policy: Policy, **server_kwargs: Any):
    """The FastAPI app around :class:`Server` (``app.state.server``; ``app.state.requests`` = its log)."""
    from fastapi import FastAPI
    from fastapi.responses import JSONResponse, StreamingResponse

    server = Server(policy, **server_kwargs)
    app = FastAPI(title="hpd serve", version=_version())
    app.state.server = server
    app.state.requests = server.requests

    def error(status: int, message: str, kind: str = "invalid_request_error") -> JSONResponse:
        return JSONResponse(status_code=status, content={"error": {"message": message, "type": kind}})

    async def read_json(request: Request) -> Any:
        try:
            return json.loads(await request.body())
        except ValueError as exc:
            raise BadRequest(f"request body is not JSON: {exc}") from exc

    @app.get("/health")
    def health() -> dict:
        return {"status": "ok", "model": server.model_name}

    @app.get("/v1/models")
    def models() -> dict:
        return {"object": "list", "data": [{"id": server.model_name, "object": "model", "owned_by": "hpd"}]}

    @app.post("/v1/chat/completions")
    async def chat_completions(request: Request):
        try:
            body = await read_json(request)
            # generation is CPU/GPU-bound: run it off the event loop
            import anyio

            resp = await anyio.to_thread.run_sync(server.chat_completion, body)
        except BadRequest as exc:
            return error(400, str(exc))
        except Exception as exc:  # pragma: no cover - surfaced to the client, not a crash
            return error(500, f"{type(exc).__name__}: {exc}", "server_error")
        if not body.get("stream"):
            return resp
        include_usage = bool((body.get("stream_options") or {}).get("include_usage"))

        def sse():
            for ch in server.stream_chunks(resp, include_usage=include_usage):
                yield f"data: {json.dumps(ch, ensure_ascii=False)}\n\n"
            yield "data: [DONE]\n\n"

        return StreamingResponse(sse(), media_type="text/event-stream")

    @app.post("/v1/completions")
    async def completions(request: Request):
        try:
            body = await read_json(request)
            import anyio

            return await anyio.to_thread.run_sync(server.completion, body)
        except BadRequest as exc:
            return error(400, str(exc))
        except Exception as exc:  # pragma: no cover
            return error(500, f"{type(exc).__name__}: {exc}", "server_error")

    return app


def _version() -> str:
    from hpd import __version__

    return __version__


def run_server(policy: Policy, *, host: str = "127.0.0.1", port: int = 8000, **server_kwargs: Any) -> None:
    """Serve ``policy`` with uvicorn (blocking)."""
    import uvicorn

    uvicorn.run(create_app(policy, **server_kwargs), host=host, port=port, log_level="info")


class BackgroundServer:
    """``hpd serve`` in a background thread on a free loopback port (tests, real-Pi rollouts).

    ``with BackgroundServer(policy) as srv: srv.base_url`` -> ``http://127.0.0.1:<port>/v1``;
    ``srv.app.state.requests`` is the request log.
    """

    def __init__(self, policy: Policy, *, host: str = "127.0.0.1", **server_kwargs: Any):
        import socket

        import uvicorn

        self.app = create_app(policy, **server_kwargs)
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind((host, 0))
        self.port = self.sock.getsockname()[1]
        self.base_url = f"http://{host}:{self.port}/v1"
        self.server = uvicorn.Server(uvicorn.Config(self.app, log_level="warning", lifespan="off"))
        self.thread = threading.Thread(target=self.server.run, kwargs={"sockets": [self.sock]}, daemon=True)

    def __enter__(self) -> "BackgroundServer":
        self.thread.start()
        deadline = time.time() + 30
        while not self.server.started:
            if time.time() > deadline or not self.thread.is_alive():
                raise RuntimeError("hpd serve did not start")
            time.sleep(0.02)
        return self

    def __exit__(self, *exc: Any) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=10)
        self.sock.close()
