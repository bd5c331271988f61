"""A learner's functions as worker decisions, called in the sandbox.

A run about a lesson puts the learner's functions of that lesson beside the course
baselines (grader.engine.oracle.lesson_policy). Every call crosses the process boundary;
every answer is validated before the worker sees it. A call that fails (raises, times out,
returns junk) becomes a PolicyError, which the worker treats as an invalid decision with
its safe fallback, and the failure is kept for feedback.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from itertools import product

from grader.engine.checks import call_failure, invalid_answer
from grader.engine.validate import InvalidValue, coerce, within_domain
from reference.shapes import (EVENTS, STATES, Admission, ChunkPlan, Transition, Verdict)
from reference.worker import PolicyError

RETURNS = {
    "check_contract": Verdict,
    "admit": Admission,
    "choose_chunk": ChunkPlan,
    "on_event": Transition,
    "prefix_key": str,
    "publishable": tuple[int, ...],
}


@dataclass
class CallLog:
    """Failed calls per function: how many, and the first one in words."""
    failures: dict[str, int] = field(default_factory=dict)
    first: dict[str, str] = field(default_factory=dict)

    def note(self, function: str, problem: str) -> None:
        self.failures[function] = self.failures.get(function, 0) + 1
        self.first.setdefault(function, problem)

    def summary(self) -> str:
        return "; ".join(f"{f} failed on {n} calls (first: {self.first[f]})"
                         for f, n in sorted(self.failures.items()))


def _remote(sandbox, function: str, log: CallLog, answered: list):
    """``answered``: when the previous learner call of this run returned (shared by the
    run's functions)."""
    returns = RETURNS[function]
    budget = getattr(sandbox, "budget", None)

    def call(*args):
        # The worker's time between two of the learner's decisions is spent on this
        # submission's answers: it comes out of the submission's budget.
        now = time.monotonic()
        if answered[0] is not None and budget is not None:
            budget.charge(now - answered[0])
        try:
            return _answer(sandbox.call(function, *args), args)
        finally:
            answered[0] = time.monotonic()

    def _answer(result, args):
        if result.status != "ok":
            log.note(function, call_failure(function, result))
            raise PolicyError(function)
        try:
            within_domain(function, result.value, args)
            value = coerce(result.value, returns)
            return value
        except InvalidValue as e:
            log.note(function, invalid_answer(function, e))
            raise PolicyError(function) from None
    return call


def _table(sandbox, log: CallLog):
    """on_event is a table: read all of it in one batch, then answer from it."""
    keys = list(product(STATES, EVENTS, (False, True)))
    results = sandbox.call_many("on_event", keys)
    table = {}
    for key, result in zip(keys, results):
        if result.status != "ok":
            log.note("on_event", call_failure("on_event", result))
            continue
        try:
            within_domain("on_event", result.value, key)
            table[key] = coerce(result.value, Transition)
        except InvalidValue as e:
            log.note("on_event", invalid_answer(f"on_event{key}", e))

    def on_event(state, event, in_flight):
        if (state, event, in_flight) not in table:
            raise PolicyError("on_event")
        return table[state, event, in_flight]
    return on_event


def learner_decisions(sandbox, functions: tuple[str, ...], log: CallLog) -> dict:
    """Policy fields for ``functions``, answered by the learner's code in ``sandbox``."""
    answered = [None]
    return {name: _table(sandbox, log) if name == "on_event" else _remote(sandbox, name, log, answered)
            for name in functions}
