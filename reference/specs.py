"""Model and worker specs read from the course's YAML mappings, with binary units.

Every error is a ``SpecError`` whose one line names where the value was (file and path).
"""
from __future__ import annotations

import math
from typing import Any, Mapping

from reference.shapes import CostModel, ModelSpec, WorkerSpec
from reference.units import UnitError, parse_bytes
from reference.yaml_words import kind


class SpecError(ValueError):
    """A model, worker or cost-model field that cannot be used; one line naming it."""


MODEL_KEYS = ("name", "layers", "kv_heads", "head_dim", "dtype_bytes", "max_context", "weight_bytes")
WORKER_KEYS = ("name", "device_bytes", "reserved_bytes", "page_tokens", "max_running", "cost")


def _mapping(m: Any, where: str, known: tuple[str, ...]) -> Mapping:
    """``m`` as a mapping of ``known`` keys. A key outside them is a typo, refused: an
    optional field misspelt (`cots:` for `cost:`) would otherwise take its default unseen."""
    if not isinstance(m, Mapping):
        raise SpecError(f"{where}: expected a mapping, got {kind(m)}")
    extra = [k for k in m if k not in known]
    if extra:
        raise SpecError(f"{where}.{extra[0]}: unknown key (known here: {', '.join(known)})")
    return m


def _int(m: Mapping, key: str, where: str, minimum: int = 1) -> int:
    if key not in m:
        raise SpecError(f"{where}.{key}: missing")
    v = m[key]
    if isinstance(v, bool) or not isinstance(v, int) or v < minimum:
        raise SpecError(f"{where}.{key}: expected an integer >= {minimum}, got {v!r}")
    return v


def _bytes(m: Mapping, key: str, where: str) -> int:
    if key not in m:
        raise SpecError(f"{where}.{key}: missing")
    try:
        return parse_bytes(m[key], f"{where}.{key}")
    except UnitError as e:
        raise SpecError(str(e)) from None


def _seconds(v: Any, where: str) -> float:
    # YAML 1.1 reads 4e-5 (no dot) as a string; accept it rather than surprise an author.
    if isinstance(v, str):
        try:
            v = float(v)
        except ValueError:
            raise SpecError(f"{where}: expected a number of seconds, got {v!r}") from None
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or v < 0:
        raise SpecError(f"{where}: expected a finite number >= 0, got {v!r}")
    return float(v)


def model_from(m: Any, where: str) -> ModelSpec:
    m = _mapping(m, where, MODEL_KEYS)
    return ModelSpec(name=str(m.get("name", "model")), layers=_int(m, "layers", where),
                     kv_heads=_int(m, "kv_heads", where), head_dim=_int(m, "head_dim", where),
                     dtype_bytes=_int(m, "dtype_bytes", where),
                     max_context=_int(m, "max_context", where),
                     weight_bytes=_bytes(m, "weight_bytes", where))


def cost_from(m: Any, where: str) -> CostModel:
    if m is None:
        return CostModel()
    m = _mapping(m, where, ("step_fixed", "per_token", "per_context_token", "per_attention_pair"))
    cost = CostModel(**{k: _seconds(v, f"{where}.{k}") for k, v in m.items()})
    if cost.step_fixed <= 0:
        raise SpecError(f"{where}.step_fixed: must be > 0 (a step takes time)")
    return cost


def worker_from(m: Any, where: str) -> WorkerSpec:
    m = _mapping(m, where, WORKER_KEYS)
    return WorkerSpec(device_bytes=_bytes(m, "device_bytes", where),
                      reserved_bytes=_bytes(m, "reserved_bytes", where),
                      page_tokens=_int(m, "page_tokens", where),
                      max_running=_int(m, "max_running", where),
                      cost=cost_from(m.get("cost"), f"{where}.cost"))
