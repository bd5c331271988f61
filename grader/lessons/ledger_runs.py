"""Lesson 2's worker runs: the learner's admit on a scenario, and the oracle ledger's run.

Every other decision of a run (the contract, the chunk rule, cancellation, the prefix
cache) is the course baseline's (reference.baselines), in both editions; the oracle run is
the reference ledger beside the same baselines, and what lesson 2 needs of it (its good
requests, which requests can never fit) is a recorded figure in the learner edition.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from grader.engine.codec import persistent
from grader.engine.cases import Case
from grader.engine.checks import CheckContext
from grader.engine.learner_policy import CallLog, learner_decisions
from grader.engine.oracle import figures, lesson_policy, reference_decisions, solution
from grader.engine.text import plural
from grader.engine.together import memo_runs
from grader.lessons.ledger import (available, footprint, inactive, ledger_words, need, promise,
                                   request_words)
from reference.records import Run, columns, token_times_of, within_request
from reference.shapes import AdmissionRequest, LedgerView, RequestRecord
from reference.sizing import Geometry, pages_for


@dataclass
class Book:
    """The learner's decisions during one run, kept for feedback (the worker saw the same)."""
    admitted: dict = field(default_factory=dict)   # id -> (request, ledger, admission), latest
    waited: dict = field(default_factory=dict)     # id -> (request, ledger, admission), latest
    overcautious: tuple | None = None   # the first wait or reject whose need was available
    # Where capacity was short (the need over what the ledger showed available): how many
    # admissions went ahead anyway, and how many calls were held back. A run with the first
    # and none of the second shows a ledger that admits everything, whatever it does elsewhere.
    beyond: int = 0
    held_short: int = 0
    # Admissions whose promise is smaller than the new pages the request may allocate: unsafe
    # whatever the outputs did. A bet on short outputs breaks no promise on a run where the
    # outputs stopped early, so the run's violations alone would call it safe.
    under_promised: int = 0
    first_under: tuple | None = None    # (request, ledger, admission) of the first of them
    # Calls where the request fit the pool and the capacity covered its need: the right answer
    # is to admit it with exactly its promise, in a run as on a probe (a ledger can tell a
    # probe from a run's request, and answer the probes alone exactly). Counted by side,
    # an exact fit (need == available) or room to spare, with the first wrong answer of each.
    fits: dict = field(default_factory=lambda: {"exact fit": 0, "room to spare": 0})
    fits_wrong: dict = field(default_factory=lambda: {"exact fit": 0, "room to spare": 0})
    first_fit_wrong: dict = field(default_factory=dict)    # side -> (request, ledger, admission)

    @property
    def never_held_back(self) -> bool:
        """Capacity was short, and the ledger admitted all the same every time."""
        return self.beyond > 0 and not self.held_short


@dataclass(frozen=True)
class LearnerRun:
    run: Run
    log: CallLog
    book: Book

    @property
    def failures(self) -> int:
        """Admissions with no usable decision (raised, timed out, invalid value): the worker
        records each as an invalid decision and rejects the request."""
        return sum(1 for v in self.run.violations
                   if v.kind == "invalid_decision" and v.detail.startswith("admit"))


def _recording(admit, book: Book):
    """The learner's admit, each decision kept for feedback (the worker sees the same one).

    The worker retries a waiting head at every step completion, often with nothing
    changed. A ledger is a function of its two arguments, so a call identical to the
    previous one is answered with the previous answer instead of crossing the sandbox again.
    """
    last: list = [None, None]

    def call(request: AdmissionRequest, ledger: LedgerView):
        if last[0] == (request, ledger):
            return last[1]
        adm = admit(request, ledger)
        last[0], last[1] = (request, ledger), adm
        seen = (request, ledger, adm)
        wanted, room = need(request), available(ledger)
        short = wanted > room
        if not short and footprint(request) <= ledger.total_pages:
            side = "exact fit" if wanted == room else "room to spare"
            book.fits[side] += 1
            if adm.decision != "admit" or adm.reserve_pages != promise(request):
                book.fits_wrong[side] += 1
                book.first_fit_wrong.setdefault(side, seen)
        if adm.decision == "admit":
            book.admitted[request.id] = seen
            book.beyond += short
            if adm.reserve_pages < promise(request):
                book.under_promised += 1
                book.first_under = book.first_under or seen
        else:
            book.waited[request.id] = seen
            book.held_short += short
            if book.overcautious is None and not short:
                book.overcautious = seen
        return adm
    return call


def learner_run(ctx: CheckContext, case: Case) -> LearnerRun:
    """The scenario with the learner's admit (in the sandbox); once per grading run."""
    return memo_runs(ctx, case, _learner_run)


def _learner_run(sandbox, case: Case) -> LearnerRun:
    s, log, book = case.inputs, CallLog(), Book()
    admit = learner_decisions(sandbox, ("admit",), log)["admit"]
    run = s.run(lesson_policy({"admit": _recording(admit, book)}, s.sheet))
    return LearnerRun(run, log, book)


@persistent
@dataclass(frozen=True)
class OracleRun:
    good: int                       # requests that met their SLO
    impossible: tuple[str, ...]     # ids that can never fit (and reached admission)
    possible: tuple[str, ...]       # ids that passed the contract and fit the pool


def oracle_run(case: Case) -> OracleRun:
    """The reference ledger's run of the scenario, summed up: the same for every submission."""
    return figures("lesson2-oracle", case.digest, lambda: _oracle_run(case.inputs),
                   needs=(solution("lesson2"),), persist=case.visibility == "public")


def _oracle_run(s) -> OracleRun:
    run = s.run(lesson_policy(reference_decisions("lesson2"), s.sheet))
    return OracleRun(good_requests(run.requests), *fit_classes(s))


def fit_classes(s) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """(ids that can never fit and reach admission, ids that fit the pool) among the
    requests that pass the scenario's contract: a property of the workload and the worker,
    whatever ledger runs it (the contract is the course baseline's under the sheet)."""
    contract = lesson_policy({}, s.sheet).check_contract
    pool = Geometry.of(s.model, s.worker).pool_pages
    pt = s.worker.page_tokens
    impossible, possible = [], []
    for r in s.requests():
        if not contract(r.view(), s.model, s.worker).ok:
            continue
        if pages_for(r.prompt_tokens + r.max_new_tokens, pt) > pool:
            # A client cancel can end it before it reaches admission: no evidence then.
            if r.cancel_at_s is None:
                impossible.append(r.id)
        else:
            possible.append(r.id)
    return tuple(impossible), tuple(possible)


def good_requests(requests) -> int:
    """How many requests met their SLO: completed, first token within ttft_s of arrival,
    and no gap between tokens over gap_s. The lesson 5 meaning of a good request, reduced
    to what lesson 2 needs: a cancelled, rejected or failed request is not good. Read from
    the run's compact records without building one record (a tuple of records reads the
    same)."""
    outcome, first, arrival, slo = columns(requests, "outcome", "first_token_s", "arrival_s", "slo")
    done = [i for i, o in enumerate(outcome) if o == "completed"]
    times, counts = token_times_of(requests, "completed")
    # A gap over its request's gap_s (or one that is no number) makes the request late.
    gap_s = np.repeat(np.array([slo[i].gap_s for i in done], dtype=np.float64), counts)
    over = within_request(counts) & ~(np.diff(times) <= gap_s[1:])
    owner = np.repeat(np.arange(len(done)), counts)[1:]     # the request of each later token
    late = np.bincount(owner[over], minlength=len(done)) > 0
    return sum(1 for k, i in enumerate(done) if not late[k] and first[i] is not None
               and not first[i] - arrival[i] > slo[i].ttft_s)


def calls_note(runs: list[LearnerRun]) -> str:
    failed = sum(r.failures for r in runs)
    if not failed:
        return ""
    first = next((r.log.first["admit"] for r in runs if "admit" in r.log.first), None)
    if first is None:
        first = next(v.detail for r in runs for v in r.run.violations
                     if v.kind == "invalid_decision" and v.detail.startswith("admit"))
    return (f" ({failed} admit calls gave no usable decision, so the worker rejected those "
            f"requests; first: {first})")


# ---- what a run shows, per criterion ---------------------------------------------------
def explain_violation(v, out: LearnerRun) -> str:
    rid = v.requests[0] if v.requests else ""
    seen = out.book.admitted.get(rid)
    if seen is None:
        return v.detail
    r, ledger, adm = seen
    if v.kind == "broken_promise" and adm.reserve_pages < promise(r):
        return (f"{rid} reserved {adm.reserve_pages} pages, needed {promise(r)} "
                f"({request_words(r)})")
    if v.kind == "over_commit":
        took = adm.reserve_pages + inactive(r)
        return (f"admitting {rid} took {plural(took, 'page')} of capacity ({adm.reserve_pages} reserved + "
                f"{inactive(r)} inactive cached hits reactivated), but the ledger had "
                f"{ledger_words(ledger)}")
    return f"{v.detail} (its own reservation of {adm.reserve_pages} was right: others over-committed)"


def explain_under_promise(out: LearnerRun) -> str:
    """A run whose promises were too small and broke none (its outputs stopped early)."""
    r, _, adm = out.book.first_under
    n = out.book.under_promised
    return (f"{n} admission{'s' if n != 1 else ''} promised fewer pages than the request may "
            f"allocate by max_new_tokens (no promise broke on this run only because the outputs "
            f"stopped before they needed the missing pages); first, {r.id} reserved "
            f"{adm.reserve_pages} pages, needed {promise(r)} ({request_words(r)})")


def stuck(rec: RequestRecord) -> bool:
    return _stuck(rec.outcome, rec.reason)


def _stuck(outcome: str, reason: str) -> bool:
    return outcome == "failed" and reason.startswith("never admitted")


def run_liveness(case: Case, out: LearnerRun) -> tuple[list, list, int, int]:
    """What went wrong for liveness in one run: (impossible not rejected, possible refused
    or starved, impossible count, possible count). Records in arrival order; only those
    are built."""
    ref, requests = oracle_run(case), out.run.requests
    outcome, reason, ids = columns(requests, "outcome", "reason", "id")
    at = {rid: i for i, rid in enumerate(ids)}
    stuck_imp = [requests[k] for k in map(at.get, ref.impossible) if outcome[k] != "rejected"]
    refused = [requests[k] for k in map(at.get, ref.possible)
               if outcome[k] == "rejected" or _stuck(outcome[k], reason[k])]
    return stuck_imp, refused, len(ref.impossible), len(ref.possible)


def liveness_story(case: Case, out: LearnerRun, rec: RequestRecord) -> str:
    """One request's liveness failure in words, with the numbers behind it."""
    s = case.inputs
    pt, pool = s.worker.page_tokens, Geometry.of(s.model, s.worker).pool_pages
    pages = pages_for(rec.prompt_tokens + rec.max_new_tokens, pt)
    size = (f"prompt {rec.prompt_tokens} + max_new {rec.max_new_tokens} at {pt} tokens/page = "
            f"{pages} pages, pool {pool}")
    if rec.outcome == "rejected":
        return f"{case.where}: {rec.id} fits the pool ({size}) but was rejected ({rec.reason})"
    behind = sum(1 for x in out.run.requests if stuck(x) and x.id != rec.id)
    queue = f"; {behind} requests queued behind it never ran" if behind else ""
    if pages > pool and not stuck(rec):
        return (f"{case.where}: {rec.id} can never fit ({size}) yet was admitted and ended "
                f"{rec.outcome}: no promise could cover it")
    if pages > pool:
        return (f"{case.where}: {rec.id} can never fit ({size}) and waited at the head of the "
                f"queue until the end of the run{queue}")
    seen = out.book.waited.get(rec.id)
    last = (f"; last told {seen[2].decision} with {ledger_words(seen[1])}, needing {need(seen[0])}"
            if seen else "")
    return f"{case.where}: {rec.id} fits the pool ({size}) but was never admitted{last}{queue}"
