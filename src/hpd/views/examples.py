"""The view-agnostic tokenized training example.

A :class:`ViewExample` is what the trainer consumes: the token ids of a prompt and of a completion,
tagged with the view it belongs to. Loss falls only on ``completion_ids`` (the target action for the
T and I views, the control document for the R view); the prompt is context only.
"""

from __future__ import annotations

from dataclasses import dataclass, field

VIEWS = ("T", "I", "R")
VIEW_NAMES = {
    "T": "harness-replay / native: native context -> target action",
    "I": "injected: native context + control document -> target action",
    "R": "runtime reconstruction: native context + instruction -> control document",
}


@dataclass(frozen=True)
class ViewExample:
    """One tokenized example of one view.

    ``view`` is "T", "I" or "R"; ``uid`` names the boundary record it came from; ``trimmed`` is the
    number of tool outputs the length policy replaced by a marker to make it fit (0 = untouched).
    """

    view: str
    prompt_ids: tuple[int, ...]
    completion_ids: tuple[int, ...]
    uid: str = ""
    trimmed: int = 0
    meta: dict = field(default_factory=dict, compare=False, hash=False)

    def __post_init__(self) -> None:
        if self.view not in VIEWS:
            raise ValueError(f"view must be one of {VIEWS}, got {self.view!r}")
        if not self.prompt_ids or not self.completion_ids:
            raise ValueError(f"example {self.uid!r} ({self.view}) has an empty prompt or completion")

    @property
    def n_tokens(self) -> int:
        return len(self.prompt_ids) + len(self.completion_ids)

    @property
    def input_ids(self) -> list[int]:
        return list(self.prompt_ids) + list(self.completion_ids)

    def labels(self, ignore_index: int = -100) -> list[int]:
        """Labels aligned with :attr:`input_ids`: prompt positions are ``ignore_index``."""
        return [ignore_index] * len(self.prompt_ids) + list(self.completion_ids)

    def to_dict(self) -> dict:
        return {"view": self.view, "uid": self.uid, "trimmed": self.trimmed,
                "prompt_ids": list(self.prompt_ids), "completion_ids": list(self.completion_ids)}

    @classmethod
    def from_dict(cls, d: dict) -> "ViewExample":
        return cls(view=d["view"], prompt_ids=tuple(d["prompt_ids"]), completion_ids=tuple(d["completion_ids"]),
                   uid=d.get("uid", ""), trimmed=int(d.get("trimmed", 0)))
