"""Field-by-field scoring of a rendered document against the compiled one (R view).

``score_fields(pred_text, gold)`` parses the prediction leniently (:func:`hpd.document.parse.parse_fields`)
and returns, for every top-level field the gold record carries at its privilege level, whether the
predicted value equals the gold value (after normalising through the record's types). A field the
prediction lacks or that does not parse counts as wrong. ``field_accuracy`` is their mean.
"""

from __future__ import annotations

from .schema import ControlDocument
from .parse import parse_fields

#: Top-level fields compared per privilege level (version/privilege are checked too).
LEVEL_FIELDS = {
    "runtime": ["kind", "index", "turn", "execution", "turns_left", "tail", "tools", "last_batch", "unused",
                "calls_made", "errors_made", "end"],
}
LEVEL_FIELDS["plan"] = LEVEL_FIELDS["runtime"] + ["steps_left", "complete", "plan"]
LEVEL_FIELDS["oracle"] = LEVEL_FIELDS["plan"] + ["next_action"]


def score_fields(pred_text: str, gold: ControlDocument) -> dict[str, bool]:
    pred = parse_fields(pred_text)
    gd = gold.model_dump(mode="json")
    out = {"privilege": pred.get("privilege") == gold.privilege}
    for f in LEVEL_FIELDS[gold.privilege]:
        if f not in pred:
            out[f] = False
            continue
        try:
            norm = ControlDocument.model_validate({**gd, f: pred[f]}).model_dump(mode="json")[f]
        except Exception:
            out[f] = False
            continue
        out[f] = norm == gd[f]
    return out


def field_accuracy(pred_text: str, gold: ControlDocument) -> float:
    s = score_fields(pred_text, gold)
    return sum(s.values()) / len(s)
