"""``hpd export``: a merged Hugging Face model folder (safetensors) with the adapter copied beside it
(:mod:`hpd.export.merge`) and a generated Hugging Face model card ``README.md`` (:mod:`hpd.export.card`)."""

from hpd.export.card import ExportError, model_card
from hpd.export.merge import export_model

__all__ = ["ExportError", "export_model", "model_card"]
