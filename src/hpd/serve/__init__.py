"""``hpd serve``: an OpenAI-compatible ``/v1/chat/completions`` server over a local policy
(:mod:`hpd.serve.app`), using the same renderer/parser as training (:mod:`hpd.policy.chat`)."""

from hpd.serve.app import BackgroundServer, Server, create_app, run_server

__all__ = ["BackgroundServer", "Server", "create_app", "run_server"]
