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

Concurrency: requests are checked and rendered in worker threads and batched through ONE engine
(:class:`hpd.serve.engine.BatchEngine`): concurrent requests with the same sampling settings go through one
``policy.generate`` call (the hf backend decodes them together over one padded cache). A request that
arrives while a batch runs waits for the next batch (no joining mid-generation: the departure from vLLM's
continuous batching). ``benchmarks/serve.py`` measures it against one-at-a-time serving.

Limits and bad input (:mod:`hpd.serve.request`): every problem answers a 4xx with one OpenAI-shaped line
(``{"error": {"message", "type"}}``), never a 500: a body over ``max_body_bytes`` (default 8 MiB) is a 413;
malformed JSON, an unknown field, a field hpd cannot honour at a non-neutral value, a malformed message
or tool, a bad tool schema, ``max_tokens`` over ``max_tokens_limit`` (default: the model's context window)
or a prompt over ``max_prompt_tokens`` (default: the window minus one) is a 400; a missing or wrong
``Authorization: Bearer`` key (when the server has ``api_key``) is a 401 on ``/v1/*`` (``/health`` stays
open). ``max_tokens`` within the limit but over ``max_tokens_cap`` is clamped to the cap (Pi asks for
``min(model.maxTokens, 32000)`` unless configured). A 500 means a server fault (the engine raised); the
server keeps running.

Sampling: ``temperature`` (default 1.0), ``top_p`` (default 1.0), ``top_k`` (vLLM extension; default 0
= off), ``n``, ``seed``, ``max_tokens``/``max_completion_tokens`` (see limits), ``logprobs``
(sampled-token logprobs; ``logprobs: 0`` on ``/v1/completions``).
``app.state.requests`` keeps the last ``record`` requests' prompt text, prompt ids and completion ids
(tests compare them with the training ids).
"""

from __future__ import annotations

import hmac
import itertools
import json
import threading
import time
from collections import deque
from typing import Any

from fastapi import Request  # module level: FastAPI resolves the string annotations against module globals

from hpd.policy import chat
from hpd.policy.backends.base import Policy
from hpd.serve import request as checks
from hpd.serve.engine import BatchEngine
from hpd.serve.request import BadRequest

MAX_BODY_BYTES = 8 * 2 ** 20


class TooLarge(BadRequest):
    """A request body over the server's limit (HTTP 413)."""


class Server:
    """The request handling behind the FastAPI app (usable without HTTP in tests).

    Limits: ``max_tokens_cap`` clamps a request's ``max_tokens`` (module doc); ``max_tokens_limit`` (default:
    the policy's context window) and ``max_prompt_tokens`` (default: the context window minus one) answer
    400 when exceeded. ``max_batch``/``max_wait_s`` go to :class:`hpd.serve.engine.BatchEngine`.
    """

    def __init__(self, policy: Policy, *, model_name: str = "hpd", enable_thinking: bool = False,
                 max_tokens_cap: int = 1024, default_max_tokens: int = 512, record: int = 64,
                 max_tokens_limit: int | None = None, max_prompt_tokens: int | None = None,
                 max_batch: int = 64, max_wait_s: float = 0.05):
        self.policy = policy
        self.tokenizer = policy.tokenizer
        self.model_name = model_name
        self.enable_thinking = enable_thinking
        self.max_tokens_cap = int(max_tokens_cap)
        self.default_max_tokens = int(default_max_tokens)
        window = getattr(policy, "context_window", None)
        self.max_tokens_limit = max_tokens_limit if max_tokens_limit is not None else window
        self.max_prompt_tokens = max_prompt_tokens if max_prompt_tokens is not None else (
            window - 1 if window else None)
        self.engine = BatchEngine(policy, max_batch=max_batch, max_wait_s=max_wait_s)
        self.counter = itertools.count()
        self.requests: deque = deque(maxlen=max(0, int(record)))

    def close(self) -> None:
        self.engine.close()

    # ------------------------------------------------------------------ sampling
    def _sampling(self, body: dict) -> dict:
        return checks.sampling(body, default_max_tokens=self.default_max_tokens, max_tokens_cap=self.max_tokens_cap,
                               max_tokens_limit=self.max_tokens_limit)

    def _prompt_ids(self, prompt: str, where: str) -> list[int]:
        ids = self.tokenizer(prompt, add_special_tokens=False)["input_ids"]
        if self.max_prompt_tokens is not None and len(ids) > self.max_prompt_tokens:
            raise BadRequest(f"{where} is {len(ids)} tokens; this server accepts at most {self.max_prompt_tokens} "
                             f"prompt tokens (the model's context window is {self.max_tokens_limit or '?'})")
        return list(ids)

    def _generate(self, prompts: list[str], sampling: dict):
        """The policy's generations, batched with concurrent requests; an engine refusal
        (``finish_reason="error"``, e.g. a prompt that fills the model's context window) is a 400, as vLLM
        answers it."""
        gens = self.engine.generate(prompts, sampling)
        for per in gens:
            for g in per:
                if getattr(g, "finish_reason", None) == "error":
                    raise BadRequest(getattr(g, "error", None) or "generation failed")
        return gens

    def _render(self, body: dict) -> str:
        try:
            return chat.render_chat_request(self.tokenizer, body, enable_thinking=self.enable_thinking)
        except Exception as exc:  # the chat template refused these messages (e.g. roles out of order)
            raise BadRequest(f"the chat template cannot render these messages: {type(exc).__name__}: "
                             f"{str(exc).splitlines()[0] if str(exc) else ''}") from exc

    # ------------------------------------------------------------------ chat
    def chat_completion(self, body: Any) -> dict:
        with self.engine.preparing():
            body = checks.check_chat(body)
            sampling = self._sampling(body)
            prompt = self._render(body)
            prompt_ids = self._prompt_ids(prompt, "the prompt")
        k = next(self.counter)
        gens = self._generate([prompt], sampling)[0]
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
    def completion(self, body: Any) -> dict:
        with self.engine.preparing():
            body, prompts = checks.check_completion(body)
            if body.get("stream"):
                raise BadRequest("'stream' is not supported on /v1/completions (use /v1/chat/completions)")
            sampling = self._sampling(body)
            n_in = sum(len(self._prompt_ids(p, f"prompt[{i}]")) for i, p in enumerate(prompts))
        k = next(self.counter)
        gens = self._generate(prompts, sampling)
        choices, n_out = [], 0
        for pi, per in enumerate(gens):
            for j, g in enumerate(per):
                n_out += len(g.token_ids)
                lp = {"token_logprobs": g.logprobs} if sampling["logprobs"] and g.logprobs is not None else None
                choices.append({"index": pi * sampling["n"] + j, "text": g.text, "logprobs": lp,
                                "finish_reason": "length" if g.finish_reason == "length" else "stop"})
        return {"id": f"cmpl-{k}", "object": "text_completion", "created": int(time.time()),
                "model": body.get("model") or self.model_name, "choices": choices,
                "usage": {"prompt_tokens": n_in, "completion_tokens": n_out, "total_tokens": n_in + n_out}}


def create_app(policy: Policy, *, api_key: str | None = None, max_body_bytes: int = MAX_BODY_BYTES,
               max_concurrency: int = 256, **server_kwargs: Any):
    """The FastAPI app around :class:`Server` (``app.state.server``; ``app.state.requests`` = its log).

    ``api_key``: ``/v1/*`` answers 401 unless ``Authorization: Bearer <api_key>`` (``/health`` stays open).
    ``max_body_bytes``: a larger body answers 413. ``max_concurrency``: requests checked, rendered and
    waiting for the engine at once (more wait for a slot).
    """
    import anyio
    from anyio import to_thread
    from fastapi import FastAPI
    from fastapi.responses import JSONResponse, StreamingResponse

    server = Server(policy, **server_kwargs)
    app = FastAPI(title="hpd serve", version=_version())
    app.state.server = server
    app.state.requests = server.requests
    limiter = anyio.CapacityLimiter(max(1, int(max_concurrency)))

    def error(status: int, message: str, kind: str = "invalid_request_error") -> JSONResponse:
        return JSONResponse(status_code=status, content={"error": {"message": message, "type": kind}})

    def unauthorized(request: Request) -> JSONResponse | None:
        if api_key is None:
            return None
        given = request.headers.get("authorization", "")
        if hmac.compare_digest(given.encode(), f"Bearer {api_key}".encode()):
            return None
        return error(401, "missing or wrong API key (send the header 'Authorization: Bearer <key>')",
                     "authentication_error")

    async def read_json(request: Request) -> Any:
        size = request.headers.get("content-length")
        if size is not None and size.isdigit() and int(size) > max_body_bytes:
            raise TooLarge(f"request body is {size} bytes; this server accepts at most {max_body_bytes}")
        data = bytearray()
        async for piece in request.stream():
            data += piece
            if len(data) > max_body_bytes:
                raise TooLarge(f"request body is over {max_body_bytes} bytes, this server's limit")
        try:
            return json.loads(bytes(data))
        except ValueError as exc:
            raise BadRequest(f"request body is not JSON: {exc}") from exc

    async def handle(request: Request, fn):
        """``fn(body)`` off the event loop; a bad request is a 4xx, anything else a 500 (never a crash)."""
        denied = unauthorized(request)
        if denied is not None:
            return denied, None
        try:
            body = await read_json(request)
            return await to_thread.run_sync(fn, body, limiter=limiter), body
        except TooLarge as exc:
            return error(413, str(exc)), None
        except BadRequest as exc:
            return error(400, str(exc)), None
        except Exception as exc:  # a server fault: surfaced to the client, the server keeps running
            return error(500, f"{type(exc).__name__}: {exc}", "server_error"), None

    @app.get("/health")
    def health() -> dict:
        return {"status": "ok", "model": server.model_name, **server.engine.stats()}

    @app.get("/v1/models")
    def models(request: Request):
        denied = unauthorized(request)
        if denied is not None:
            return denied
        return {"object": "list", "data": [{"id": server.model_name, "object": "model", "owned_by": "hpd",
                                            "max_model_len": server.max_tokens_limit}]}

    @app.post("/v1/chat/completions")
    async def chat_completions(request: Request):
        resp, body = await handle(request, server.chat_completion)
        if body is None or not body.get("stream"):
            return resp
        include_usage = bool((body.get("stream_options") or {}).get("include_usage"))

        def sse():
            for ch in server.stream_chunks(resp, include_usage=include_usage):
                yield f"data: {json.dumps(ch, ensure_ascii=False)}\n\n"
            yield "data: [DONE]\n\n"

        return StreamingResponse(sse(), media_type="text/event-stream")

    @app.post("/v1/completions")
    async def completions(request: Request):
        resp, _body = await handle(request, server.completion)
        return resp

    return app


def _version() -> str:
    from hpd import __version__

    return __version__


def run_server(policy: Policy, *, host: str = "127.0.0.1", port: int = 8000, **app_kwargs: Any) -> None:
    """Serve ``policy`` with uvicorn (blocking); ``app_kwargs`` go to :func:`create_app`."""
    import uvicorn

    app = create_app(policy, **app_kwargs)
    try:
        uvicorn.run(app, host=host, port=port, log_level="info")
    finally:
        app.state.server.close()


class BackgroundServer:
    """``hpd serve`` in a background thread on a free loopback port (tests, real-Pi rollouts).

    ``with BackgroundServer(policy) as srv: srv.base_url`` -> ``http://127.0.0.1:<port>/v1``;
    ``srv.app.state.requests`` is the request log.
    """

    def __init__(self, policy: Policy, *, host: str = "127.0.0.1", **app_kwargs: Any):
        import socket

        import uvicorn

        self.app = create_app(policy, **app_kwargs)
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
        self.app.state.server.close()
