"""Seeded synthetic workloads, described in YAML.

A workload file (validated by ``reference/workload.schema.json``, then by the cross-field
checks below)::

    name: heavy-load                  # required, free text
    description: ...                  # optional, free text
    seed: 7                           # required, integer >= 0; generate() uses it by default
    requests: 400                     # required, how many requests (1 .. 1,000,000)
    arrival: {process: poisson, rate: 4.0}          # requests per second, exponential gaps
    # arrival: {process: gamma, rate: 4.0, cv: 3.0} # gamma gaps, same mean, coefficient of
    #                                               # variation cv (cv > 1: bursts)
    prompt: {dist: lognormal, median: 1024, sigma: 0.6, min: 1, max: 16384}
    output: {dist: lognormal, median: 128, sigma: 0.8, min: 1, max: 2048}   # TRUE length
    max_new: {slack: [1.0, 4.0]}      # optional, default {slack: [1.0, 1.0]}
    scopes:                           # required, at least one tenant
      - {name: acme, weight: 3, prefix_groups: 2, prefix_share: 0.7,
         prefix_tokens: {dist: fixed, value: 512}}
      - {name: globex}                # weight defaults to 1, prefix_groups to 0
    cancel: {probability: 0.1, after_s: {dist: uniform, min: 0.05, max: 2.0}}   # optional
    classes:                          # required, SLO classes
      - {name: interactive, weight: 0.7, ttft_s: 1.0, gap_s: 0.1}
      - {name: batch, weight: 0.3, ttft_s: 10.0, gap_s: 0.5}
    shared_text_across_scopes: false  # optional, see below

Distributions (``prompt``, ``output``, ``max_new``, ``prefix_tokens`` count tokens;
``cancel.after_s`` counts seconds):

- ``{dist: fixed, value: V}``
- ``{dist: uniform, min: A, max: B}``: token counts are integers in [A, B] inclusive,
  seconds are continuous.
- ``{dist: lognormal, median: M, sigma: S, min: A, max: B}``: M * exp(S * N(0, 1)),
  token counts rounded to the nearest integer (half to even), then clamped to [A, B].
- ``{dist: choice, values: [...], weights: [...]}``: weights optional (default uniform).

Meaning of each request's fields:

- Arrivals: gaps are drawn from the process and summed, so the first request arrives
  one gap after t = 0. Requests are numbered r0, r1, ... in arrival order.
- Scope and class: drawn independently by weight.
- ``max_new``: with ``slack: [lo, hi]``, max_new_tokens = ceil(output * U(lo, hi)); with a
  distribution, max_new_tokens is drawn. In both cases output_tokens = min(output,
  max_new_tokens): a reply longer than its budget is cut at the budget.
  ``output`` and ``max_new`` must be >= 1 token; a prompt may be 0 tokens (lesson 1's
  empty-prompt case) unless it has a prefix.
- Prefix groups: a scope with ``prefix_groups: G`` has G shared system prompts whose lengths
  are drawn once per (scope, group) from ``prefix_tokens``. A request of that scope uses
  one of them with probability ``prefix_share`` (the group chosen uniformly); its prompt is
  then the group's tokens followed by its own, so its prompt length = prefix length + the
  drawn ``prompt`` length. ``prefix_tokens`` and ``prefix_share`` are required when G > 0
  and ignored when G = 0.
- Token ids are int32 in [0, 32000). Every (scope, group) prefix is drawn independently,
  so scopes never share text, unless ``shared_text_across_scopes: true``: then group g of
  every scope is cut from the same token sequence (identical when the lengths are equal),
  which is what makes a cross-scope prefix leak observable.
- Cancellation: with probability ``cancel.probability`` a request has cancel_at_s =
  arrival_s + a draw of ``after_s``; otherwise cancel_at_s is None.

Determinism: every quantity has its own random stream, ``PCG64(SeedSequence(seed,
spawn_key=(k,)))`` with k fixed per quantity, and is drawn as one array in request order.
So the same spec and seed give identical requests, and adding requests at the end leaves
the earlier ones unchanged.
"""
from __future__ import annotations

import copy
import json
import math
import os
import re
import stat
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any, Optional

import numpy as np
import yaml
from numpy.random import PCG64, Generator, SeedSequence

from reference.request import Request
from reference.shapes import Slo
from reference.yaml_words import kind, line_of, number_as_text, short, wanted

__all__ = [
    "WorkloadError", "Dist", "Arrival", "MaxNew", "Scope", "Cancel", "SloClass",
    "WorkloadSpec", "load_workload", "parse_workload", "with_overrides", "to_mapping",
    "generate", "VOCAB", "SCHEMA_PATH",
]

VOCAB = 32000
# Beside this module, so the worker reads nothing outside its package (an install that is
# not editable has no course folder around it).
SCHEMA_PATH = Path(__file__).resolve().with_name("workload.schema.json")
# Refuse workloads whose token arrays would not fit comfortably in memory (4 GiB of int32).
MAX_TOTAL_TOKENS = 1 << 30
MAX_PREFIX_GROUPS = 100_000
MIN_RATE = 1e-6  # below this, arrival times stop being meaningful floats


class WorkloadError(ValueError):
    """A workload that cannot be read or generated. One line: file, path inside it, problem."""


class _Invalid(Exception):
    """Raised deep in parsing with a path; parse_workload adds the file name."""

    def __init__(self, path: tuple, message: str):
        super().__init__(message)
        self.path = path
        self.message = message


# --------------------------------------------------------------------------- the spec

@dataclass(frozen=True)
class Dist:
    kind: str                               # fixed | uniform | lognormal | choice
    value: Optional[float] = None           # fixed
    min: Optional[float] = None             # uniform, lognormal
    max: Optional[float] = None
    median: Optional[float] = None          # lognormal
    sigma: Optional[float] = None
    values: tuple = ()                      # choice
    weights: Optional[tuple] = None         # choice; None = uniform


@dataclass(frozen=True)
class Arrival:
    process: str                            # poisson | gamma
    rate: float                             # requests per second
    cv: Optional[float] = None              # gamma only


@dataclass(frozen=True)
class MaxNew:
    slack: Optional[tuple[float, float]] = (1.0, 1.0)
    dist: Optional[Dist] = None             # exactly one of slack / dist is set


@dataclass(frozen=True)
class Scope:
    name: str
    weight: float = 1.0
    prefix_groups: int = 0
    prefix_tokens: Optional[Dist] = None
    prefix_share: float = 0.0


@dataclass(frozen=True)
class Cancel:
    probability: float
    after_s: Dist


@dataclass(frozen=True)
class SloClass:
    name: str
    weight: float
    ttft_s: float
    gap_s: float


@dataclass(frozen=True)
class WorkloadSpec:
    name: str
    seed: int
    requests: int
    arrival: Arrival
    prompt: Dist
    output: Dist
    max_new: MaxNew
    scopes: tuple[Scope, ...]
    classes: tuple[SloClass, ...]
    cancel: Optional[Cancel] = None
    shared_text_across_scopes: bool = False
    description: str = ""
    source: str = field(default="<workload>", compare=False)  # where it was read, for errors


# --------------------------------------------------------------------------- reading

class UniqueKeys:
    """A YAML loader's mixin that refuses a repeated key: PyYAML would silently keep the
    last one, and `points: 2` then `points: 20` further down is a grade nobody meant.
    Every reader of the course's YAML (workloads, rubrics, probes, scenarios, families,
    the worker file) loads with it."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict:
        seen: dict = {}
        for key_node, _ in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge":
                continue  # keys written after a merge (<<) override it on purpose
            key = self.construct_object(key_node, deep=deep)
            try:
                duplicate = key in seen
            except TypeError:  # unhashable key: the base class reports it
                break
            if duplicate:
                raise yaml.constructor.ConstructorError(
                    None, None, f"duplicate key {key!r} (first at line {seen[key] + 1})",
                    key_node.start_mark)
            seen[key] = key_node.start_mark.line
        return super().construct_mapping(node, deep=deep)


class _Loader(UniqueKeys, yaml.SafeLoader):
    pass


MAX_WORKLOAD_BYTES = 16 << 20     # a workload is a few hundred lines of YAML


def load_workload(path: str | Path) -> WorkloadSpec:
    """Read and validate one workload file."""
    source = str(path)
    try:
        # A pipe or a device would block the read forever: refused before it is opened.
        if not stat.S_ISREG(os.stat(path).st_mode):
            raise WorkloadError(f"{source}: is not a regular file (a folder, a pipe or a device): not read")
        if os.stat(path).st_size > MAX_WORKLOAD_BYTES:
            raise WorkloadError(f"{source}: larger than {MAX_WORKLOAD_BYTES >> 20} MiB: not read")
        text = Path(path).read_text(encoding="utf-8")
    except FileNotFoundError:
        raise WorkloadError(f"{source}: no such workload file") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise WorkloadError(f"{source}: cannot read: {exc}") from None
    try:
        mapping = yaml.load(text, Loader=_Loader)  # noqa: S506 - _Loader is a SafeLoader
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line = f":{mark.line + 1}" if mark is not None else ""
        what = ": ".join(str(p) for p in (exc.context, exc.problem) if p)
        raise WorkloadError(f"{source}{line}: invalid YAML: {what}") from None
    except yaml.YAMLError as exc:
        raise WorkloadError(f"{source}: invalid YAML: {' '.join(str(exc).split())}") from None
    except RecursionError:
        raise WorkloadError(f"{source}: invalid YAML: nested too deeply") from None
    except (ValueError, TypeError, AttributeError, OverflowError) as exc:
        # PyYAML's constructors on a scalar they cannot build (2001-02-30, 5,000 digits)
        what = " ".join(str(exc).split())[:120]
        raise WorkloadError(f"{source}: invalid YAML: a value that cannot be read ({what})") from None
    return parse_workload(mapping, source, text)


def parse_workload(mapping: Any, source: str = "<workload>", text: str | None = None) -> WorkloadSpec:
    """Validate a mapping (as read from YAML) and build the spec. Raises WorkloadError,
    naming the line of the problem when given the file's ``text``."""
    try:
        if not isinstance(mapping, dict):
            raise _Invalid((), f"the top level must be a mapping, got {kind(mapping)}")
        _check_schema(mapping)
        _check_finite(mapping, ())
        return _build(mapping, source)
    except _Invalid as bad:
        where = f"{_format_path(bad.path)}: " if bad.path else ""
        line = line_of(text, bad.path) if text is not None and bad.path else None
        raise WorkloadError(f"{source}{f':{line}' if line else ''}: {where}{bad.message}") from None
    except RecursionError:
        raise WorkloadError(f"{source}: nested too deeply") from None


@lru_cache(maxsize=1)
def _validator():
    # The schema is the course's own file; tests/test_workload.py checks it against the
    # metaschema, which would cost every process about 30 ms here. jsonschema is imported
    # on first use: a process that parses no workload (a warm check) does without it.
    import jsonschema
    return jsonschema.Draft202012Validator(json.loads(SCHEMA_PATH.read_text(encoding="utf-8")))


def _check_schema(mapping: dict) -> None:
    from jsonschema.exceptions import best_match
    error = best_match(_validator().iter_errors(mapping))
    if error is None:
        return
    path = tuple(error.absolute_path)
    if path == ("max_new",) and error.validator == "required":
        raise _Invalid(path, "needs either slack: [lo, hi] or a distribution (dist: ...)")
    raise _Invalid(path, _describe(error))


def _describe(error) -> str:
    """A short message for a schema error, in the words a YAML author would use."""
    v, arg, got = error.validator, error.validator_value, error.instance
    if v == "type":
        types = [arg] if isinstance(arg, str) else arg
        return f"must be {wanted(types)}, got {kind(got)} {short(got, 40)}{number_as_text(got)}"
    if v == "required":
        missing = [k for k in arg if k not in got]
        return f"missing key {missing[0]!r}" if missing else error.message
    if v == "additionalProperties":
        allowed = list(error.schema.get("properties", {}))
        extra = [k for k in got if k not in allowed]
        return f"unknown key {extra[0]!r} (allowed: {', '.join(allowed)})"
    if v in ("enum", "const"):
        options = arg if v == "enum" else [arg]
        return f"must be one of {', '.join(map(str, options))}, got {short(got, 40)}"
    bounds = {"minimum": ">=", "maximum": "<=", "exclusiveMinimum": ">", "exclusiveMaximum": "<"}
    if v in bounds:
        return f"must be {bounds[v]} {arg}, got {short(got, 40)}"
    if v == "minItems":
        return f"must have at least {arg} item{'s' if arg != 1 else ''}, got {len(got)}"
    if v == "maxItems":
        return f"must have at most {arg} items, got {len(got)}"
    if v == "minLength":
        return "must not be empty"
    return error.message.splitlines()[0]


def _format_path(path: tuple) -> str:
    out = ""
    for part in path:
        if isinstance(part, int) and not isinstance(part, bool):
            out += f"[{part}]"
        else:
            out += ("." if out else "") + (part if isinstance(part, str) else repr(part))
    return out


def _check_finite(node: Any, path: tuple) -> None:
    # JSON Schema bounds let NaN through (every comparison with NaN is false).
    if isinstance(node, float) and not math.isfinite(node):
        raise _Invalid(path, f"must be a finite number, got {node}")
    if isinstance(node, dict):
        for key, value in node.items():
            _check_finite(value, path + (key,))
    elif isinstance(node, list):
        for i, value in enumerate(node):
            _check_finite(value, path + (i,))


# --------------------------------------------------------------------------- building

def _build(m: dict, source: str) -> WorkloadSpec:
    arrival = m["arrival"]
    if arrival["rate"] < MIN_RATE:
        raise _Invalid(("arrival", "rate"),
                       f"must be >= {MIN_RATE} requests/s, got {arrival['rate']}")
    spec_arrival = Arrival(arrival["process"], float(arrival["rate"]),
                           float(arrival["cv"]) if "cv" in arrival else None)
    max_new = m.get("max_new", {"slack": [1.0, 1.0]})
    if "slack" in max_new:
        lo, hi = (float(x) for x in max_new["slack"])
        if lo > hi:
            raise _Invalid(("max_new", "slack"),
                           f"must be [lo, hi] with lo <= hi, got {max_new['slack']}")
        spec_max_new = MaxNew(slack=(lo, hi))
    else:
        spec_max_new = MaxNew(slack=None, dist=_dist(max_new, ("max_new",), floor=1))
    cancel = None
    if "cancel" in m:
        c = m["cancel"]
        cancel = Cancel(float(c["probability"]),
                        _dist(c["after_s"], ("cancel", "after_s"), floor=0, integer=False))
    return WorkloadSpec(
        name=m["name"], seed=int(m["seed"]), requests=int(m["requests"]), arrival=spec_arrival,
        prompt=_dist(m["prompt"], ("prompt",), floor=0),
        output=_dist(m["output"], ("output",), floor=1),
        max_new=spec_max_new, scopes=_scopes(m["scopes"]), classes=_classes(m["classes"]),
        cancel=cancel, shared_text_across_scopes=bool(m.get("shared_text_across_scopes", False)),
        description=m.get("description", ""), source=source)


def _dist(d: dict, path: tuple, floor: float, integer: bool = True) -> Dist:
    num = int if integer else float
    kind = d["dist"]
    if kind == "fixed":
        dist = Dist(kind, value=num(d["value"]))
        lowest = [(path + ("value",), dist.value)]
    elif kind in ("uniform", "lognormal"):
        lo, hi = num(d["min"]), num(d["max"])
        if lo > hi:
            raise _Invalid(path + ("min",), f"must be <= max ({hi}), got {lo}")
        if kind == "lognormal":
            # + 0.0 turns -0.0 (which the schema accepts) into 0.0 (which numpy accepts)
            dist = Dist(kind, min=lo, max=hi, median=float(d["median"]),
                        sigma=float(d["sigma"]) + 0.0)
        else:
            dist = Dist(kind, min=lo, max=hi)
        lowest = [(path + ("min",), lo)]
    else:
        values = tuple(num(v) for v in d["values"])
        weights = None
        if "weights" in d:
            weights = tuple(float(w) for w in d["weights"])
            if len(weights) != len(values):
                raise _Invalid(path + ("weights",),
                               f"has {len(weights)} weights for {len(values)} values")
            if sum(weights) <= 0:
                raise _Invalid(path + ("weights",), "are all zero; at least one must be > 0")
        dist = Dist(kind, values=values, weights=weights)
        lowest = [(path + ("values", i), v) for i, v in enumerate(values)]
    for where, v in lowest:
        if v < floor:
            raise _Invalid(where, f"must be >= {floor}, got {v}")
    return dist


def _unique(items: list, path: tuple) -> None:
    first: dict[str, int] = {}
    for i, item in enumerate(items):
        name = item["name"]
        if name in first:
            earlier = _format_path(path + (first[name],))
            raise _Invalid(path + (i, "name"), f"{name!r} is already used by {earlier}")
        first[name] = i
    if sum(item.get("weight", 1.0) for item in items) <= 0:
        raise _Invalid(path, "weights are all zero; at least one must be > 0")


def _scopes(items: list) -> tuple[Scope, ...]:
    _unique(items, ("scopes",))
    groups = sum(int(s.get("prefix_groups", 0)) for s in items)
    if groups > MAX_PREFIX_GROUPS:
        raise _Invalid(("scopes",), f"{groups} prefix groups in all, more than {MAX_PREFIX_GROUPS}")
    out = []
    for i, s in enumerate(items):
        groups = int(s.get("prefix_groups", 0))
        if groups == 0:
            out.append(Scope(s["name"], float(s.get("weight", 1.0))))
            continue
        for key in ("prefix_tokens", "prefix_share"):
            if key not in s:
                raise _Invalid(("scopes", i), f"prefix_groups is {groups}, so {key} is required")
        out.append(Scope(s["name"], float(s.get("weight", 1.0)), groups,
                         _dist(s["prefix_tokens"], ("scopes", i, "prefix_tokens"), floor=1),
                         float(s["prefix_share"])))
    return tuple(out)


def _classes(items: list) -> tuple[SloClass, ...]:
    _unique(items, ("classes",))
    return tuple(SloClass(c["name"], float(c["weight"]), float(c["ttft_s"]), float(c["gap_s"]))
                 for c in items)


# --------------------------------------------------------------------------- back to YAML

def _dist_mapping(d: Dist) -> dict:
    if d.kind == "fixed":
        return {"dist": "fixed", "value": d.value}
    if d.kind == "uniform":
        return {"dist": "uniform", "min": d.min, "max": d.max}
    if d.kind == "lognormal":
        return {"dist": "lognormal", "median": d.median, "sigma": d.sigma,
                "min": d.min, "max": d.max}
    out: dict = {"dist": "choice", "values": list(d.values)}
    if d.weights is not None:
        out["weights"] = list(d.weights)
    return out


def to_mapping(spec: WorkloadSpec) -> dict:
    """The spec as a plain mapping (every default written out); parse_workload reads it back."""
    arrival: dict = {"process": spec.arrival.process, "rate": spec.arrival.rate}
    if spec.arrival.cv is not None:
        arrival["cv"] = spec.arrival.cv
    scopes = []
    for s in spec.scopes:
        scope: dict = {"name": s.name, "weight": s.weight, "prefix_groups": s.prefix_groups}
        if s.prefix_groups:
            scope["prefix_tokens"] = _dist_mapping(s.prefix_tokens)
            scope["prefix_share"] = s.prefix_share
        scopes.append(scope)
    out: dict = {
        "name": spec.name, "seed": spec.seed, "requests": spec.requests, "arrival": arrival,
        "prompt": _dist_mapping(spec.prompt), "output": _dist_mapping(spec.output),
        "max_new": ({"slack": list(spec.max_new.slack)} if spec.max_new.slack is not None
                    else _dist_mapping(spec.max_new.dist)),
        "scopes": scopes,
        "classes": [{"name": c.name, "weight": c.weight, "ttft_s": c.ttft_s, "gap_s": c.gap_s}
                    for c in spec.classes],
        "shared_text_across_scopes": spec.shared_text_across_scopes,
    }
    if spec.cancel is not None:
        out["cancel"] = {"probability": spec.cancel.probability,
                         "after_s": _dist_mapping(spec.cancel.after_s)}
    if spec.description:
        out["description"] = spec.description
    return out


_KEY_PART = re.compile(r"([^.\[\]]+)|\[(\d+)\]")


def _split_key(key: str) -> list:
    parts, pos = [], 0
    for match in _KEY_PART.finditer(key):
        between = key[pos:match.start()]
        if between not in ("", "."):
            raise ValueError
        name, index = match.groups()
        parts.append(int(index) if index is not None else int(name) if name.isdigit() else name)
        pos = match.end()
    if not parts or key[pos:] != "":
        raise ValueError
    return parts


def with_overrides(spec: WorkloadSpec, **fields: Any) -> WorkloadSpec:
    """A copy of spec with dotted keys replaced, re-validated.

    Keys: ``requests``, ``arrival.rate``, ``scopes[0].weight`` (or ``scopes.0.weight``);
    pass dotted keys as ``with_overrides(spec, **{"arrival.rate": 8.0})``. A missing
    mapping key is created, so ``cancel`` can be added; switching ``arrival.process``
    means replacing ``arrival`` whole.
    """
    source = f"{spec.source} (with overrides)"
    mapping = to_mapping(spec)
    for key, value in fields.items():
        try:
            parts = _split_key(key)
        except ValueError:
            raise WorkloadError(f"{source}: override {key!r} is not a key like arrival.rate "
                                f"or scopes[0].weight") from None
        node: Any = mapping
        for depth, part in enumerate(parts):
            last = depth == len(parts) - 1
            if isinstance(node, dict) and isinstance(part, str):
                if last:
                    node[part] = copy.deepcopy(value)
                else:
                    node = node.setdefault(part, {})
            elif isinstance(node, list) and isinstance(part, int) and part < len(node):
                if last:
                    node[part] = copy.deepcopy(value)
                else:
                    node = node[part]
            else:
                where = _format_path(tuple(parts[:depth])) or "the top level"
                raise WorkloadError(f"{source}: override {key!r}: {where} has no "
                                    f"{'item' if isinstance(part, int) else 'key'} {part!r}")
    return parse_workload(mapping, source)


# --------------------------------------------------------------------------- generating

# One independent stream per quantity. Append new names only: a stream's position in
# this tuple is its spawn key, so reordering would change every workload.
_STREAMS = ("arrival", "scope", "class", "prompt", "output", "max_new", "group_use",
            "group_pick", "cancel", "cancel_after", "tokens", "prefix_len", "prefix_text")


def _streams(seed: int) -> dict[str, Generator]:
    return {name: Generator(PCG64(SeedSequence(seed, spawn_key=(k,))))
            for k, name in enumerate(_STREAMS)}


def _sample(d: Dist, rng: Generator, n: int, integer: bool = True) -> np.ndarray:
    if d.kind == "fixed":
        x = np.full(n, d.value, dtype=np.float64)
    elif d.kind == "uniform":
        if integer:
            return rng.integers(d.min, d.max, size=n, endpoint=True, dtype=np.int64)
        x = rng.uniform(d.min, d.max, size=n)
    elif d.kind == "lognormal":
        x = rng.lognormal(math.log(d.median), d.sigma, size=n)
        x = np.clip(np.rint(x) if integer else x, d.min, d.max)
    else:
        p = None
        if d.weights is not None:
            w = np.asarray(d.weights, dtype=np.float64)
            p = w / w.sum()
        x = rng.choice(np.asarray(d.values, dtype=np.float64), size=n, p=p)
    return x.astype(np.int64) if integer else x


def _pick(weights: list[float], rng: Generator, n: int) -> np.ndarray:
    w = np.asarray(weights, dtype=np.float64)
    return rng.choice(len(w), size=n, p=w / w.sum())


def _arrivals(a: Arrival, rng: Generator, n: int) -> np.ndarray:
    if a.process == "poisson":
        gaps = rng.exponential(1.0 / a.rate, size=n)
    else:  # gamma with mean 1/rate and coefficient of variation cv
        shape = 1.0 / (a.cv * a.cv)
        gaps = rng.gamma(shape, 1.0 / (a.rate * shape), size=n)
    return np.cumsum(gaps)


def _prefixes(spec: WorkloadSpec,
              rngs: dict[str, Generator]) -> tuple[list[np.ndarray], np.ndarray]:
    """Every (scope, group) prefix, flattened in scope order, and each scope's first index."""
    lengths = [_sample(s.prefix_tokens, rngs["prefix_len"], s.prefix_groups) if s.prefix_groups
               else np.zeros(0, dtype=np.int64) for s in spec.scopes]
    total = sum(int(x.sum()) for x in lengths)
    if total > MAX_TOTAL_TOKENS:
        raise WorkloadError(f"{spec.source}: scopes: prefix groups need {total} tokens, "
                            f"more than the limit of {MAX_TOTAL_TOKENS}")
    text = rngs["prefix_text"]
    if spec.shared_text_across_scopes:
        longest: dict[int, int] = {}
        for per_scope in lengths:
            for g, length in enumerate(per_scope.tolist()):
                longest[g] = max(longest.get(g, 0), length)
        shared = [text.integers(0, VOCAB, size=longest[g], dtype=np.int32) for g in sorted(longest)]
        prefixes = [shared[g][:length] for per_scope in lengths
                    for g, length in enumerate(per_scope.tolist())]
    else:
        prefixes = [text.integers(0, VOCAB, size=length, dtype=np.int32)
                    for per_scope in lengths for length in per_scope.tolist()]
    for p in prefixes:
        p.flags.writeable = False
    first = np.cumsum([0] + [len(x) for x in lengths])[:-1]
    return prefixes, first


def generate(spec: WorkloadSpec, seed: Optional[int] = None) -> tuple[Request, ...]:
    """The spec's requests, in arrival order. Same spec and seed -> identical requests."""
    seed = spec.seed if seed is None else seed
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0:
        raise WorkloadError(f"{spec.source}: seed must be an integer >= 0, got {seed!r}")
    n, rngs = spec.requests, _streams(int(seed))

    arrival = _arrivals(spec.arrival, rngs["arrival"], n)
    scope = _pick([s.weight for s in spec.scopes], rngs["scope"], n)
    cls = _pick([c.weight for c in spec.classes], rngs["class"], n)
    own = _sample(spec.prompt, rngs["prompt"], n)
    output = _sample(spec.output, rngs["output"], n)
    if spec.max_new.slack is not None:
        lo, hi = spec.max_new.slack
        max_new = np.ceil(output * rngs["max_new"].uniform(lo, hi, size=n)).astype(np.int64)
    else:
        max_new = _sample(spec.max_new.dist, rngs["max_new"], n)
    output = np.minimum(output, max_new)

    groups = np.array([s.prefix_groups for s in spec.scopes], dtype=np.int64)[scope]
    share = np.array([s.prefix_share for s in spec.scopes], dtype=np.float64)[scope]
    uses_group = (rngs["group_use"].random(n) < share) & (groups > 0)
    pick = np.minimum((rngs["group_pick"].random(n) * groups).astype(np.int64),
                      np.maximum(groups - 1, 0))
    prefixes, first = _prefixes(spec, rngs)
    group = np.where(uses_group, first[scope] + pick, -1)

    if spec.cancel is not None:
        cancelled = rngs["cancel"].random(n) < spec.cancel.probability
        after = _sample(spec.cancel.after_s, rngs["cancel_after"], n, integer=False)
        cancel_at = np.where(cancelled, arrival + after, np.nan)
    else:
        cancel_at = np.full(n, np.nan)

    total = int(own.sum())
    if total > MAX_TOTAL_TOKENS:
        raise WorkloadError(f"{spec.source}: prompt: {n} requests need {total} prompt tokens, "
                            f"more than the limit of {MAX_TOTAL_TOKENS}")
    # One array for every request's own tokens; each prompt without a prefix is a view of it.
    tokens = rngs["tokens"].integers(0, VOCAB, size=total, dtype=np.int32)
    tokens.flags.writeable = False
    ends = np.cumsum(own).tolist()

    slos = [Slo(c.ttft_s, c.gap_s) for c in spec.classes]
    scope_names = [s.name for s in spec.scopes]
    class_names = [c.name for c in spec.classes]
    out = []
    start = 0
    rows = zip(arrival.tolist(), scope.tolist(), cls.tolist(), ends, group.tolist(),
               max_new.tolist(), output.tolist(), cancel_at.tolist())
    for i, (t, s, c, end, g, budget, length, cancel) in enumerate(rows):
        prompt = tokens[start:end]
        if g >= 0:
            prompt = np.concatenate((prefixes[g], prompt))
            prompt.flags.writeable = False
        start = end
        out.append(Request(index=i, id=f"r{i}", scope=scope_names[s], cls=class_names[c],
                           arrival_s=t, prompt=prompt, max_new_tokens=budget,
                           output_tokens=length, slo=slos[c],
                           cancel_at_s=None if math.isnan(cancel) else cancel))
    return tuple(out)
