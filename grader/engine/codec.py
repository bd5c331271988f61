"""One inert format for what the grader keeps on disk: tagged JSON, never pickle.

The memo (grader.engine.memo) and the learner edition's recorded answers and figures
(grader.engine.oracle) write values with ``dumps`` and read them back with ``loads``.
Reading can run no code: a dataclass comes back only if its class is registered here
(``@persistent``, or a dataclass of reference.shapes) and every field it names is one of
its fields; anything else is a CodecError, which a reader treats as "compute it again".

Encoded forms: JSON scalars as themselves (floats may be inf or nan); tuples and lists as
``{"__tuple__": [...]}`` / arrays; frozensets as ``{"__frozenset__": [...]}``; str-keyed dicts as ``{"__dict__": {...}}``; numpy
arrays as ``{"__ndarray__": dtype, "data": [...], "shape": [...]}`` (bool, int32, int64 and
float64 only); a dataclass as ``{"__type__": "module:Name", field: value, ...}``.
"""
from __future__ import annotations

import json
from dataclasses import fields, is_dataclass
from importlib import import_module
from typing import Any

import numpy as np

from reference import shapes
from reference.records import Labels, Records

_REGISTRY: dict[str, type] = {}
_DTYPES = {"bool": np.bool_, "int32": np.int32, "int64": np.int64, "float64": np.float64}
# Modules whose registered classes a reader may import to find them: the course's own.
_IMPORTABLE = ("grader.", "reference.")


class CodecError(ValueError):
    """A stored value that is not one this codec wrote: torn, foreign or tampered with."""


def persistent(cls: type) -> type:
    """Class decorator: instances of this dataclass may be stored and read back."""
    if not is_dataclass(cls):
        raise TypeError(f"{cls.__qualname__} is not a dataclass")
    _REGISTRY[_tag(cls)] = cls
    return cls


def _tag(cls: type) -> str:
    return f"{cls.__module__}:{cls.__qualname__}"


def _register_module(module) -> None:
    for value in vars(module).values():
        if isinstance(value, type) and is_dataclass(value) and value.__module__ == module.__name__:
            persistent(value)


# The worker's values are registered from here: reference/ never imports the grader.
_register_module(shapes)
_register_module(import_module("reference.records"))
_register_module(import_module("reference.workload"))


def encode(value: Any) -> Any:
    cls = type(value)
    if value is None or cls in (bool, int, float, str):
        return value
    if cls is tuple or cls is Records or cls is Labels:   # a run's compact columns: as their tuple
        return {"__tuple__": [encode(v) for v in value]}
    if cls is list:
        return [encode(v) for v in value]
    if cls is frozenset:
        return {"__frozenset__": sorted((encode(v) for v in value), key=repr)}
    if isinstance(value, dict):
        if not all(type(k) is str for k in value):
            raise TypeError("only dicts with str keys can be stored")
        return {"__dict__": {k: encode(v) for k, v in value.items()}}
    if isinstance(value, np.ndarray):
        dtype = str(value.dtype)
        if dtype not in _DTYPES:
            raise TypeError(f"cannot store a numpy array of {dtype}")
        return {"__ndarray__": dtype, "shape": list(value.shape), "data": value.ravel().tolist()}
    if isinstance(value, np.generic):
        return encode(value.item())
    if is_dataclass(value) and _tag(cls) in _REGISTRY:
        out = {"__type__": _tag(cls)}
        for f in fields(value):
            out[f.name] = encode(getattr(value, f.name))
        return out
    raise TypeError(f"cannot store {cls.__module__}.{cls.__qualname__} (not registered in grader.engine.codec)")


def _class(tag: Any) -> type:
    if not isinstance(tag, str) or ":" not in tag:
        raise CodecError(f"bad type tag {tag!r}")
    if tag not in _REGISTRY:
        module = tag.split(":", 1)[0]
        if module.startswith(_IMPORTABLE) and ".solutions" not in module:
            try:
                import_module(module)            # registers its classes as it loads
            except ImportError:
                pass
    if tag not in _REGISTRY:
        raise CodecError(f"{tag} is not a class this grader stores")
    return _REGISTRY[tag]


def decode(data: Any) -> Any:
    if data is None or type(data) in (bool, int, float, str):
        return data
    if type(data) is list:
        return [decode(v) for v in data]
    if type(data) is not dict:
        raise CodecError(f"unexpected {type(data).__name__}")
    if "__tuple__" in data and len(data) == 1:
        items = data["__tuple__"]
        if type(items) is not list:
            raise CodecError("a tuple is stored as a list")
        return tuple(decode(v) for v in items)
    if "__frozenset__" in data and len(data) == 1:
        items = data["__frozenset__"]
        if type(items) is not list:
            raise CodecError("a frozenset is stored as a list")
        return frozenset(decode(v) for v in items)
    if "__dict__" in data and len(data) == 1:
        inner = data["__dict__"]
        if type(inner) is not dict:
            raise CodecError("a dict is stored as an object")
        return {k: decode(v) for k, v in inner.items()}
    if "__ndarray__" in data:
        dtype = _DTYPES.get(data.get("__ndarray__"))
        shape, values = data.get("shape"), data.get("data")
        if dtype is None or type(shape) is not list or type(values) is not list or set(data) != {
                "__ndarray__", "shape", "data"}:
            raise CodecError("bad numpy array")
        try:
            return np.asarray(values, dtype=dtype).reshape(shape)
        except (TypeError, ValueError) as e:
            raise CodecError(f"bad numpy array: {e}") from None
    if "__type__" in data:
        cls = _class(data["__type__"])
        names = {f.name for f in fields(cls)}
        given = set(data) - {"__type__"}
        if not given <= names:
            raise CodecError(f"{cls.__qualname__} has no field {sorted(given - names)[0]!r}")
        try:
            return cls(**{k: decode(v) for k, v in data.items() if k != "__type__"})
        except TypeError as e:
            raise CodecError(f"{cls.__qualname__}: {e}") from None
    raise CodecError("an object without a tag")


def dumps(value: Any) -> str:
    return json.dumps(encode(value), separators=(",", ":"), allow_nan=True)


def loads(text: str | bytes) -> Any:
    try:
        data = json.loads(text)
    except (ValueError, RecursionError) as e:
        raise CodecError(f"not JSON: {e}") from None
    try:
        return decode(data)
    except RecursionError:
        raise CodecError("nested too deeply") from None
