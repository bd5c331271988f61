"""The course's experiments: run the reference worker across one constraint, print a table, plot it.

An experiment is a module in this package that registers a function with
``@experiment(name, title=..., knobs=...)``. The function gets the settings (every knob,
with the user's ``--set key=value`` applied) and the course, and returns an
``Outcome`` (grader.course.experiments.common): a table and, optionally, a plot. Modules are
found by listing the package, so adding an experiment is adding one file.

    grader experiment prefill-deadline --set budget=0.05 --plot deadline.png
"""
from __future__ import annotations

import pkgutil
from dataclasses import dataclass
from importlib import import_module
from typing import Callable

from grader.course.experiments.common import Knob, Outcome, parse_settings
from grader.engine.errors import InputError

__all__ = ["Experiment", "experiment", "find", "names", "run"]


@dataclass(frozen=True)
class Experiment:
    name: str
    title: str
    knobs: tuple[Knob, ...]
    run: Callable            # (settings: dict, course) -> Outcome


REGISTRY: dict[str, Experiment] = {}
_SHARED = {"common"}          # modules of the package that are machinery, not experiments


def experiment(name: str, *, title: str, knobs: tuple[Knob, ...]):
    def register(fn):
        if name in REGISTRY:
            raise ValueError(f"experiment {name!r} registered twice")
        REGISTRY[name] = Experiment(name, title, tuple(knobs), fn)
        return fn
    return register


def _load_all() -> None:
    for info in pkgutil.iter_modules(__path__):
        if info.name not in _SHARED and not info.name.startswith("_"):
            import_module(f"{__name__}.{info.name}")


def names() -> list[str]:
    _load_all()
    return sorted(REGISTRY)


def find(name: str) -> Experiment:
    _load_all()
    if name not in REGISTRY:
        raise InputError(name, f"no such experiment (known: {', '.join(sorted(REGISTRY)) or 'none'})")
    return REGISTRY[name]


def run(name: str, assignments: list[str], course) -> Outcome:
    """Run experiment ``name`` with ``--set`` assignments (["key=value", ...])."""
    exp = find(name)
    return exp.run(parse_settings(exp.name, exp.knobs, assignments), course)
