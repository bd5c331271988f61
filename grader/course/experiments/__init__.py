"""The course's experiments: run the worker across one constraint, print a table, plot it.

An experiment is a module in this package that registers a function with
``@experiment(name, title=..., knobs=..., lesson=...)``. The function gets the settings
(every knob, with the user's ``--set key=value`` applied), the course and the experiment's
``Sides`` (grader.course.experiments.plugged: the lesson's functions it plugs in, the
reference's or a learner's, and the reference's rows beside a learner's), and returns an
``Outcome`` (grader.course.experiments.common): a table and, optionally, a plot. Modules are
found by listing the package, so adding an experiment is adding one file.

    grader experiment prefill-deadline --set budget=0.05 --plot deadline.png
    grader experiment prefill-deadline --submission assignments/lesson3/exercise.py
"""
from __future__ import annotations

import pkgutil
import textwrap
from dataclasses import dataclass, replace
from importlib import import_module
from typing import Callable, Sequence

from grader.course.experiments.common import Knob, Outcome, parse_settings
from grader.engine.errors import InputError

__all__ = ["Experiment", "describe", "experiment", "find", "names", "record", "run"]


@dataclass(frozen=True)
class Experiment:
    name: str
    title: str
    knobs: tuple[Knob, ...]
    run: Callable            # (settings: dict, course, sides: Sides) -> Outcome
    lesson: str              # the lesson whose functions it plugs in


REGISTRY: dict[str, Experiment] = {}
PROGRESS_AFTER_S = 3.0      # an experiment's count of runs appears once it has run this long
_SHARED = {"common", "plugged"}          # modules of the package that are machinery, not experiments


def experiment(name: str, *, title: str, knobs: tuple[Knob, ...], lesson: str):
    def register(fn):
        if name in REGISTRY:
            raise ValueError(f"experiment {name!r} registered twice")
        # Every number an experiment takes is bounded both ways: past a size's bound a typo
        # runs for hours, and past a cost's or a time's (per_token=1e300) the worker's
        # arithmetic overflowed into a traceback (docs/experiments.md, "Bounds").
        open_ended = [k.name for k in knobs if not k.bounded()]
        if open_ended:
            raise ValueError(f"experiment {name!r}: settings without both bounds: {', '.join(open_ended)}")
        REGISTRY[name] = Experiment(name, title, tuple(knobs), fn, lesson)
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


def describe(held: Sequence[str] | None = None) -> str:
    """Every experiment and its knobs (``--set KEY=VALUE``): meaning, default, bounds. With
    ``held`` (the lessons of this copy of the course), an experiment about a lesson it does
    not hold says so: an edition of lessons 1 and 2 listed three experiments, none of which
    it could run."""
    _load_all()
    lines = ["experiments and their settings (--set KEY=VALUE):"]
    for name in sorted(REGISTRY):
        exp = REGISTRY[name]
        absent = held is not None and exp.lesson not in held
        lines += ["", f"  {name} ({exp.lesson}{', not in this edition' if absent else ''}): {exp.title}"]
        for k in exp.knobs:
            lines += textwrap.wrap(f"{k.name} (default {k.shown_default()}): {k.help}{k.bounds()}",
                                   width=96, initial_indent="    ", subsequent_indent="        ")
    return "\n".join(lines)


def run(name: str, assignments: list[str], course, submission: str | None = None,
        progress: bool = False) -> Outcome:
    """Run experiment ``name`` with ``--set`` assignments (["key=value", ...]) on the
    functions of ``submission`` (default: the reference in the course, the learner's
    exercise file in the learner edition). ``progress``: once the runs have taken a few
    seconds, a count of them on stderr, moving every second (large settings take minutes)."""
    from grader.course.core import unconfined_note
    from grader.course.experiments.plugged import Sides, plugged
    from grader.engine.progress import Progress
    exp = find(name)
    settings = parse_settings(exp.name, exp.knobs, assignments)
    bar = Progress(None, name, enabled=progress, heartbeat_s=1.0, delay_s=PROGRESS_AFTER_S, unit="worker runs")
    try:
        with plugged(course, exp.lesson, submission) as chosen:
            outcome = exp.run(settings, course, Sides(exp.name, settings, course, chosen, ran=bar.advance))
        if chosen.unconfined:
            outcome = replace(outcome, notes=(unconfined_note(chosen.unconfined), *outcome.notes))
        return outcome
    finally:
        bar.finish()


def record(course, lessons: tuple[str, ...]) -> list[str]:
    """Run every experiment about one of ``lessons`` at its defaults on the reference: inside
    grader.engine.oracle.recording(), what the learner edition shows beside a learner's rows."""
    done = []
    for name in names():
        if REGISTRY[name].lesson in lessons:
            run(name, [], course)
            done.append(name)
    return done

