"""Lesson 4's worker runs: the learner's on_event, prefix_key and publishable in the worker.

The table and the probes predict; a run shows. On cancellation-heavy, prefix-sharing,
multi-scope scenarios (public: assignments/lesson4/public/*.scenario.yaml; hidden:
grader/instructor/families/lesson4.yaml) the worker records use-after-free, leaks, double
releases, cross-scope hits and poisoned publishes, and each cancelled request's record
gives its fence and release time. Every other decision of a run is the course baseline's
(reference.baselines). The oracle is the reference's three functions beside the same
baselines; its prefix hits are a figure, recorded in the learner edition.
"""
from __future__ import annotations

from dataclasses import dataclass
from functools import partial
from typing import Callable

from grader.engine.cases import Case
from grader.engine.checks import CheckContext, Measure, check
from grader.engine.learner_policy import CallLog, learner_decisions, table_read
from grader.lessons.transition_table import graded_reading
from grader.engine.oracle import figures, lesson_policy, reference_decisions, solution
from grader.engine.together import memo_runs
from reference.records import Run, columns

FUNCTIONS = ("on_event", "prefix_key", "publishable")
HIT_SHARE = 0.95          # prefix hits a correct key reaches, as a share of the oracle's


@dataclass(frozen=True)
class LearnerRun:
    run: Run
    log: CallLog
    published: int = 0     # pages the learner's publishable offered the cache in this run
    table: Callable | None = None    # the learner's on_event as read (a table: no more calls)

    def failed(self, function: str) -> str:
        """Why calls of ``function`` failed (raised, timed out, wrong type), or "".

        A property cannot be credited on a run where the worker had to fall back for the
        function. A typed but unusable answer (an index not offered) is judged by what the
        worker made of it instead, like any other decision."""
        n = self.log.failures.get(function, 0)
        if not n:
            return ""
        first = self.log.first[function]
        if "not implemented" in first:
            return first
        return f"{n} {function} calls gave no usable answer; first: {first}"


def learner_run(ctx: CheckContext, case: Case) -> LearnerRun:
    """The scenario with the learner's three functions (in the sandbox); once per grading run.
    on_event is the table the table criteria graded (its first reading), not read again:
    the table a run follows is the table that was graded."""
    return memo_runs(ctx, case, partial(_learner_run, reading=graded_reading(ctx)))


def _learner_run(sandbox, case: Case, reading: list) -> LearnerRun:
    s, log = case.inputs, CallLog()
    asked = tuple(f for f in FUNCTIONS if f != "on_event")
    decisions = {"on_event": table_read(reading, log), **learner_decisions(sandbox, asked, log)}
    policy = lesson_policy(decisions, s.sheet)
    published = [0]

    def publishable(pages):
        chosen = policy.publishable(pages)
        offered = {p.index for p in pages}
        if set(chosen) <= offered:          # else the worker refuses the whole answer
            published[0] += len(set(chosen))
        return chosen
    run = s.run(policy.with_(publishable=publishable))
    return LearnerRun(run, log, published[0], decisions["on_event"])


def oracle_hits(case: Case) -> int:
    """The reference's prefix hits on the scenario: the same for every submission."""
    s = case.inputs
    return figures("lesson4-oracle-hits", case.digest,
                   lambda: prefix_hits(s.run(lesson_policy(reference_decisions("lesson4"), s.sheet))),
                   needs=(solution("lesson4"),), persist=case.visibility == "public")


def table_hits(ctx: CheckContext, case: Case, out: LearnerRun) -> int:
    """The prefix hits the scenario gives under the learner's own on_event, with the worker's
    exact keys and publishing rule (the course baseline's, not an answer): what keys and
    publishing could have found had the table's releases been the learner's own."""
    memo = ("table-hits", case.name)
    if memo not in ctx.memo:
        s = case.inputs
        ctx.memo[memo] = prefix_hits(s.run(lesson_policy({"on_event": out.table}, s.sheet)))
    return ctx.memo[memo]


def hits_in_place(run: Run) -> int:
    """Prefix hits of the run that were in scope and in position (a wrong hit is no hit)."""
    wrong = sum(1 for v in run.violations if v.kind in ("cross_scope_hit", "wrong_prefix_hit"))
    return max(0, prefix_hits(run) - wrong)


def prefix_hits(run: Run) -> int:
    hits = run.series["prefix_hits"]
    return int(hits[-1]) if len(hits) else 0


def _where(case: Case) -> str:
    return f"public scenario {case.name}" if case.visibility == "public" else case.where


Finding = tuple  # (what, one line): what names the kind in the tally ("leaks")

LABELS = {"use_after_free": "use-after-free", "leak": "leaks", "double_release": "double releases",
          "release_of_referenced": "releases of pages others reference",
          "scheduled_after_cancel": "requests scheduled after their cancel",
          "cross_scope_hit": "cross-scope hits", "wrong_prefix_hit": "wrong-position hits",
          "poisoned_publish": "poisoned publishes"}


def early_releases(run: Run) -> list[Finding]:
    """Requests whose pages were released before their fence, or while still served."""
    out = []
    for rid, cancel, fence, released, outcome, reason in zip(*columns(
            run.requests, "id", "cancel_s", "fence_s", "released_s", "outcome", "reason")):
        if cancel is not None and released is not None and released < fence:
            out.append(("releases before the fence",
                        f"{rid} was cancelled at {cancel:.3f} s during a step that ends "
                        f"{fence:.3f} s; its pages were released at {released:.3f} s, "
                        "before that step completed"))
        elif outcome == "failed" and "released while it was running" in reason:
            out.append(("releases while served",
                        f"{rid}'s pages were released at {released:.3f} s while it was still "
                        "being served (neither cancelled nor finished)"))
    return out


def late_releases(run: Run) -> list[Finding]:
    return [("lazy releases", f"{rid} was cancelled at {cancel:.3f} s; its fence was "
             f"{fence:.3f} s, but its pages came back at {released:.3f} s (lazy reclamation)")
            for rid, cancel, fence, released in zip(*columns(run.requests, "id", "cancel_s", "fence_s",
                                                             "released_s"))
            if cancel is not None and released is not None and released > fence]


def _faults(run: Run, kinds: tuple) -> list[Finding]:
    return [(LABELS[v.kind], v.detail) for v in run.violations if v.kind in kinds]


def _tally(found: list[Finding]) -> str:
    counts: dict[str, int] = {}
    for what, _ in found:
        counts[what] = counts.get(what, 0) + 1
    return ", ".join(f"{n} {what}" for what, n in counts.items())


def served(run: Run) -> str:
    """Why nothing happened in the run ("" when requests were served): a run in which no
    request completed shows no property of the functions that served it."""
    if any(r.outcome == "completed" for r in run.requests):
        return ""
    return ("no request completed in this run (your state machine never let one be served to its "
            "end), so it shows nothing")


# What each run criterion needs to have happened in the runs to show anything: a fault
# nothing could commit is no evidence of its absence.
def _released(out: LearnerRun) -> bool:
    return any(r.released_s is not None for r in out.run.requests)


def _reclaimed_at_fence(out: LearnerRun) -> bool:
    return any(r.cancel_s is not None and r.released_s is not None and r.released_s == r.fence_s
               for r in out.run.requests)


def _cancelled_when_served(out: LearnerRun) -> bool:
    return any(r.cancel_s is not None and r.admitted_s is not None and r.admitted_s <= r.cancel_s
               for r in out.run.requests)


def _hit(out: LearnerRun) -> bool:
    return prefix_hits(out.run) > 0


def _published(out: LearnerRun) -> bool:
    return out.published > 0


HAPPENED = {
    _released: "no request's pages were released in any run",
    _reclaimed_at_fence: "no cancelled request's pages came back at its fence in any run",
    _cancelled_when_served: "no request was cancelled after its admission in any run",
    _hit: "no prefix lookup hit in any run",
    _published: "your publishable offered no page to the prefix cache in any run",
}


def _run_measure(ctx: CheckContext, needs: tuple, find, noun: str, happened=None) -> Measure:
    """Share of scenarios where ``find(run)`` reports nothing; the first report as feedback."""
    cases = ctx.family("scenario")
    if not cases:
        return Measure(0.0, "no scenarios to run")
    clean, bad, outs = 0, [], []
    for case in cases:
        out = learner_run(ctx, case)
        failed = next((out.failed(f) for f in needs if out.failed(f)), "")
        if failed:
            return Measure(0.0, failed, (case.cite,))
        outs.append(out)
        idle = served(out.run)
        found = [("runs where nothing happened", idle)] if idle else find(out.run)
        if found:
            bad.append((case, found))
        else:
            clean += 1
    if happened is not None and not bad and not any(happened(o) for o in outs):
        # A hit needs a published page: a key criterion's zero then points at publishable,
        # and at why it offered none when its answers were unusable (a set, a raise).
        because = ""
        if happened is _hit and not any(map(_published, outs)):
            failed = next(filter(None, (o.failed("publishable") for o in outs)), "")
            because = (" (your publishable offered the cache no page, so no lookup could hit"
                       + (f"; {failed}" if failed else "") + ")")
        return Measure(0.0, f"{HAPPENED[happened]}{because}, so the runs cannot show it: {noun}")
    if not bad:
        return Measure(1.0, f"none in {len(cases)} scenario runs: {noun}")
    case, found = bad[0]
    return Measure(clean / len(cases), f"{_where(case)}: {found[0][1]} ({_tally(found)} in this run)",
                   tuple(c.cite for c, _ in bad))


# Each criterion (lesson4.<name>): the functions whose answers its runs need, the
# violations the worker records for it, what the records show besides (early or lazy
# releases), and what a clean run means.
RUN_RULES = {
    "run_no_use_after_free": (("on_event",), ("use_after_free",), (early_releases,),
                              "no page released under a step that still pins it", _released),
    "run_reclaim_at_fence": (("on_event",), ("leak",), (late_releases,),
                             "no leak, every cancelled request released at its fence", _reclaimed_at_fence),
    "run_release_once": (("on_event",), ("double_release", "release_of_referenced"), (),
                         "no double release", _released),
    "run_stop_after_cancel": (("on_event",), ("scheduled_after_cancel",), (),
                              "no request scheduled after its cancel", _cancelled_when_served),
    "run_hits_in_scope": (("prefix_key",), ("cross_scope_hit", "wrong_prefix_hit"), (),
                          "no cross-scope or wrong-position hit", _hit),
    "run_clean_publish": (("publishable",), ("poisoned_publish",), (),
                          "no page published before its write completed", _published),
}


def _run_check(needs: tuple, kinds: tuple, besides: tuple, noun: str, happened):
    def find(run: Run) -> list[Finding]:
        return _faults(run, kinds) + [f for records in besides for f in records(run)]

    def measure(ctx: CheckContext, params: dict) -> Measure:
        return _run_measure(ctx, needs, find, noun, happened)
    return measure


for _name, _rule in RUN_RULES.items():
    check(f"lesson4.{_name}")(_run_check(*_rule))


@check("lesson4.run_hit_rate")
def run_hit_rate(ctx: CheckContext, params: dict) -> Measure:
    cases = ctx.family("scenario")
    if not cases:
        return Measure(0.0, "no scenarios to run")
    worst = None
    for case in cases:
        out = learner_run(ctx, case)
        failed = next((out.failed(f) for f in ("prefix_key", "publishable") if out.failed(f)), "")
        if failed:
            return Measure(0.0, failed, (case.cite,))
        idle = served(out.run)
        if idle:
            return Measure(0.0, f"{_where(case)}: {idle}", (case.cite,))
        # Only a hit in scope and in place is a hit: a key that merges everything hits a lot.
        got, want = hits_in_place(out.run), oracle_hits(case)
        share, fewer = (min(1.0, got / want) if want else 1.0), None
        if share < HIT_SHARE:
            # The oracle's hits are the reference's run, fence included: a table that
            # releases otherwise (early, late, never) changes which pages stay to be hit.
            # That is the table's mistake, graded by its own criteria: here keys and
            # publishing are judged against what exact ones found under the learner's table,
            # where that is fewer (a table that leaves nothing to hit judges nothing: the
            # reference's run stays the measure).
            table = table_hits(ctx, case, out)
            if 0 < table < want:
                share, fewer = min(1.0, got / table), table
        if worst is None or share < worst[0]:
            worst = (share, case, got, want, fewer)
    share, case, got, want, fewer = worst
    if fewer is not None:
        words = (f"{_where(case)}: {got} prefix hits in scope and in place; under your on_event "
                 f"the worker's exact keys and publishing found {fewer} (the oracle's run, which "
                 f"releases at the fence, {want})")
    else:
        words = f"{_where(case)}: {got} prefix hits in scope and in place, the oracle's keys found {want}"
    words += f" ({share:.0%}; at least {HIT_SHARE:.0%} is the target)"
    if share < HIT_SHARE:
        run = learner_run(ctx, case).run
        words += ("; requests of one scope with the same prompt prefix must get the same keys, "
                  "and every full written page must be published")
        unusable = next((v.detail for v in run.violations
                         if v.kind == "invalid_decision" and not v.detail.startswith("on_event")), "")
        if unusable:
            words += f" (the worker could not use some answers: {unusable[:160]})"
    return Measure(share, words, (case.cite,))
