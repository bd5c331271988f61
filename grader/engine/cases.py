"""Graded cases: the inputs a check probes, public by name, hidden by digest.

A hidden case is drawn from the instructor secret; its digest (sha256 of the canonical
JSON of its inputs) goes in every report, so a grade can be traced to exactly what was
graded without printing the case itself.
"""
from __future__ import annotations

import functools
import hashlib
import json
from dataclasses import dataclass, fields, is_dataclass
from functools import cached_property
from typing import Any

import numpy as np

from grader.engine.codec import persistent


def plain(value: Any) -> Any:
    """JSON-ready form of shapes, tuples and numpy values (the canonical form of a case)."""
    cls = type(value)
    if cls in _ATOMS:
        return value
    names = _field_names(cls)
    if names is not None:
        return {name: plain(getattr(value, name)) for name in names}
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    if isinstance(value, dict):
        return {str(k): plain(v) for k, v in value.items()}
    if isinstance(value, np.ndarray):
        return value.tolist()
    if isinstance(value, np.generic):
        return value.item()
    return value


# A case's run records hold tens of thousands of values, each canonicalized on its way to
# a digest: the common kinds are told by their exact type, a dataclass's fields once per class.
_ATOMS = frozenset({str, int, float, bool, type(None)})


@functools.lru_cache(maxsize=None)
def _field_names(cls: type) -> tuple[str, ...] | None:
    return tuple(f.name for f in fields(cls)) if is_dataclass(cls) else None


def digest_of(value: Any) -> str:
    text = json.dumps(plain(value), sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()[:16]


@persistent
@dataclass(frozen=True)
class Case:
    family: str          # which kind of probe or workload: "shapes", "contract", "heavy-load", ...
    name: str            # public cases: their name; hidden: family#index
    visibility: str      # public | hidden
    inputs: Any          # frozen values the check uses
    label: str = ""      # how feedback names the case to a learner

    def __post_init__(self):
        # Everything shown about a case branches on this: a misspelt one must not pass for
        # either kind.
        if self.visibility not in ("public", "hidden"):
            raise ValueError(f"case {self.name!r}: visibility must be public or hidden, not {self.visibility!r}")

    @cached_property
    def digest(self) -> str:
        # A scenario names itself by what determines its run, not by where its files lie.
        # Kept once computed (the inputs are frozen): checks and oracles key by it per
        # answer, and a canonical JSON and its hash cost more than the answer's own check.
        identity = getattr(self.inputs, "identity", None)
        return digest_of(identity() if identity else self.inputs)

    @property
    def cite(self) -> str:
        """How evidence names the case: public ones by name, hidden ones by digest only."""
        return self.name if self.visibility == "public" else f"hidden:{self.digest}"

    @property
    def where(self) -> str:
        """How a feedback sentence names the case: a hidden one by its label and digest."""
        return self.name if self.visibility == "public" else f"{self.label} ({self.digest})"

    def summary(self) -> dict:
        """How a report lists the case: public ones by name, hidden ones by digest."""
        if self.visibility == "public":
            return {"family": self.family, "name": self.name, "visibility": "public"}
        return {"family": self.family, "digest": self.digest, "visibility": "hidden"}
