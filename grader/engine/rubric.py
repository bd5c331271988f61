"""Rubrics: one YAML per lesson, validated against rubrics/rubric.schema.json at load."""
from __future__ import annotations

import hashlib
import json
import math
import re
from dataclasses import dataclass, field
from pathlib import Path

from grader.engine.layout import read_yaml
from grader.engine.errors import InputError
from grader.engine.memo import remember
from reference import yaml_words


@dataclass(frozen=True)
class Credit:
    """How a check's measure (0..1) becomes a share of the points."""
    rule: str                 # all_or_nothing | linear
    floor: float = 0.0
    target: float = 1.0

    def share(self, measure: float) -> float:
        if self.rule == "all_or_nothing" or self.target <= self.floor:
            return 1.0 if measure >= self.target else 0.0
        if measure <= self.floor:
            return 0.0
        return min(1.0, (measure - self.floor) / (self.target - self.floor))


@dataclass(frozen=True)
class Criterion:
    id: str
    title: str
    points: float
    check: str
    visibility: str           # public | hidden | both
    credit: Credit
    params: dict = field(default_factory=dict)

    def runs_in(self, mode: str) -> bool:
        """``check`` runs public cases only; ``grade`` runs everything."""
        return mode == "grade" or self.visibility != "hidden"


@dataclass(frozen=True)
class Rubric:
    lesson: str
    title: str
    version: int
    criteria: tuple[Criterion, ...]
    path: str


def _schema_error(rubrics_dir: Path, data) -> tuple | None:
    """(place, message) of the schema error that best explains what is wrong, or None.

    That the data is valid is remembered (grader.engine.memo), a pure function of the
    schema and the data: a check after the first reads it back and never imports
    jsonschema, whose format checkers cost about 0.15 s to import. The key is the schema's
    text and the data's repr, which tells 1 from "1" and keeps every YAML type apart. An
    error is worked out afresh each time (its place may hold any YAML value)."""
    text = (rubrics_dir / "rubric.schema.json").read_text(encoding="utf-8")

    def best():
        import jsonschema
        return jsonschema.exceptions.best_match(
            jsonschema.Draft202012Validator(json.loads(text)).iter_errors(data))
    key = hashlib.sha256(f"{text}\0{data!r}".encode()).hexdigest()
    if remember("rubric-valid", key, lambda: best() is None):
        return None
    error = best()
    return None if error is None else yaml_words.explain(error)


def _non_finite(node, path=()):
    """The path (keys and indexes) of the first NaN or infinity in the data, or None."""
    if isinstance(node, float) and not math.isfinite(node):
        return list(path)
    if isinstance(node, dict):
        children = node.items()
    else:
        children = enumerate(node) if isinstance(node, list) else ()
    for key, value in children:
        found = _non_finite(value, (*path, key))
        if found is not None:
            return found
    return None


def _check_params(criterion: dict, declared: dict, bad) -> None:
    """The criterion's params against those its check declares (grader.engine.checks.check)."""
    for key, value in (criterion.get("params") or {}).items():
        if key not in declared:
            known = f"known: {', '.join(sorted(declared))}" if declared else "it takes none"
            raise bad(key, f"{criterion['check']} has no parameter {yaml_words.short(key)} ({known})")
        low, high = declared[key]
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not low <= value <= high:
            raise bad(key, f"expected a number from {low} to {high}; got {yaml_words.got(value)}")


def load_rubric(path: Path, known_checks=None) -> Rubric:
    """Load and validate; any problem is an InputError naming the file, the line and the
    place inside it."""
    where = str(path)
    data = read_yaml(path)

    def bad(parts, message) -> InputError:
        line = yaml_words.line_of(Path(path).read_text(encoding="utf-8"), parts)
        return InputError(where, f"{f'line {line}: ' if line else ''}{yaml_words.dotted(parts)}: {message}")

    error = _schema_error(path.parent, data)
    if error is not None:
        raise bad(*error)
    nan = _non_finite(data)
    if nan is not None:       # JSON Schema bounds let NaN through: every comparison is false
        raise bad(nan, "must be a finite number")
    stem = Path(path).stem
    if data["lesson"] != stem and re.fullmatch(r"lesson[0-9]+", stem):
        # A rubric copied from another lesson's: its error rows and its version check would
        # go to that lesson in the gradebook.
        raise bad(["lesson"], f"expected {stem!r}, this file's lesson; got {data['lesson']!r}")
    criteria = []
    seen = set()
    for i, c in enumerate(data["criteria"]):
        if c["id"] in seen:
            raise bad(["criteria", i, "id"], f"duplicate criterion id {c['id']!r}")
        seen.add(c["id"])
        if known_checks is not None and c["check"] not in known_checks:
            raise bad(["criteria", i, "check"], f"unknown check {c['check']!r}")
        if isinstance(known_checks, dict):
            _check_params(c, getattr(known_checks[c["check"]], "params", {}),
                          lambda key, message: bad(["criteria", i, "params", key], message))
        credit = Credit(**c["credit"])
        if credit.rule == "linear" and credit.floor >= credit.target:
            raise bad(["criteria", i, "credit"], "floor must be below target")
        criteria.append(Criterion(id=c["id"], title=c["title"], points=float(c["points"]),
                                  check=c["check"], visibility=c["visibility"], credit=credit,
                                  params=dict(c.get("params") or {})))
    return Rubric(lesson=data["lesson"], title=data["title"], version=data["version"],
                  criteria=tuple(criteria), path=where)
