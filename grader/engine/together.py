"""The worker runs of one measure, made together: their learner calls share round trips.

A run asks the learner one decision at a time, and each answer shapes the next question,
so a run alone crosses to the sandbox child once per call (about 100 us of both
processes' CPU each, thousands of times a grade). Runs of different scenarios do not
depend on each other: here each runs in a greenlet of its own and, when it calls the
learner, hands the call to the hub and waits. Once every unfinished run waits, the hub
sends their calls in one frame (Sandbox.call_each) and resumes each run with its own
answer, always in the same order, so the runs are as deterministic as alone.

Each run sees exactly the answers, and the learner exactly the calls, that the run would
have made alone: only the order in which the learner hears the runs' calls interleaves
(docs/learners.md: a lesson's functions are functions of their arguments). No call is
sent before its run asked it, so the child never holds a question early. The greenlets
are cooperative: nothing runs between two switches, and there are no threads.
"""
from __future__ import annotations

import time
from functools import partial

from greenlet import GreenletExit, greenlet


def memo_runs(ctx, case, make):
    """``ctx.memo[("run", case.name)]``, made by ``make(sandbox, case)`` on first use,
    together with the runs of every other case of its family this measure sees (a measure
    reads them all, in the lessons' checks; one that stops early makes the rest anyway).

    A public case's run is made in the grade's public child (``ctx.public_sandbox``), the
    one that never hears a hidden input, whichever measure needs it first: the memo is
    shared by a criterion's public feedback and its score, so a public run made in the
    hidden child could carry what that child was told (an echoed argument in an exception)
    into feedback handed back early. checks.ask routes a public case's call the same way."""
    key = ("run", case.name)
    if key not in ctx.memo:
        todo = [case] + [c for c in ctx.cases if c.family == case.family and c is not case
                         and ("run", c.name) not in ctx.memo]
        public = ctx.public_sandbox
        if public is None or public is ctx.sandbox:
            groups = ((ctx.sandbox, todo),)             # one child: every run shares its rounds
        else:
            groups = ((public, [c for c in todo if c.visibility == "public"]),
                      (ctx.sandbox, [c for c in todo if c.visibility != "public"]))
        for box, group in groups:
            for c, out in zip(group, together(box, [partial(make, case=c) for c in group])):
                ctx.memo["run", c.name] = out
    return ctx.memo[key]


def together(sandbox, jobs) -> list:
    """``[job(sandbox) for job in jobs]``, the jobs' learner calls answered a round at a
    time. A job's exception ends the others (their ``finally`` blocks run) and propagates."""
    if len(jobs) < 2:
        return [job(sandbox) for job in jobs]
    hub = greenlet.getcurrent()
    proxy = _Waiting(hub)
    runs = [greenlet(job) for job in jobs]
    results: list = [None] * len(jobs)
    waiting: dict[int, tuple] = {}      # run index -> what it asked: ("one" | "many", ...)

    def resume(i, value):
        asked = runs[i].switch(value) if runs[i] else runs[i].switch(proxy)
        if runs[i].dead:
            results[i] = asked
        else:
            waiting[i] = asked

    budget = getattr(sandbox, "budget", None)
    try:
        for i in range(len(runs)):
            resume(i, None)
        while waiting:
            asked = dict(waiting)
            waiting.clear()
            order = sorted(asked)
            for i in order:
                kind, fname, args = asked[i]
                if kind == "many":
                    asked[i] = sandbox.call_many(fname, args)
            ones = [i for i in order if asked[i][0] == "one"]
            for i, result in zip(ones, sandbox.call_each([asked[i][1:] for i in ones])):
                asked[i] = result
            # The worker's time between two rounds is spent on this submission's answers,
            # as between two calls of a run alone (learner_policy._remote).
            started = time.monotonic()
            for i in order:
                resume(i, asked[i])
            if budget is not None:
                budget.charge(time.monotonic() - started)
    finally:
        for run in runs:
            if run and not run.dead:
                run.throw(GreenletExit)
    return results


class _Waiting:
    """The sandbox as a run in a greenlet sees it: a call waits for the hub's next round.
    It has no budget: the hub charges the runs' time (learner_policy._remote reads one)."""

    def __init__(self, hub):
        self._hub = hub

    def call(self, fname, *args):
        return self._hub.switch(("one", fname, args))

    def call_many(self, fname, arg_tuples):
        return self._hub.switch(("many", fname, list(arg_tuples)))
