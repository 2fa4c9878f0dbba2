"""Training views of a boundary (HPD section "three views").

* **T** native context -> target action; **I** native context + control document -> target action;
  **R** native context + fixed reconstruction instruction -> control document.
All three are rendered by the one renderer (``hpd.policy.chat``) through :class:`Renderer`; loss falls
only on completion tokens; over-long rows follow an explicit, counted length policy.
"""

from .build import TARGET_SOURCES, build_view, build_views
from .examples import VIEW_NAMES, VIEWS, ViewExample
from .length_policy import OMITTED_MARKER, POLICIES, LengthReport
from .records import RecordError, load_records, make_record, validate_record
from .render import RECONSTRUCT_INSTRUCTION, Renderer, reconstruction_context
from .synthetic import synthetic_records

__all__ = ["VIEWS", "VIEW_NAMES", "ViewExample", "Renderer", "RECONSTRUCT_INSTRUCTION", "reconstruction_context",
           "build_view", "build_views", "TARGET_SOURCES", "LengthReport", "POLICIES", "OMITTED_MARKER",
           "load_records", "make_record", "validate_record", "RecordError", "synthetic_records"]
