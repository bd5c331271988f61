"""Lesson 2's run bookkeeping and feedback (grader/lessons/ledger_runs.py), piece by piece.

A learner reads these lines: every number and word here is what the feedback must say,
worked out by hand from the records and ledgers each test builds.
"""
from types import SimpleNamespace

import pytest

from conftest import ROOT
from grader.course.scenario import public_scenarios
from grader.engine.layout import find_course
from grader.engine.learner_policy import CallLog
from grader.lessons import ledger_runs as runs
from reference.shapes import Admission, AdmissionRequest, LedgerView, RequestRecord, Slo
from reference.sizing import Geometry


def violation(kind, detail, *requests):
    return SimpleNamespace(kind=kind, detail=detail, requests=requests)


def request(rid="r1", prompt=100, new=60, pt=16, hits=0, active=0):
    return AdmissionRequest(rid, "s", prompt, new, pt, hits, active)


def ledger(unallocated, evictable=0, reserved=0):
    return LedgerView(total_pages=64, unallocated_pages=unallocated, evictable_pages=evictable,
                      reserved_pages=reserved, running=1)


# ---- the book of decisions -----------------------------------------------------------
def test_a_repeated_call_is_answered_from_the_last_one_and_a_new_one_asks_again():
    asked = []

    def admit(r, v):
        asked.append((r.id, v.unallocated_pages))
        return Admission("wait")
    book = runs.Book()
    call = runs._recording(admit, book)
    r, v = request(), ledger(20)
    first = call(r, v)
    assert call(r, v) is first and asked == [("r1", 20)]
    call(r, ledger(21))
    call(r, ledger(21))
    assert asked == [("r1", 20), ("r1", 21)]


def test_the_book_counts_short_capacity_only_when_the_need_exceeds_what_is_available():
    # 100 + 60 tokens at 16 a page: 10 pages, no hits: need 10.
    answers = iter([Admission("admit", 10), Admission("admit", 10), Admission("wait"),
                    Admission("wait"), Admission("reject")])
    book = runs.Book()
    assert book.beyond == 0 and book.held_short == 0 and not book.never_held_back
    call = runs._recording(lambda r, v: next(answers), book)
    call(request("a"), ledger(10))              # need 10, 10 available: not short
    assert book.beyond == 0 and not book.never_held_back
    call(request("b"), ledger(6, 5, 2))         # 6 + 5 - 2 = 9 available: short
    assert book.beyond == 1 and book.never_held_back      # one admission beyond, none held
    call(request("c"), ledger(10))              # a wait with its need available
    assert book.held_short == 0 and book.overcautious[0].id == "c"
    call(request("d"), ledger(4, 6))            # another: the first stays the one kept
    assert book.overcautious[0].id == "c"
    call(request("e"), ledger(3))               # held back where capacity was short
    assert book.held_short == 1 and not book.never_held_back
    assert set(book.admitted) == {"a", "b"} and set(book.waited) == {"c", "d", "e"}


def test_the_book_keeps_every_admission_promised_less_than_its_new_pages():
    # 100 + 60 tokens at 16 a page: 10 pages; 3 hits: 7 new pages, whatever is available.
    answers = iter([Admission("admit", 7), Admission("admit", 8), Admission("admit", 6),
                    Admission("wait", 0), Admission("admit", 2)])
    book = runs.Book()
    call = runs._recording(lambda r, v: next(answers), book)
    call(request("exact", hits=3), ledger(20))
    call(request("more", hits=3), ledger(20))
    assert book.under_promised == 0 and book.first_under is None
    call(request("short", hits=3, active=3), ledger(20))       # one page short of its 7
    call(request("waits", hits=3), ledger(1))
    call(request("shorter", hits=3), ledger(2))                 # five short, room or not
    assert book.under_promised == 2 and book.first_under[0].id == "short"
    out = SimpleNamespace(book=book)
    assert runs.explain_under_promise(out) == (
        "2 admissions promised fewer pages than the request may allocate by max_new_tokens (no "
        "promise broke on this run only because the outputs stopped before they needed the missing "
        "pages); first, short reserved 6 pages, needed 7 (prompt 100 + max_new 60 at 16 tokens/page "
        "= 10 pages, 3 prefix hits, 3 active)")
    book.under_promised = 1
    assert runs.explain_under_promise(out).startswith("1 admission promised fewer pages")


def test_failures_count_only_the_admit_calls_with_no_usable_decision():
    vs = [violation("invalid_decision", "admit raised ValueError", "r1"),
          violation("broken_promise", "admitted r2 ran out of pages", "r2"),
          violation("invalid_decision", "choose_chunk raised", "r3")]
    out = runs.LearnerRun(SimpleNamespace(violations=vs), CallLog(), runs.Book())
    assert out.failures == 1


@pytest.mark.parametrize("first_kind", ["broken_promise", "over_commit"])
def test_calls_note_quotes_the_first_unusable_admit_when_the_log_has_none(first_kind):
    # Details of other kinds that begin with "admit" sit before the invalid one, on each side
    # of it in the kinds' order: only the invalid decision is quoted.
    vs = [violation(first_kind, "admitting r1 broke things", "r1"),
          violation("invalid_decision", "admit returned 'maybe'", "r2"),
          violation("invalid_decision", "admit returned None", "r3")]
    out = runs.LearnerRun(SimpleNamespace(violations=vs), CallLog(), runs.Book())
    assert runs.calls_note([out]) == (" (2 admit calls gave no usable decision, so the worker "
                                      "rejected those requests; first: admit returned 'maybe')")


# ---- a safety violation in words ------------------------------------------------------
def _explained(kind, reserve, r=None, v=None):
    r = r or request(hits=3, active=1)           # 10 pages, 3 hits: promise 7, inactive 2
    v = v or ledger(5, 2, 1)                     # 5 + 2 - 1 = 6 available
    book = runs.Book(admitted={r.id: (r, v, Admission("admit", reserve))})
    return runs.explain_violation(violation(kind, f"{kind} at r1", r.id), SimpleNamespace(book=book))


def test_an_over_commit_names_the_capacity_it_took():
    assert _explained("over_commit", 7) == (
        "admitting r1 took 9 pages of capacity (7 reserved + 2 inactive cached hits reactivated), "
        "but the ledger had 5 unallocated + 2 evictable - 1 promised to running requests = 6 available "
        "(1 running)")


def test_an_over_commit_that_also_under_reserved_is_told_as_an_over_commit():
    assert _explained("over_commit", 4).startswith("admitting r1 took 6 pages of capacity (4 reserved")


def test_a_broken_promise_names_the_reservation_only_when_it_was_short():
    assert _explained("broken_promise", 6) == (
        "r1 reserved 6 pages, needed 7 (prompt 100 + max_new 60 at 16 tokens/page = 10 pages, "
        "3 prefix hits, 1 active)")
    right = " (its own reservation of {} was right: others over-committed)"
    assert _explained("broken_promise", 7) == "broken_promise at r1" + right.format(7)
    assert _explained("broken_promise", 8) == "broken_promise at r1" + right.format(8)
    assert _explained("use_after_free", 7) == "use_after_free at r1" + right.format(7)


# ---- liveness ---------------------------------------------------------------------------
@pytest.fixture(scope="module")
def never_fit():
    return next(c.inputs for c in public_scenarios(find_course(str(ROOT)), "lesson2") if c.name == "never-fit")


def record(rid, outcome, prompt=16, new=16, reason=""):
    return RequestRecord(id=rid, scope="s", cls="c", slo=Slo(1.0, 0.1), arrival_s=0.0, outcome=outcome,
                         prompt_tokens=prompt, max_new_tokens=new, tokens_out=0, reason=reason)


STARVED = "never admitted: waited until the end of the run"


def test_stuck_is_a_failure_never_admitted_and_nothing_else():
    assert runs._stuck("failed", STARVED)
    assert not runs._stuck("failed", "the worker stopped it")
    for outcome in ("completed", "cancelled_by_client", "preempted", "rejected"):
        assert not runs._stuck(outcome, STARVED), outcome


def test_run_liveness_counts_a_rejected_possible_request_as_refused(monkeypatch):
    recs = (record("r1", "rejected", reason="too big"), record("r2", "completed"),
            record("r3", "failed", reason=STARVED), record("r4", "rejected"))
    monkeypatch.setattr(runs, "oracle_run", lambda case: runs.OracleRun(3, ("r4",), ("r1", "r2", "r3")))
    imp, refused, n_imp, n_poss = runs.run_liveness(None, SimpleNamespace(run=SimpleNamespace(requests=recs)))
    assert imp == [] and [r.id for r in refused] == ["r1", "r3"] and (n_imp, n_poss) == (1, 3)


def _story(s, rec, others=(), book=None):
    case = SimpleNamespace(inputs=s, where="case X")
    out = SimpleNamespace(run=SimpleNamespace(requests=(*others, rec)), book=book or runs.Book())
    return runs.liveness_story(case, out, rec)


def test_liveness_stories_say_the_size_the_outcome_and_who_waited_behind(never_fit):
    pt, pool = never_fit.worker.page_tokens, Geometry.of(never_fit.model, never_fit.worker).pool_pages
    # prompt 3 pages + max_new 1 page: 4 pages (prompt - max_new would be 2).
    fits = record("r3", "rejected", 3 * pt, pt, reason="looked too big")
    assert _story(never_fit, fits) == (
        f"case X: r3 fits the pool (prompt {3 * pt} + max_new {pt} at {pt} tokens/page = 4 pages, "
        f"pool {pool}) but was rejected (looked too big)")

    # Two starved before it and two after it, in id order, and one that ran: four behind.
    others = (record("r1", "failed", reason=STARVED), record("r2", "failed", reason=STARVED),
              record("r4", "failed", reason=STARVED), record("r5", "failed", reason=STARVED),
              record("r6", "completed"))
    huge = record("r3", "failed", pool * pt, pt, reason=STARVED)      # pool + 1 pages
    size = f"prompt {pool * pt} + max_new {pt} at {pt} tokens/page = {pool + 1} pages, pool {pool}"
    assert _story(never_fit, huge, others) == (
        f"case X: r3 can never fit ({size}) and waited at the head of the queue until the end of "
        f"the run; 4 requests queued behind it never ran")
    assert _story(never_fit, huge) == (
        f"case X: r3 can never fit ({size}) and waited at the head of the queue until the end of the run")
    admitted = record("r3", "failed", pool * pt, pt, reason="ran out of pages")
    assert _story(never_fit, admitted, others) == (
        f"case X: r3 can never fit ({size}) yet was admitted and ended failed: no promise could cover it")

    # Exactly the pool fits: starved, it is told as a ledger that never admitted it.
    exact = record("r3", "failed", (pool - 1) * pt, pt, reason=STARVED)
    r = request("r3", (pool - 1) * pt, pt, pt)
    book = runs.Book(waited={"r3": (r, ledger(pool - 1, 0, 0), Admission("wait"))})
    assert _story(never_fit, exact, book=book) == (
        f"case X: r3 fits the pool (prompt {(pool - 1) * pt} + max_new {pt} at {pt} tokens/page = "
        f"{pool} pages, pool {pool}) but was never admitted; last told wait with {pool - 1} unallocated "
        f"+ 0 evictable - 0 promised to running requests = {pool - 1} available (1 running), needing {pool}")


def test_the_oracle_run_is_kept_on_disk_for_public_cases_alone(monkeypatch):
    kept = {}
    monkeypatch.setattr(runs, "figures", lambda kind, key, compute, *, needs, persist: kept.setdefault(key, persist))
    for visibility in ("public", "hidden"):
        runs.oracle_run(SimpleNamespace(digest=visibility, visibility=visibility, inputs=None))
    assert kept == {"public": True, "hidden": False}
