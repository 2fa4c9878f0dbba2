"""``hpd serve --model DIR [--adapter DIR] [--host H] [--port P]``: an OpenAI-compatible server."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer


def register(app: typer.Typer) -> None:
    @app.command("serve")
    def serve(
        model: Path = typer.Option(..., "--model", help="Local model directory (Hugging Face layout)."),
        adapter: Optional[Path] = typer.Option(None, "--adapter", help="PEFT LoRA adapter directory."),
        host: str = typer.Option("127.0.0.1", "--host"),
        port: int = typer.Option(8000, "--port"),
        backend: str = typer.Option("hf", "--backend", help="hf (transformers) or vllm (GPU)."),
        name: str = typer.Option("hpd", "--name", help="Model id reported by /v1/models."),
        max_tokens: int = typer.Option(1024, "--max-tokens", help="Cap on generated tokens per request."),
        enable_thinking: bool = typer.Option(False, "--enable-thinking/--no-thinking",
                                             help="Default thinking mode (requests may override)."),
    ) -> None:
        """Serve a local policy at /v1/chat/completions (tools, tool_calls, streaming)."""
        if not (model / "config.json").is_file():
            raise typer.BadParameter(f"{model} is not a model directory (no config.json)", param_hint="--model")
        if adapter is not None and not (adapter / "adapter_config.json").is_file():
            raise typer.BadParameter(f"{adapter} is not a PEFT adapter directory (no adapter_config.json)",
                                     param_hint="--adapter")
        if backend not in ("hf", "vllm"):
            raise typer.BadParameter("choose hf or vllm", param_hint="--backend")
        if not 0 < port < 65536:
            raise typer.BadParameter("port must be in 1..65535", param_hint="--port")
        from hpd.policy.backends import make_policy
        from hpd.serve.app import run_server

        try:
            policy = make_policy(backend, str(model), adapter=str(adapter) if adapter else None)
        except Exception as exc:  # e.g. vllm not installed
            typer.echo(f"error: could not load the {backend} backend: {exc}", err=True)
            raise typer.Exit(2)
        run_server(policy, host=host, port=port, model_name=name, max_tokens_cap=max_tokens,
                   default_max_tokens=min(512, max_tokens), enable_thinking=enable_thinking)
