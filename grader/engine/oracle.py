"""The reference answers, where a reference answer is the point, and their recorded form.

Three things the grading of a lesson asks of the reference, each through this module:

- an **answer**: ``reference_oracle("lesson1").pages_for(17, 16)`` calls the reference
  solution of lesson 1;
- a **figure**: ``figures("lesson2-oracle", case.digest, compute)`` is a number a run of
  the reference's decisions gives (the oracle ledger's good requests on a workload);
- the **public cases** of a lesson (grader.engine.pipeline), which for lessons 5 and 6
  are themselves made of the reference's runs.

In the course these are computed (figures and public cases once per process and kept on
disk by grader.engine.memo). The learner edition (``grader release``) ships no reference
solution: there every answer, figure and public case comes from ``grader/expectations/``,
recorded when the release was built (``recording()``), so a lesson module asks the same
questions in both editions and gets the same values. An instructor may publish the
solutions of lessons whose deadline has passed (``grader release --publish-solutions``);
their answers are then computed in the edition too.

Nothing of the reference is imported at module level: the worker, the course machinery
and the lessons import this module in both editions.
"""
from __future__ import annotations

from contextlib import contextmanager
from functools import lru_cache
from importlib import import_module
from pathlib import Path
from typing import Any, Callable, Iterator, Mapping, TypeVar

from grader.engine import codec
from grader.engine.cases import digest_of
from grader.engine.errors import InputError

EXPECTATIONS = Path(__file__).resolve().parents[1] / "expectations"
TREE = Path(__file__).resolve().parents[2]      # the folder holding grader/ and reference/
T = TypeVar("T")

_recording: dict[str, dict[str, Any]] | None = None
_tables: dict[str, dict[str, Any]] = {}


class OracleMissing(InputError):
    """The learner edition was asked something its recorded expectations do not hold: a
    person's request this edition cannot answer (one line, exit 2), never a crash."""

    def __init__(self, message: str):
        super().__init__("learner edition", message)


@lru_cache(maxsize=None)
def present(module: str) -> bool:
    """Whether a module of the course is in this edition: a file of its own tree. An import
    system asked instead would also find another checkout's module, as when the course is
    installed in the environment a learner edition is tried in (an editable install answers
    for every module under ``reference``), and an edition would then run with the course's
    solutions."""
    base = TREE.joinpath(*module.split("."))
    return base.with_suffix(".py").is_file() or (base / "__init__.py").is_file()


def solution(lesson: str) -> str:
    return f"reference.solutions.{lesson}"


def has_solution(lesson: str) -> bool:
    """Whether the reference solution of ``lesson`` is here (the course, or published)."""
    return present(solution(lesson))


def reference_solution(lesson: str):
    """The reference solution's module (instructor-side grading, the reference core)."""
    if not has_solution(lesson):
        raise OracleMissing(f"the reference solution of {lesson} is not in this edition")
    return _own(import_module(solution(lesson)))


@lru_cache(maxsize=None)
def _own(module):
    if not Path(module.__file__).resolve().is_relative_to(TREE):
        # ``reference`` itself came from another checkout: its answers are not this edition's.
        raise OracleMissing(f"{module.__name__} was imported from {module.__file__}, outside this "
                            f"edition ({TREE})")
    return module


_solution = reference_solution


# ---- the recorded form ---------------------------------------------------------------------
def _table(namespace: str) -> dict[str, Any]:
    if namespace not in _tables:
        path = EXPECTATIONS / f"{namespace}.json"
        try:
            _tables[namespace] = codec.loads(path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            _tables[namespace] = {}
    return _tables[namespace]


def _record(namespace: str, key: str, value: Any) -> None:
    if _recording is not None:
        _recording.setdefault(namespace, {})[key] = value


def recorded(namespace: str, key: str, compute: Callable[[], T], *, available: bool,
             record: bool = True) -> T:
    """compute() where the reference is ``available``, else the value recorded for key.
    ``record=False``: a value the learner edition must not hold (it is an answer); there it
    is missing, like any value that was not recorded."""
    if available:
        value = compute()
        if record:
            _record(namespace, key, value)
        return value
    table = _table(namespace)
    if key not in table:
        raise OracleMissing(f"{namespace}: this edition holds no recorded value for {key}; only "
                            f"the public cases were recorded when it was built")
    return table[key]


@contextmanager
def recording() -> Iterator[dict[str, dict[str, Any]]]:
    """Record every answer, figure and public case given inside the block:
    {namespace: {key: value}}, what ``grader release`` writes to grader/expectations/."""
    global _recording
    previous, _recording = _recording, {}
    try:
        yield _recording
    finally:
        _recording = previous


def write_expectations(folder: Path, tables: Mapping[str, Mapping[str, Any]]) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    for namespace, table in tables.items():
        (folder / f"{namespace}.json").write_text(codec.dumps(dict(table)), encoding="utf-8")


# ---- answers -------------------------------------------------------------------------------
class Oracle:
    """A reference solution's functions, called here or replayed from the record."""

    def __init__(self, lesson: str):
        self.lesson = lesson

    def __getattr__(self, function: str):
        if function.startswith("_"):
            raise AttributeError(function)
        namespace = f"answers-{self.lesson}"

        def call(*args, **kwargs):
            key = digest_of([function, list(args), sorted(kwargs.items())])
            return recorded(namespace, key, lambda: getattr(_solution(self.lesson), function)(*args, **kwargs),
                            available=has_solution(self.lesson))
        setattr(self, function, call)          # found by plain lookup from now on
        return call


def reference_oracle(lesson: str) -> Oracle:
    return Oracle(lesson)


# ---- figures -------------------------------------------------------------------------------
def figures(kind: str, key: str, compute: Callable[[], T], *, needs: tuple[str, ...],
            persist: bool, record: bool = True) -> T:
    """A figure the reference gives (an oracle run's numbers, the largest chunk that fits):
    computed where the modules it ``needs`` are here (kept on disk when ``persist``, which
    a hidden case never is), else read from the record (``record``: see ``recorded``)."""
    from grader.engine.memo import remember
    return recorded(f"figures-{kind}", key, lambda: remember(kind, key, compute, persist=persist),
                    available=all(present(m) for m in needs), record=record)


# ---- the reference as a policy --------------------------------------------------------------
LESSON_DECISIONS = {
    "lesson1": ("check_contract",),
    "lesson2": ("admit",),
    "lesson3": ("choose_chunk",),
    "lesson4": ("on_event", "prefix_key", "publishable"),
}


def reference_decisions(lesson: str) -> dict[str, Callable]:
    """The reference's decisions of one lesson, as policy fields."""
    module = _solution(lesson)
    return {name: getattr(module, name) for name in LESSON_DECISIONS[lesson]}


def reference_core():
    """Every decision the reference's (lessons 1 to 4): the correct core a sheet distorts."""
    from reference.baselines import baseline_policy
    core = baseline_policy()
    for lesson in LESSON_DECISIONS:
        core = core.with_(**reference_decisions(lesson))
    return core


def reference_policy(sheet: Mapping | None = None):
    """The reference core under a design sheet's knobs (the course's designs)."""
    from reference.knobs import with_knobs
    return with_knobs(reference_core(), sheet)


def lesson_policy(decisions: Mapping[str, Callable], sheet: Mapping | None = None):
    """A run about one lesson: its decisions beside the course baselines, under the knobs."""
    from reference.baselines import baseline_policy
    from reference.knobs import with_knobs
    return with_knobs(baseline_policy().with_(**decisions), sheet)
