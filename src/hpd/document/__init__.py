"""ControlDocuments: compile (AutoProbe), render, parse, score, inject.

- :class:`ControlDocument` (:mod:`.model`): the typed, versioned record; privilege levels
  ``runtime`` / ``plan`` / ``oracle``.
- :func:`compile` / :func:`compile_all` (:mod:`.compile`): from a Boundary + a harness fork there.
- :func:`render` / :func:`parse` / :func:`parse_fields`: the one text form and its exact inverse.
- :func:`token_length`: exact with a tokenizer, else a deterministic estimate.
- :func:`score_fields`: field-by-field R-view scoring.
- :func:`inject`: the I-view placement at the Pi-context level (the tokenised path is
  ``hpd.policy.chat.render_prompt(document=...)``).
"""

from .compile import compile, compile_all, document_entry, probe  # noqa: A004
from .inject import inject
from .model import DOC_VERSION, PRIVILEGES, ControlDocument
from .parse import DocumentParseError, parse, parse_fields
from .render import render
from .score import field_accuracy, score_fields
from .tokens import estimate_tokens, token_length

# ``from hpd.document import parse`` gives the function; callers that then write ``parse.parse(text)``
# (treating it as the submodule) get the same function.
parse.parse = parse  # type: ignore[attr-defined]
parse.parse_fields = parse_fields  # type: ignore[attr-defined]

__all__ = [
    "DOC_VERSION", "PRIVILEGES", "ControlDocument", "DocumentParseError", "compile", "compile_all",
    "document_entry", "estimate_tokens", "field_accuracy", "inject", "parse", "parse_fields", "probe",
    "render", "score_fields", "token_length",
]
