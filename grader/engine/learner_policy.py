"""A learner's functions as worker decisions, called in the sandbox.

A run about a lesson puts the learner's functions of that lesson beside the course
baselines (grader.engine.oracle.lesson_policy). Every call crosses the process boundary;
every answer is validated before the worker sees it. A call that fails (raises, times out,
returns junk) becomes a PolicyError, which the worker treats as an invalid decision with
its safe fallback, and the failure is kept for feedback.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field, replace
from itertools import product

from grader.engine.checks import call_failure, invalid_answer
from grader.engine.validate import InvalidValue, read_answer
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
    answered: int = 0              # calls that gave a usable answer, all functions together

    def note(self, function: str, problem: str) -> None:
        self.failures[function] = self.failures.get(function, 0) + 1
        self.first.setdefault(function, problem)

    def summary(self) -> str:
        return "; ".join(f"{f} failed on {n} calls (first: {self.first[f]})"
                         for f, n in sorted(self.failures.items()))


# A call that hung or ended its process, in the learner's own tools (experiments, sheet run):
# their budget is an hour, so a function that loops would cost every later call its whole
# call limit, and the command would run for that hour. Grades stop at their own budget.
# A call whose answer broke the wire's rules (``CallResult.stopped``: a tuple of a million
# pages, past the large-answer allowance) stops its process too, and every later call
# restarted it and loaded the file again: a prefix-ownership run of 30 requests took four
# minutes, of the default 300 forty.
GIVE_UP = ("timeout", "crashed")
NOT_ASKED_AGAIN = "; it is not asked again: the worker's fallback answers every later call"


def _remote(sandbox, function: str, log: CallLog, answered: list, gives_up: bool = False):
    """``answered``: when the previous learner call of this run returned (shared by the
    run's functions). ``gives_up``: after a call of GIVE_UP, every later call fails at once."""
    returns = RETURNS[function]
    budget = getattr(sandbox, "budget", None)
    stopped: list[str] = []          # why the function is no longer asked

    def call(*args):
        if stopped:
            log.note(function, stopped[0])
            raise PolicyError(function)
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
            problem = call_failure(function, result)
            if gives_up and (result.status in GIVE_UP or result.stopped):
                problem += NOT_ASKED_AGAIN
                stopped.append(problem)
            log.note(function, problem)
            raise PolicyError(function)
        try:
            value = read_answer(function, result.value, args, returns)
            log.answered += 1
            return _as_read(function, value)
        except InvalidValue as e:
            log.note(function, invalid_answer(function, e))
            raise PolicyError(function) from None
    return call


def _as_read(function: str, value):
    """The answer as the worker is to read it. A wait's or a reject's promise is never read
    (lesson 2's stub and README say so, and the validator lets any int through there), yet
    the worker refuses an admission whose promise is no page count whatever its decision:
    a ledger that waited with its shortfall as a negative promise had every wait taken for
    no decision, and its requests rejected, in the runs alone."""
    if function == "admit" and value.decision != "admit" and value.reserve_pages != 0:
        return replace(value, reserve_pages=0)
    return value


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
            table[key] = read_answer("on_event", result.value, key, Transition)
            log.answered += 1
        except InvalidValue as e:
            log.note("on_event", invalid_answer(f"on_event{key}", e))
    return _answering(table)


def _answering(table: dict):
    """on_event answered from a table read in full; an entry with no usable answer fails."""
    def on_event(state, event, in_flight):
        if (state, event, in_flight) not in table:
            raise PolicyError("on_event")
        return table[state, event, in_flight]
    return on_event


def table_read(entries, log: CallLog):
    """on_event answered from a reading the grade already made, [(entry, Transition or None,
    why not)]: the entries with no usable answer fail as _table's do."""
    table = {}
    for key, value, problem in entries:
        if value is None:
            # ask() words an invalid answer as "on_event returned ..."; a run names the entry.
            log.note("on_event", problem.replace("on_event returned", f"on_event{key} returned", 1))
            continue
        table[key] = value
        log.answered += 1
    return _answering(table)


def learner_decisions(sandbox, functions: tuple[str, ...], log: CallLog, gives_up: bool = False) -> dict:
    """Policy fields for ``functions``, answered by the learner's code in ``sandbox``
    (``gives_up``: a function whose call hangs or crashes is not asked again)."""
    answered = [None]
    return {name: _table(sandbox, log) if name == "on_event" else _remote(sandbox, name, log, answered, gives_up)
            for name in functions}
