"""ControlDocuments: compile (AutoProbe), render, parse, score.

- :class:`ControlDocument` (:mod:`.schema`): the typed, versioned record; privilege levels
  ``runtime`` / ``plan`` / ``oracle``.
- :func:`compile` / :func:`compile_all` (:mod:`.compile`): from a Boundary + a harness fork there.
- :func:`render` / :func:`parse` / :func:`parse_fields`: the one text form and its exact inverse.
- :func:`token_length`: exact with a tokenizer, else a deterministic estimate.
- :func:`score_fields`: field-by-field R-view scoring.

Where a document enters the model's context (the I view) is decided in one place,
``hpd.policy.chat.render_prompt(document=...)`` / ``hpd.policy.chat.inject_document``.
"""

from .compile import compile, compile_all, document_entry, probe  # noqa: A004
from .schema import DOC_VERSION, PRIVILEGES, ControlDocument
from .parse import DocumentParseError, parse, parse_fields
from .render import render
from .score import field_accuracy, score_fields
from .tokens import estimate_tokens, token_length

__all__ = [
    "DOC_VERSION", "PRIVILEGES", "ControlDocument", "DocumentParseError", "compile", "compile_all",
    "document_entry", "estimate_tokens", "field_accuracy", "parse", "parse_fields", "probe",
    "render", "score_fields", "token_length",
]
