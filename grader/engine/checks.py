"""Checks: the registered functions a rubric criterion names, and what they measure.

A check gets a CheckContext (the sandboxed submission, or for a lesson whose submission is
a folder of data the parsed folder, and the cases of this run) and
the criterion's params, and returns a Measure: a value in [0, 1] that the criterion's
credit rule turns into points, one feedback line a learner can act on, and the
evidence (case names or digests, request ids) behind it.
"""
from __future__ import annotations

import re

from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Sequence

from grader.engine.cases import Case
from grader.engine.validate import InvalidValue, read_answer

REGISTRY: dict[str, Callable] = {}


def check(name: str, params: dict[str, tuple[float, float]] | None = None):
    """Register a check under ``name``. ``params``: each parameter a rubric may give it,
    with its (low, high) bounds; the rubric loader refuses any other parameter, or a value
    out of bounds, naming its place in the rubric (a misspelt `shar: 0.5` would otherwise
    grade with the default and say nothing)."""
    def register(fn):
        if name in REGISTRY:
            raise ValueError(f"check {name!r} registered twice")
        fn.params = dict(params or {})
        REGISTRY[name] = fn
        return fn
    return register


@dataclass(frozen=True)
class Measure:
    value: float                       # 0..1: the share of the property that holds
    feedback: str
    evidence: tuple[str, ...] = ()
    checked: bool = True               # False: no evidence here (see not_checked_here)

    def __post_init__(self):
        # A NaN (numpy's mean of nothing) compares false both ways, and a linear credit would
        # then pay in full: a measure outside 0..1 is a check's bug, stopped here, not graded.
        if not 0.0 <= self.value <= 1.0:
            raise ValueError(f"a measure is a share from 0 to 1, not {self.value!r}")


def not_checked_here(why: str) -> Measure:
    """A criterion this edition cannot check: the learner edition lacks what its evidence
    needs (worker runs with the reference's other decisions). It scores nothing and counts
    in neither total, so the public check neither fails nor passes it."""
    return Measure(0.0, why, checked=False)


@dataclass
class CheckContext:
    sandbox: Any                       # grader.engine.sandbox.session.Sandbox of this submission
    cases: Sequence[Case]
    course: Any = None
    memo: dict = field(default_factory=dict)   # shared by the checks of one run
    submission: Any = None             # a folder submission as its lesson parsed it (sandbox is None)
    # A grade's child that never receives a hidden input: ask() sends the public cases
    # there, so the `sandbox` of a grade gets hidden cases only (None: one child for all).
    public_sandbox: Any = None
    # One criterion is measured twice in a grade (its public feedback, then its score):
    # the first measure records each public call's result here, the second replays them
    # in the same order, so a public case is never asked twice for one criterion.
    answered: dict | None = None

    def family(self, name: str) -> list[Case]:
        return [c for c in self.cases if c.family == name]

    def restart(self) -> None:
        """Fresh processes for what comes next (new module state, new str hash seed)."""
        for box in {id(b): b for b in (self.sandbox, self.public_sandbox) if b is not None}.values():
            box.restart()


def call_failure(function: str, result) -> str:
    """One line on why a call gave no usable value."""
    detail = (result.detail or "").strip()
    if result.stub:
        return f"{function} is not implemented yet (it raises NotImplementedError)"
    if result.status == "timeout" and "time budget" in detail:
        # Stopped by the whole submission's budget, not by its own call's limit (the session
        # says which): a function slow on every call ends here, and is no endless loop.
        return (f"{function} was stopped: the submission used up its time budget during this call; "
                "every call counts against it, so a function that is slow on each call spends it as "
                "an endless loop would")
    said = f"{function}() ended the process"
    if result.status == "crashed" and detail.startswith(said):
        # The sandbox's own sentence names the call already: "f ended the process: f() ended
        # the process running x.py: ..." said it twice.
        return f"{function} ended the process{detail[len(said):]}"
    limit = re.search(r"within (\S+ s)\b", detail) if result.status == "timeout" else None
    if limit:
        # A call's own limit: a loop, or work a large input makes too slow (a goodput that
        # calls a slow qualify per record was only asked whether it looped).
        return (f"{function} did not return in time ({limit[1]} a call): an endless loop, or "
                "work that grows too fast with its input?")
    return {
        "raised": f"{function} raised {detail}",
        "missing": f"{function} is not defined in your file",
        "bad": f"{function} returned something unusable: {detail}",
        "timeout": f"{function} did not return in time (an endless loop?)",
        "crashed": f"{function} ended the process: {detail}",
        "unavailable": f"{function} was not called: the submission used up its time budget",
    }.get(result.status, f"{function}: {result.status} {detail}")


def invalid_answer(function: str, error: InvalidValue) -> str:
    """'admit returned int, expected Admission' or 'admit returned Admission.reserve_pages: ...'."""
    text = str(error)
    return f"{function} {text}" if text.startswith("returned ") else f"{function} returned {text}"


@dataclass(frozen=True)
class Answer:
    """A probe's outcome: the value (when usable) or why there is none."""
    case: Case
    value: Any = None
    problem: str = ""


def ask(ctx: CheckContext, function: str, cases: Sequence[Case], args: Callable[[Case], tuple],
        returns: Any) -> list[Answer]:
    """Call ``function`` once per case in the sandbox; validate every value before use."""
    sent = [args(c) for c in cases]
    results = _call(ctx, function, cases, sent)
    answers = []
    for case, res, arg in zip(cases, results, sent):
        if res.status != "ok":
            answers.append(Answer(case, problem=call_failure(function, res)))
            continue
        try:
            answers.append(Answer(case, value=read_answer(function, res.value, arg, returns)))
        except InvalidValue as e:
            answers.append(Answer(case, problem=invalid_answer(function, e)))
    return answers


def _call(ctx: CheckContext, function: str, cases: Sequence[Case], sent: list) -> list:
    """The sandbox's results for the cases, in order. In a grade, public cases go to the
    public child (or are replayed from this criterion's first measure) and hidden ones to
    the grade's own child: each child hears only what it may."""
    public, record = ctx.public_sandbox, ctx.answered
    if public is None or (public is ctx.sandbox and record is None):
        return ctx.sandbox.call_many(function, sent)
    results: list = [None] * len(cases)
    ask_public = []
    for i, case in enumerate(cases):
        queue = record.get((function, case.name)) if record is not None else None
        if case.visibility != "public":
            continue
        if public is not ctx.sandbox and queue:          # the second measure: replay
            results[i] = queue.pop(0)
        else:
            ask_public.append(i)
    hidden = [i for i, c in enumerate(cases) if c.visibility != "public"]
    for box, indices in ((public, ask_public), (ctx.sandbox, hidden)):
        if indices:
            for i, r in zip(indices, box.call_many(function, [sent[i] for i in indices])):
                results[i] = r
    if record is not None and public is ctx.sandbox:     # the first measure: record
        for i in ask_public:
            record.setdefault((function, cases[i].name), []).append(results[i])
    return results


def ask_once(ctx: CheckContext, key: str, function: str, cases: Sequence[Case], args: Callable[[Case], tuple],
             returns: Any) -> list[Answer]:
    """Each case asked once per run, whichever criterion needs it first (memo by case name)."""
    memo = ctx.memo.setdefault(key, {})
    todo = [c for c in cases if c.name not in memo]
    if todo:
        memo.update((a.case.name, a) for a in ask(ctx, function, todo, args, returns))
    return [memo[c.name] for c in cases]


def not_implemented(answers: Sequence[Answer]) -> str:
    """The stub's one problem when every answer is its NotImplementedError, else "": a
    criterion then says only that, instead of judging what was never written."""
    problems = {a.problem for a in answers}
    if answers and len(problems) == 1 and "not implemented" in next(iter(problems)):
        return next(iter(problems))
    return ""


def grade_answers(answers: Iterable[Answer], judge: Callable[[Case, Any], str],
                  noun: str = "probes", *, by: Callable[[Case], Any] | None = None,
                  within: Callable[[Case], Any] | None = None, worst: bool = False) -> Measure:
    """Share of answers the judge accepts ("" = right, else why it is wrong).

    A judge may also return (credit, why) for partial credit on one answer: credit in
    [0, 1), why saying what is short (a chunk at 80% of the largest that fits).

    ``by`` sorts the cases into kinds (the right answer's verdict, the side of a decision)
    that weigh the same whatever their counts: the value is the mean of each kind's share,
    or with ``worst`` the lowest. A constant answer is right on one kind at most, so it can
    no longer reach a share by being right where most cases happen to agree with it.

    ``within`` sorts each kind's cases further (the clause of a rule that decides them): a
    kind's share is then the mean of its clauses' shares, so a clause with few cases still
    weighs as much as its neighbours, and the kinds keep their weights."""
    answers = list(answers)
    wrong: list[tuple[Case, str]] = []
    lost: dict[Any, float] = {}
    count: dict[Any, int] = {}
    for a in answers:
        kind = (by(a.case) if by else None, within(a.case) if within else None)
        count[kind] = count.get(kind, 0) + 1
        verdict = a.problem or judge(a.case, a.value)
        credit, why = verdict if isinstance(verdict, tuple) else (0.0, verdict)
        if why:
            wrong.append((a.case, why))
            lost[kind] = lost.get(kind, 0.0) + 1.0 - min(1.0, max(0.0, credit))
    n = len(answers)
    if n == 0:
        return Measure(0.0, f"no {noun} to grade")
    evidence = tuple(c.cite for c, _ in wrong[:20])
    if not wrong:
        # "1 of 1", as the wrong side says it: the nouns are plural phrases ("probes whose
        # need fits"), and "all 1 probes" reads as a slip.
        return Measure(1.0, f"all {n} {noun} right" if n > 1 else f"1 of 1 {noun} right")
    problems = {why for _, why in wrong}
    if len(problems) == 1 and "not implemented" in next(iter(problems)):
        return Measure(0.0, next(iter(problems)), evidence)
    clauses: dict[Any, list[float]] = {}
    for k in count:
        clauses.setdefault(k[0], []).append((count[k] - lost.get(k, 0.0)) / count[k])
    shares = [sum(v) / len(v) for v in clauses.values()]
    value = min(shares) if worst else sum(shares) / len(shares)
    case, why = wrong[0]
    return Measure(value, f"{len(wrong)} of {n} {noun} wrong; first, {case.label or case.name}: {why}",
                   evidence)


def constant_answer(answers: Sequence[Answer], function: str) -> str:
    """A line saying ``function`` answered every input alike, or "" when its answers vary.

    Some properties a constant has for free: one key for every input is deterministic, one
    chunk for every probe is as page-aligned as its size. A criterion about such a property
    earns nothing from an answer that ignores its inputs."""
    values = [a.value for a in answers if not a.problem]
    inputs = {a.case.name for a in answers}
    if len(inputs) < 3 or len(values) < len(answers) or len({repr(v) for v in values}) > 1:
        return ""
    return (f"{function} gave the same answer, {values[0]!r}, to all {len(inputs)} inputs: an answer "
            "that ignores its inputs shows none of the property")
