"""Which functions an experiment plugs in, and the reference's rows beside them.

An experiment is about one lesson: prefill-deadline about lesson 3's ``choose_chunk``,
prefix-ownership about lesson 4's ``on_event``, ``prefix_key`` and ``publishable``,
goodput about lesson 5's ``qualify`` and ``decide_release``. It measures a *plugged-in
core* and the course's strawmen, which are knob distortions of that same core
(reference.knobs: fixed chunks, a key without scope, ...). The core is

- in the course, without ``--submission``: the reference's functions (the instructor's view);
- with ``--submission FILE``, and always in the learner edition (default there: the
  learner's assignments/lessonN/exercise.py): the file's functions, each call in a sandbox
  (grader.course.core.open_lesson), beside the course baselines for the other lessons'
  decisions. Goodput's designs need every decision: in the course they run on the
  reference's lessons 1 to 4, in the edition on the learner's own (own_core: baselines
  where a lesson is not written), both qualified and decided by the file's lesson 5.

Beside a learner's rows, the reference's: computed in the course; in the learner edition
read from the record made when it was built (grader/instructor/release.py runs every
experiment at its default settings inside grader.engine.oracle.recording()). At other
settings, or on edited course files, the edition says the reference's rows are not
available rather than guessing.
"""
from __future__ import annotations

from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterator, Mapping, Optional

from grader.course.core import Core, open_lesson, own_core
from grader.course.core import reference as reference_core
# How the reference's rows are named beside a learner's; the plots draw a series so named
# as the reference's twin of the learner's, so the name is kept in one place, there.
from grader.course.experiments.common import (CALLS_FAILED, NO_REFERENCE_ROWS, NO_USABLE_ANSWER,
                                              NOT_IMPLEMENTED, PARTLY_BASELINE)
from grader.course.plots import REFERENCE_PREFIX  # noqa: F401
from grader.engine.cases import digest_of
from grader.engine.errors import InputError
from grader.engine.files import NOT_REGULAR
from grader.engine.oracle import (LESSON_DECISIONS, OracleMissing, has_solution, recorded,
                                  reference_decisions)
from grader.engine.oracle import reference_core as reference_decisions_core

NEEDS = {"lesson3": ("lesson3",), "lesson4": ("lesson4",),
         "lesson5": ("lesson1", "lesson2", "lesson3", "lesson4", "lesson5")}
FUNCTIONS = {**{lesson: names for lesson, names in LESSON_DECISIONS.items()},
             "lesson5": ("qualify", "decide_release")}
Side = dict                          # {"rows": [...], "extras": {...}, "notes": [...]}: plain data


@dataclass(frozen=True)
class Plugged:
    lesson: str
    core: Optional[Core]        # None: none of the lesson's functions is written yet
    source: str                 # "the reference", or the file the functions come from
    reference: bool             # the core is the reference's own
    notes: tuple[str, ...] = () # what falls back to a baseline
    log: Any = None             # the CallLog of the file's sandboxed decisions
    error: str = ""             # why the file did not load ("" when it did)
    absent: tuple[str, ...] = ()  # the lesson's functions the file does not define at all
    unconfined: str = ""        # what the file's sandbox lacks to confine it ("" when confined)


def _lesson_core(lesson: str, identity: str, decisions: Mapping[str, Callable], note: str = "") -> Core:
    from reference.baselines import baseline_policy
    return Core(identity, baseline_policy().with_(**decisions), None, None, note)


def reference_of(lesson: str) -> Core:
    """The reference's functions of ``lesson`` beside the course baselines (lesson 5: the
    reference's whole core and gate)."""
    if lesson == "lesson5":
        return reference_core()
    return _lesson_core(lesson, f"reference-{lesson}", reference_decisions(lesson))


@contextmanager
def plugged(course, lesson: str, submission: str | None = None) -> Iterator[Plugged]:
    """The core an experiment about ``lesson`` runs, for as long as the block runs."""
    if submission is None and all(has_solution(n) for n in NEEDS[lesson]):
        yield Plugged(lesson, reference_of(lesson), "the reference", True)
        return
    if not course.assignment(lesson).is_dir():
        # An edition built with --lessons: the experiment's lesson, its exercise and its
        # public workloads are not here.
        raise InputError(lesson, "not in this edition (it holds only some lessons): this experiment "
                                 f"is about {lesson}")
    path = Path(submission) if submission else course.assignment(lesson) / "exercise.py"
    if not path.is_file():
        found = ("is a folder, not a file" if path.is_dir() else
                 f"{NOT_REGULAR}: not read" if path.exists() else "no such file")
        raise InputError(str(path), f"{found} (--submission: your exercise file of "
                                    f"{lesson}, a .py or .ipynb)")
    with ExitStack() as stack:
        if lesson == "lesson5":
            if all(has_solution(n) for n in NEEDS[lesson][:-1]):
                mine = open_lesson(stack, lesson, path)
                core = Core(f"reference-decisions+{mine.digest}", reference_decisions_core(), *mine.gate,
                            note=f"the reference's lessons 1 to 4, {path}'s lesson 5") if mine.gate else None
                notes, error, lacks = ((mine.note,) if mine.note else ()), mine.error, mine.unconfined
            else:
                own = stack.enter_context(own_core(course, {lesson: path}))
                core = own if own.qualify is not None else None
                # own.note names each of lessons 1 to 5 that falls back, lesson 5's
                # decide_release among them.
                notes, error, lacks = (f"lessons 1 to 5: {own.note}",), "", own.unconfined
            yield Plugged(lesson, core, str(path), False, notes, error=error, unconfined=lacks)
            return
        mine = open_lesson(stack, lesson, path)
        core = _lesson_core(lesson, f"own-{lesson}:{mine.digest}", mine.decisions) if mine.decisions else None
        yield Plugged(lesson, core, str(path), False, (mine.note,) if mine.note else (), mine.log, mine.error,
                      mine.absent, mine.unconfined)


def _inputs(course, lesson: str) -> dict[str, str]:
    """The course files an experiment about ``lesson`` reads: a recorded side holds for them only.
    The models and workers, and the lesson's public workloads; never the learner's design
    sheet beside them, which every lesson asks them to fill in and no experiment reads (keyed
    by it, the reference's rows vanished from an edition the moment a learner wrote in it)."""
    root = course.root / "assignments"
    files = [root / "worker.yaml"] + sorted(p for p in (root / lesson / "public").rglob("*") if p.is_file())
    return {str(p.relative_to(root)): p.read_text(encoding="utf-8") for p in files}


def _no_progress(runs: int = 1) -> None:
    pass


@dataclass(frozen=True)
class Sides:
    """An experiment's two sides: the plugged-in core's, and the reference's beside it."""
    experiment: str
    settings: Mapping[str, Any]
    course: Any
    plugged: Plugged
    # Called with the worker runs each measure just made (grader experiment shows a count
    # of them when a run takes more than a few seconds).
    ran: Callable[[int], None] = _no_progress

    def _reference(self, measure: Callable[[Core], Side]) -> Optional[Side]:
        lesson = self.plugged.lesson
        key = digest_of([self.experiment, dict(self.settings), _inputs(self.course, lesson)])
        # Computed afresh where the solutions are (seconds; never kept on disk, so a run made
        # under other conditions cannot stand in for it), else read from the record.
        try:
            return recorded(f"figures-experiment-{self.experiment}", key, lambda: measure(reference_of(lesson)),
                            available=all(has_solution(n) for n in NEEDS[lesson]))
        except OracleMissing:
            return None

    def mine(self, measure: Callable[[Core], Side]) -> Optional[Side]:
        """``measure`` of the plugged-in core; None when its functions are not written."""
        if self.plugged.core is None:
            return None
        return self._reference(measure) if self.plugged.reference else measure(self.plugged.core)

    def reference(self, measure: Callable[[Core], Side]) -> Optional[Side]:
        """The reference's side beside a learner's (None beside the reference itself, or
        where this edition holds no record of it for these settings)."""
        return None if self.plugged.reference else self._reference(measure)

    def both(self, measure: Callable[[Core], Side], key: str, labels: tuple[str, ...]) -> "Both":
        """The plugged-in core's rows (or rows that say it is not implemented, one per label)
        and the reference's beside them, their extras and notes merged, the reference's
        named as the reference's."""
        mine, ref = self.mine(measure), self.reference(measure)
        if mine and self.answered_nothing():
            # Every figure of these rows is the worker's fallback's, not the learner's rule:
            # shown, they read as a rule that never missed its budget.
            mine = None
        rows = (mine["rows"] if mine else self.not_implemented(key, labels)) + reference_rows(ref, key)
        extras: dict[str, dict] = {}
        for prefix, side in (("", mine), (REFERENCE_PREFIX, ref)):
            for name, table in (side or {}).get("extras", {}).items():
                extras.setdefault(name, {}).update({prefix + k: v for k, v in table.items()})
        notes = (mine or {}).get("notes", []) + [REFERENCE_PREFIX + n for n in (ref or {}).get("notes", [])]
        return Both(rows, extras, notes, self.notes(labels, ref), mine is not None, ref is not None)

    def answered_nothing(self) -> bool:
        """The plugged-in functions were called and not one call gave a usable answer."""
        log = self.plugged.log
        return log is not None and bool(log.failures) and not log.answered

    def not_implemented(self, key: str, labels: tuple[str, ...]) -> list[dict]:
        """Rows that say the plugged-in functions are not written (or gave no usable answer):
        only their label is filled."""
        word = "no usable answer" if self.answered_nothing() else "not implemented"
        return [{key: f"{label}: {word}", "missing": True} for label in labels]

    def notes(self, labels: tuple[str, ...], reference: Optional[Side]) -> list[str]:
        """Where each side's rows come from, in words."""
        p = self.plugged
        if p.reference:
            return []
        names = ", ".join(FUNCTIONS[p.lesson])
        rows = ", ".join(labels)
        if p.core is None:
            why = (f"{p.source} did not load ({p.error})" if p.error else
                   f"{p.source} defines no {', '.join(p.absent)}: is it your {p.lesson} exercise file?"
                   if p.absent else
                   f"{names} of {p.source} not written yet (the stub raises NotImplementedError)")
            return [f"rows {rows}{NOT_IMPLEMENTED}{why}"] + self._beside(reference)
        if self.answered_nothing():
            return [f"rows {rows}: your {names} from {p.source} {NO_USABLE_ANSWER}, so no row is "
                    f"yours (first: {'; '.join(p.log.first.values())})", *p.notes] + self._beside(reference)
        # Lesson 4 partly written: the baseline's functions shape these rows too. Lesson 5's
        # note names lessons 1 to 4, whose baselines every design of goodput runs on alike.
        partly = () if p.lesson == "lesson5" else tuple(PARTLY_BASELINE + n for n in p.notes)
        out = [f"rows {rows}: your {names} from {p.source}", *(partly or p.notes)]
        if p.log is not None and p.log.failures:
            out.append(f"{CALLS_FAILED} (the worker's safe fallback answered "
                       f"them): {p.log.summary()}")
        return out + self._beside(reference)

    def _beside(self, reference: Optional[Side]) -> list[str]:
        if reference is not None:
            return [f"rows {REFERENCE_PREFIX}...: the reference's functions"
                    + ("" if has_solution(self.plugged.lesson) else ", recorded when this edition was built")]
        return [f"{NO_REFERENCE_ROWS} for these settings: this edition recorded "
                "them at the experiment's default settings only"]


@dataclass(frozen=True)
class Both:
    rows: list[dict]                # the plugged-in core's (or not implemented), then the reference's
    extras: dict[str, dict]         # what each side's plot needs, by row label
    notes: list[str]                # what each side's runs say (a truncation, a decision's reasons)
    sources: list[str]              # where each side's rows come from, in words
    mine: bool                      # the plugged-in core's rows are there
    reference: bool                 # the reference's rows are there beside a learner's


def reference_rows(side: Optional[Side], key: str) -> list[dict]:
    """The reference's rows, named as the reference's."""
    return [{**r, key: REFERENCE_PREFIX + r[key], "reference": True} for r in (side or {}).get("rows", ())]
