"""The grader's side of the wire: what it writes to a sandbox child and how it reads what
comes back, frame by frame (grader.engine.sandbox.session moves the frames and keeps time).

Arguments go out as plain JSON built fresh for each call (``wire_arg``): a
reference.shapes dataclass as its class name and its field values in order. Answers come
in as hostile bytes (``parse_answer``): malformed JSON is a ProtocolError, and NaN,
infinities and integers longer than MAX_INT_DIGITS reject that one answer instead of
becoming values. Nothing is ever unpickled; trusting a value's shape is
grader.engine.validate's job.
"""
from __future__ import annotations

import dataclasses
import functools
import json
import math
import numbers
import operator
import re

from reference import shapes

MAX_INT_DIGITS = 40         # validate bounds ints far below this; longer is refused at parse
# Levels of arrays and objects a frame may nest, the frame's own object included: child.py
# encodes at most 20 levels below it (its MAX_DEPTH), and the shapes nest three deep. A
# child that writes its own frames is not bound by that: a list nested 900 levels deep
# parsed here, and the first repr of it (validate's message) hit the recursion limit,
# deeper in the grader's stack, and ended the whole check or grade with a traceback.
MAX_NESTING = 32
_PLAIN = (str, int, float, bool, type(None))


class ProtocolError(Exception):
    """A frame that is not what the protocol allows."""


def _compact_encoder():
    """obj -> the text json.dumps(obj, separators=(",", ":")) gives. json.dumps builds its
    encoder at every call, a good part of a round trip of tens of microseconds; this one is
    built once. Without the circular-reference check: what is sent is built fresh by
    encode_arg, a tree. child.py has its own: the grader never imports child.py, so a broken
    child fails its sandbox's start, not the grader (the Gradescope self-test relies on it)."""
    plain = json.JSONEncoder(separators=(",", ":"))
    make = getattr(json.encoder, "c_make_encoder", None)
    if make is None:
        return plain.encode
    encode = make(None, plain.default, json.encoder.encode_basestring_ascii, None, ":", ",",
                  False, False, True)
    return lambda obj: "".join(encode(obj, 0))


dumps = _compact_encoder()


class _Doubt(Exception):
    """A frame the fast decoder does not judge: the careful one parses it."""


def _doubt(_text):
    raise _Doubt


def _finite(text):
    value = float(text)
    if not math.isfinite(value):
        raise _Doubt
    return value


# Most answers hold no float and no long digit run: the C scanner parses them alone, and
# the careful decoder (one Python call per number) sees only frames that might hold what
# it rejects. Both give the same message for every frame the fast one accepts.
_FAST = json.JSONDecoder(parse_constant=_doubt, parse_float=_finite).decode
_LONG_DIGITS = re.compile(rb"[0-9]{%d}" % (MAX_INT_DIGITS + 1))


def parse_answer(frame):
    """JSON from the child -> (message, why_rejected or None).

    NaN, +-Infinity (also as 1e999) and integers longer than MAX_INT_DIGITS become
    rejections of that one answer rather than values. Malformed JSON raises ProtocolError."""
    rejected = []

    def constant(name):
        rejected.append(f"returned a non-finite float ({name})")

    def number(text):
        value = float(text)
        if not math.isfinite(value):
            rejected.append(f"returned a non-finite float ({text[:20]})")
        return value

    def integer(text):
        if len(text.lstrip("-")) > MAX_INT_DIGITS:
            rejected.append(f"returned an integer with {len(text)} digits")
            return 0
        return int(text)

    if not _LONG_DIGITS.search(frame):
        try:
            msg = _FAST(frame.decode("utf-8"))
        except (_Doubt, ValueError, RecursionError, MemoryError):
            pass        # malformed, or a non-finite float: the careful decoder says which
        else:
            if type(msg) is not dict:
                raise ProtocolError("sent a frame that is not a JSON object")
            return msg, _too_deep(frame, msg)
    try:
        msg = json.loads(frame, parse_constant=constant, parse_float=number, parse_int=integer)
    except (ValueError, RecursionError, MemoryError) as exc:   # incl. bad UTF-8
        raise ProtocolError(f"sent a malformed frame ({type(exc).__name__})") from None
    if type(msg) is not dict:
        raise ProtocolError("sent a frame that is not a JSON object")
    return msg, (rejected[0] if rejected else _too_deep(frame, msg))


def _too_deep(frame, msg):
    """Why a parsed frame is refused for nesting past MAX_NESTING levels, or None. A frame
    with no more brackets than that cannot (one count in C: an honest answer has a few);
    any other is walked without recursion."""
    if frame.count(b"[") + frame.count(b"{") <= MAX_NESTING:
        return None
    level = [(msg, 1)]
    while level:
        value, depth = level.pop()
        if depth > MAX_NESTING:
            return f"returned a value nested more than {MAX_NESTING - 1} levels deep"
        inner = value.values() if type(value) is dict else value
        level.extend((x, depth + 1) for x in inner if type(x) is list or type(x) is dict)
    return None


@functools.lru_cache(maxsize=None)
def _shape_fields(cls):
    """Field names of a reference.shapes dataclass, or None if cls is not one."""
    if getattr(shapes, cls.__name__, None) is cls and cls.__name__ in shapes.__all__ \
            and dataclasses.is_dataclass(cls):
        return tuple(f.name for f in dataclasses.fields(cls))
    return None


@functools.lru_cache(maxsize=None)
def _in_order(cls):
    """A getter of a shapes dataclass's field values in its constructor's order, or None
    (not a shapes class, or a field its constructor does not take by position)."""
    names = _shape_fields(cls)
    if not names or not all(f.init and not f.kw_only for f in dataclasses.fields(cls)):
        return None
    get = operator.attrgetter(*names)
    return get if len(names) > 1 else (lambda value: (get(value),))


def wire_arg(value):
    """An argument as the child receives it: a shapes dataclass as its class name and its
    field values in order, {"__type__": name, "__fields__": [...]}, shorter to write, to
    parse and to build than the keyed form; anything else as encode_arg gives it."""
    cls = type(value)
    if cls is tuple or cls is list:
        return [x if type(x) in _PLAIN else wire_arg(x) for x in value]
    get = _in_order(cls)
    if get is None:
        return encode_arg(value)
    return {"__type__": cls.__name__,
            "__fields__": [x if type(x) in _PLAIN else wire_arg(x) for x in get(value)]}


def encode_arg(value):
    """A grader-side argument as tagged JSON: shapes dataclasses by name, tuples as arrays."""
    cls = type(value)
    if cls in _PLAIN:
        return value
    if cls is tuple or cls is list:
        return [encode_arg(x) for x in value]
    names = _shape_fields(cls)
    if names is not None:
        out = {"__type__": cls.__name__}
        for name in names:
            field = getattr(value, name)
            out[name] = field if type(field) in _PLAIN else encode_arg(field)
        return out
    if isinstance(value, dict) and all(type(k) is str for k in value):
        return {k: encode_arg(x) for k, x in value.items()}
    if isinstance(value, (bool, str, tuple, list)):
        return encode_arg(cls.__mro__[-2](value))      # a subclass: send the plain base value
    if isinstance(value, numbers.Integral):              # numpy integers from the worker
        return int(value)
    if isinstance(value, numbers.Real):
        return float(value)
    raise TypeError(f"cannot send {cls.__module__}.{cls.__qualname__} to a submission")
