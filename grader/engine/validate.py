"""Trusted conversion of a value a submission returned into the type the grader expects.

The sandbox hands back plain JSON (dicts, lists, str, int, float, bool, None), a
dataclass arriving as {"__type__": "Verdict", "ok": true, ...}. coerce() checks it
against the expected type and builds the real frozen dataclass in the grader's process,
or raises InvalidValue with a message a learner can act on:
    "Verdict.ok: expected bool, got str 'yes'"      "returned int, expected Verdict"
An invalid value is a wrong answer with feedback, never a crash of the grader.
"""
from __future__ import annotations

import dataclasses
import functools
import math
import types
import typing

from reference.shapes import ACTIONS, DECISIONS

MAX_INT = 2 ** 62           # |int| must stay below: far beyond any token or byte count
MAX_STR = 10_000            # characters
MAX_ITEMS = 100_000         # elements of a tuple (the domain bounds below are tighter)
MAX_REASONS = 32            # a release decision's reasons: one per clause of a rule, with room
PAGE_COUNTS = 1 << 40       # the worker's page counts (reference.worker.decisions.is_count)


class InvalidValue(ValueError):
    def __init__(self, message: str):
        super().__init__(message)
        self.message = message


def coerce(value, expected):
    """`value` as an instance of `expected` (a shapes dataclass, int, float, bool, str,
    tuple[X, ...], Optional[X]); InvalidValue if it is not one."""
    fast = _fast_path(expected)
    if fast is not None:
        got = fast(value)
        if got is not _DOUBT:
            return got
    return _coerce(value, expected, "")


# ---- the fast path ------------------------------------------------------------------------
# A learner's run asks thousands of decisions, each answer coerced here. Most answers are
# right, and for those the checks below are the same as _coerce's, made without building
# paths or walking typing objects per call; anything they do not accept (wrong, or of a
# kind they do not cover) is handed to _coerce, which gives the value or the message.
_DOUBT = object()


def _plain_check(kind):
    """value -> the coerced value or _DOUBT, for bool, int, float and str."""
    if kind is bool:
        return lambda v: v if type(v) is bool else _DOUBT
    if kind is int:
        return lambda v: v if type(v) is int and -MAX_INT < v < MAX_INT else _DOUBT
    if kind is float:
        def real(v):
            if type(v) is float:
                return v if math.isfinite(v) else _DOUBT
            return float(v) if type(v) is int and -MAX_INT < v < MAX_INT else _DOUBT
        return real
    if kind is str:
        def text(v):
            if type(v) is not str or len(v) > MAX_STR:
                return _DOUBT
            if not v.isascii():
                try:
                    v.encode("utf-8")
                except UnicodeEncodeError:
                    return _DOUBT
            return v
        return text
    return None


@functools.lru_cache(maxsize=None)
def _fast_path(expected):
    """A checker for a plain kind, a tuple[int, ...], or a shapes dataclass whose fields are
    plain kinds; None for anything else (always the careful path)."""
    plain = _plain_check(expected) if isinstance(expected, type) else None
    if plain is not None:
        return plain
    if typing.get_origin(expected) is tuple:
        args = typing.get_args(expected)
        if args != (int, Ellipsis):
            return None

        def ints(v):
            if type(v) not in (list, tuple) or len(v) > MAX_ITEMS:
                return _DOUBT
            for x in v:
                if type(x) is not int or not -MAX_INT < x < MAX_INT:
                    return _DOUBT
            return tuple(v)
        return ints
    if not (dataclasses.is_dataclass(expected) and isinstance(expected, type)):
        return None
    fields = []
    for name, kind, required in _fields(expected):
        check = _plain_check(kind) if isinstance(kind, type) else None
        if check is None:
            return None
        fields.append((name, check, required))
    name, cls, count = expected.__name__, expected, len(fields) + 1

    def shape(v):
        if type(v) is not dict or v.get("__type__") != name or len(v) > count:
            return _DOUBT
        kwargs, seen = {}, 1
        for field, check, required in fields:
            if field in v:
                got = check(v[field])
                if got is _DOUBT:
                    return _DOUBT
                kwargs[field] = got
                seen += 1
            elif required:
                return _DOUBT
        if seen != len(v):          # a key that is not a field
            return _DOUBT
        return cls(**kwargs)
    return shape


@functools.lru_cache(maxsize=None)
def _fields(cls):
    """(name, type, required) of each init field; get_type_hints resolves the string
    annotations that `from __future__ import annotations` leaves in shapes.py."""
    hints = typing.get_type_hints(cls)
    return tuple((f.name, hints[f.name],
                  f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING)
                 for f in dataclasses.fields(cls) if f.init)


def _coerce(value, expected, path):
    origin = typing.get_origin(expected)
    if origin in (typing.Union, types.UnionType):
        options = typing.get_args(expected)
        if value is None and type(None) in options:
            return None
        rest = [t for t in options if t is not type(None)]
        if len(rest) == 1:            # Optional[X]: X's message is the useful one
            return _coerce(value, rest[0], path)
        raise TypeError(f"validate does not support {expected!r}")
    if origin is tuple:
        return _tuple(value, expected, path)
    if dataclasses.is_dataclass(expected) and isinstance(expected, type):
        return _dataclass(value, expected, path)
    if expected is bool:
        if type(value) is bool:
            return value
    elif expected is int:
        if type(value) is int:        # not bool: True is not a token count
            return _bounded_int(value, path)
    elif expected is float:
        if type(value) is int:        # 3 is a fine number of seconds
            return float(_bounded_int(value, path))
        if type(value) is float:
            if not math.isfinite(value):
                raise _invalid(path, f"expected a finite float, got {value!r}")
            return value
    elif expected is str:
        if type(value) is str:
            if len(value) > MAX_STR:
                raise _invalid(path, f"string too long ({len(value)} characters, limit {MAX_STR})")
            try:
                value.encode("utf-8")
            except UnicodeEncodeError:
                raise _invalid(path, "string contains characters that are not valid text") from None
            return value
    else:
        raise TypeError(f"validate does not support {expected!r}")
    raise _mismatch(value, expected, path)


def _bounded_int(value, path):
    if abs(value) >= MAX_INT:
        raise _invalid(path, f"integer {_short(value)} is out of range (|x| < 2**62)")
    return value


def _tuple(value, expected, path):
    if type(value) not in (list, tuple):
        raise _mismatch(value, expected, path)
    if len(value) > MAX_ITEMS:
        raise _invalid(path, f"too many items ({len(value)}, limit {MAX_ITEMS})")
    args = typing.get_args(expected)
    if len(args) == 2 and args[1] is Ellipsis:
        kinds = (args[0],) * len(value)
    elif len(args) != len(value):
        raise _invalid(path, f"expected {len(args)} items, got {len(value)}")
    else:
        kinds = args
    where = path or "returned value"
    return tuple(_coerce(x, kind, f"{where}[{i}]") for i, (x, kind) in enumerate(zip(value, kinds)))


def _dataclass(value, cls, path):
    if type(value) is not dict or value.get("__type__") != cls.__name__:
        raise _mismatch(value, cls, path)
    where = path or cls.__name__
    fields = _fields(cls)
    declared = {name for name, _, _ in fields}
    extra = sorted(k for k in value if k != "__type__" and k not in declared)
    if extra:
        raise _invalid(where, f"unexpected field {extra[0]!r} ({cls.__name__} has "
                              f"{', '.join(sorted(declared))})")
    kwargs = {}
    for name, kind, required in fields:
        if name in value:
            kwargs[name] = _coerce(value[name], kind, f"{where}.{name}")
        elif required:
            raise _invalid(where, f"missing field {name!r}")
    return cls(**kwargs)


def read_answer(function: str, value, args: tuple, returns):
    """An answer as the sandbox gave it, bounded by its domain, read leniently where a field
    is graded by no criterion, and coerced to ``returns``: every reader of an answer goes
    through here, so a grade, a run and a command read one answer alike."""
    within_domain(function, value, args)
    return coerce(_ungraded_read(function, value), returns)


def _ungraded_read(function: str, value):
    """A release decision's reasons are for the people who read it, and no criterion grades
    them: a single reason given as a str rather than a tuple of them (``ReleaseDecision("ship",
    "a real gain")``) is read as that one reason. Refused, it cost every release criterion
    the decision it came with, 9 of lesson 5's 17 points, for a field the rubric never reads."""
    if function == "decide_release" and type(value) is dict and type(value.get("reasons")) is str:
        return {**value, "reasons": [value["reasons"]]}
    return value


def within_domain(function: str, value, args: tuple) -> None:
    """An answer as the sandbox gave it (plain JSON) that is larger than its domain allows:
    InvalidValue, before any of it is converted. The grader and the worker spend time on
    every item an answer holds, so the course's own bounds apply first: a transition has at
    most the actions the course defines, publishable returns at most the pages it was
    offered, a release decision gives a few reasons."""
    def items(field):
        inner = value.get(field) if type(value) is dict else None
        return len(inner) if type(inner) is list else 0

    if function == "on_event" and items("actions") > len(ACTIONS):
        raise InvalidValue(f"Transition.actions: {items('actions')} actions; a transition has at "
                           f"most the {len(ACTIONS)} the course defines ({', '.join(ACTIONS)})")
    if function == "publishable" and type(value) is list:
        offered = len(args[0]) if args and isinstance(args[0], (tuple, list)) else 0
        if len(value) > offered:
            raise InvalidValue(f"returned value: {len(value)} page indices for {offered} pages offered")
    if function == "admit" and type(value) is dict:
        # The worker treats any other decision, or a promise it cannot count, as no decision
        # at all: said here, every criterion names it ('accept' read as admitting nothing).
        decision, pages = value.get("decision"), value.get("reserve_pages")
        if type(decision) is str and decision not in DECISIONS:
            raise InvalidValue(f"Admission.decision: {_short(decision)} is not one of {', '.join(DECISIONS)}")
        if decision == "admit" and type(pages) is int and not 0 <= pages < PAGE_COUNTS:
            raise InvalidValue(f"Admission.reserve_pages: {_short(pages)} pages is not a promise the worker "
                               f"can keep (0 to 2**40 - 1 pages)")
    if function == "decide_release" and items("reasons") > MAX_REASONS:
        raise InvalidValue(f"ReleaseDecision.reasons: {items('reasons')} reasons, limit {MAX_REASONS}")


def _type_label(t):
    if t is type(None):
        return "None"
    if typing.get_origin(t) is tuple:
        return "tuple"
    return getattr(t, "__name__", str(t))


def _got_label(value):
    """What a JSON value was, in the learner's terms: a tagged dict is the class it names."""
    if type(value) is dict and type(value.get("__type__")) is str:
        return _short(value["__type__"], 40).strip("'")
    if value is None:
        return "None"
    if type(value) is list:
        # The wire carries a tuple as a JSON list, so the two cannot be told apart here; a
        # learner who returned (tokens, verdict) must not read that they returned a list.
        return "tuple or list"
    return type(value).__name__


def _short(value, limit=40):
    text = repr(value)
    return text if len(text) <= limit else text[:limit - 3] + "..."


def _mismatch(value, expected, path):
    got = _got_label(value)
    shown = f" {_short(value)}" if type(value) in (str, int, float, bool, list) else ""
    if not path:
        return InvalidValue(f"returned {got}{shown}, expected {_type_label(expected)}")
    return InvalidValue(f"{path}: expected {_type_label(expected)}, got {got}{shown}")


def _invalid(path, message):
    return InvalidValue(f"{path}: {message}" if path else f"returned value: {message}")
