"""A lesson's reference solution as an oracle: called when present, replayed when not.

In the course, ``reference_oracle("lesson1").pages_for(17, 16)`` calls the reference
solution. The learner edition (``grader release``) ships no reference solutions; there
the same call answers from ``grader/expectations/lesson1.json``, the oracle's answers
to the public cases, recorded when the release was built. So a lesson module that asks
its oracle through this object runs unchanged in both editions.

Keys are a digest of (function, arguments); values are stored as tagged JSON (shapes
by class name, tuples as lists) and come back as the same frozen values.
"""
from __future__ import annotations

import json
from contextlib import contextmanager
from importlib import import_module
from importlib.util import find_spec
from pathlib import Path
from typing import Any, Iterator

from grader.engine.cases import digest_of
from grader.engine.sandbox.session import encode_arg
from reference import shapes

EXPECTATIONS = Path(__file__).resolve().parent.parent / "expectations"

_recording: dict[str, dict[str, Any]] | None = None
_as_released = False


def reference_policies() -> bool:
    """Whether worker runs with the reference's decisions can happen here: in the course,
    yes; in the learner edition (no reference solutions), no, and nor while recording
    the learner edition's expectations (see as_in_the_learner_edition)."""
    return not _as_released and find_spec("reference.solutions") is not None


class OracleMissing(RuntimeError):
    """The learner edition was asked something its recorded expectations do not hold."""


def _key(function: str, args: tuple, kwargs: dict) -> str:
    return digest_of([function, list(args), sorted(kwargs.items())])


def _decode(value):
    if isinstance(value, list):
        return tuple(_decode(v) for v in value)
    if isinstance(value, dict):
        fields = {k: _decode(v) for k, v in value.items() if k != "__type__"}
        if "__type__" in value:
            return getattr(shapes, value["__type__"])(**fields)
        return fields
    return value


class Oracle:
    def __init__(self, lesson: str):
        self.lesson = lesson
        self._module = None
        self._table: dict[str, Any] | None = None

    def _load(self):
        if self._module is None and self._table is None:
            try:
                self._module = import_module(f"reference.solutions.{self.lesson}")
            except ModuleNotFoundError as e:
                if not (e.name or "").startswith("reference.solutions"):
                    raise
                path = EXPECTATIONS / f"{self.lesson}.json"
                try:
                    self._table = json.loads(path.read_text(encoding="utf-8"))
                except FileNotFoundError:
                    raise OracleMissing(f"{self.lesson}: neither the reference solution nor "
                                        f"{path} is here") from None

    def __getattr__(self, function: str):
        if function.startswith("_"):
            raise AttributeError(function)
        self._load()
        if self._module is not None:
            fn = getattr(self._module, function)

            def call(*args, **kwargs):
                value = fn(*args, **kwargs)
                if _recording is not None:
                    _recording.setdefault(self.lesson, {})[_key(function, args, kwargs)] = encode_arg(value)
                return value
            setattr(self, function, call)       # found by plain lookup from now on
            return call

        table = self._table

        def replay(*args, **kwargs):
            key = _key(function, args, kwargs)
            if key not in table:
                raise OracleMissing(
                    f"{self.lesson}: the learner edition has no expected answer for "
                    f"{function}{args!r}: only public cases are precomputed")
            return _decode(table[key])
        setattr(self, function, replay)
        return replay


def reference_oracle(lesson: str) -> Oracle:
    return Oracle(lesson)


@contextmanager
def recording() -> Iterator[dict[str, dict[str, Any]]]:
    """Record every oracle answer given inside the block: {lesson: {key: tagged value}}."""
    global _recording
    previous, _recording = _recording, {}
    try:
        yield _recording
    finally:
        _recording = previous


@contextmanager
def as_in_the_learner_edition() -> Iterator[None]:
    """Inside the block, lessons build the cases the learner edition will have (no worker
    runs), while the oracle still answers from the reference: what release records."""
    global _as_released
    previous, _as_released = _as_released, True
    try:
        yield
    finally:
        _as_released = previous
