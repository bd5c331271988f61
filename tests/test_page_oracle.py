"""The worker's page accounting and use-after-free detection, held against an independent
bookkeeper (tests/page_oracle.py) that rebuilds every page's holders from the worker's event
trace alone: on many random tiny workloads under every faulty policy, on the worker tests'
generated workloads, and on the edge cases worked out by hand below.

The bookkeeper knows nothing of how the worker schedules (which request is admitted,
preempted or given the chunk): those choices arrive in the trace as facts, so these checks
hold whatever the scheduling rule, as long as the page semantics do.
"""
from __future__ import annotations

from fractions import Fraction as F

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from page_oracle import BooksError, check_run, replay
from grader.engine.oracle import reference_policy
from reference.shapes import Admission, CostModel
from worker_helpers import WORKLOADS, machine, policy_variants, request, run, scenario

POLICIES = policy_variants()
# Policies that release a cancelled request's pages only at its fence (or never): under them
# no page a step pins may be freed before the step completes.
AT_FENCE = {"reference", "prompt_only", "outstanding_ignore", "no_stop", "leaky_prefix",
            "fixed_chunks", "greedy", "never_release"}
assert AT_FENCE < set(POLICIES) and set(POLICIES) - AT_FENCE == {"release_at_cancel", "double_release"}
AT_CANCEL = reference_policy({"cancellation": {"release": "at_cancel"}})
GREEDY_AT_CANCEL = AT_CANCEL.with_(admit=lambda ask, ledger: Admission("admit", 0))


def traced(model, worker, policy, requests, **kw):
    trace: list = []
    result = run(model, worker, policy, requests, trace=trace, **kw)   # audits the books too
    return result, trace


# ---------------------------------------------------------------------------- random tiny cases

TEXTS = (np.arange(1, 41), np.arange(41, 1, -1) * 3)     # two texts whose prefixes requests share


@st.composite
def tiny_cases(draw):
    page_tokens = draw(st.sampled_from([1, 2, 4]))
    pages = draw(st.integers(3, 24))
    model, worker = machine(pages, page_tokens=page_tokens, max_running=draw(st.integers(1, 4)),
                            cost=CostModel(step_fixed=draw(st.sampled_from([0.004, 0.02]))))
    arrivals = sorted(draw(st.lists(st.integers(0, 30), min_size=1, max_size=6)))
    requests = []
    for i, slot in enumerate(arrivals):
        shared = draw(st.integers(0, 24))
        own = draw(st.integers(0 if shared else 1, 10))
        tokens = np.concatenate([TEXTS[draw(st.integers(0, 1))][:shared],
                                 np.arange(1000 * (i + 1), 1000 * (i + 1) + own)])
        output = draw(st.integers(1, 8))
        arrival = slot * 0.004
        cancel = draw(st.none() | st.integers(0, 25).map(lambda k: arrival + k * 0.003))
        requests.append(request(i, arrival, tokens, output, max_new=output + draw(st.integers(0, 3)),
                                scope=draw(st.sampled_from(["a", "b"])), cancel_at_s=cancel))
    return model, worker, tuple(requests), draw(st.sampled_from(sorted(POLICIES)))


@settings(max_examples=400, suppress_health_check=[HealthCheck.too_slow])
@given(case=tiny_cases())
def test_tiny_workloads_keep_the_books_the_trace_implies(case):
    model, worker, requests, name = case
    result, trace = traced(model, worker, POLICIES[name], requests)
    check_run(result, trace, fence=name in AT_FENCE)


@pytest.mark.parametrize("policy", ["reference", "release_at_cancel", "double_release", "greedy",
                                    "prompt_only", "leaky_prefix", "never_release"])
@pytest.mark.parametrize("name", sorted(WORKLOADS))
def test_generated_workloads_keep_the_books_the_trace_implies(name, policy):
    model, worker, requests = scenario(name)
    result, trace = traced(model, worker, POLICIES[policy], requests)
    books = check_run(result, trace, fence=policy in AT_FENCE)
    if policy == "release_at_cancel" and name == "cancel-heavy":
        assert len(books.use_after_free) > 10          # the hazard is really exercised


# ---------------------------------------------------------------------------- the bookkeeper itself

def test_the_bookkeeper_refuses_traces_that_break_the_page_semantics():
    """Each rule of the books, broken once: the oracle is not vacuous."""
    ok = [("take", 0.0, "r0", 0), ("publish", 0.0, "r0", 0), ("launch", 0.0, 0, ("r0",)),
          ("unref", 0.1, "r0", 0), ("complete", 0.2, 0)]
    assert replay(ok, 2).cached == {0}
    broken = {
        "handed out while": [("take", 0, "r0", 0), ("take", 0, "r1", 0)],
        "evicted while": [("take", 0, "r0", 0), ("publish", 0, "r0", 0), ("unref", 0, "r0", 0),
                          ("take", 0, "r1", 0)],
        "not in the cache": [("ref", 0, "r0", 1)],
        "does not hold": [("take", 0, "r0", 0), ("unref", 0, "r1", 0)],
        "holds page 0 twice": [("take", 0, "r0", 0), ("publish", 0, "r0", 0), ("ref", 0, "r0", 0)],
        "not its own": [("take", 0, "r0", 0), ("publish", 0, "r1", 0)],
        "in flight": [("launch", 0, 0, ()), ("launch", 0, 1, ())],
        "launched after": [("launch", 0, 1, ())],
        "is the one in flight": [("complete", 0, 0)],
        "no such page": [("take", 0, "r0", 5)],
    }
    for what, trace in broken.items():
        with pytest.raises(BooksError, match=what):
            replay(trace, 2)


def test_the_bookkeeper_catches_a_worker_that_forgets_a_use_after_free(monkeypatch):
    """The comparison is live: a worker that records no use-after-free fails it."""
    from reference.worker.engine import Worker
    model, worker, requests = scenario("cancel-heavy")
    monkeypatch.setattr(Worker, "_use_after_free", lambda self, page, taker: None)
    result, trace = traced(model, worker, POLICIES["release_at_cancel"], requests)
    with pytest.raises(BooksError, match="use-after-free"):
        check_run(result, trace)


# ---------------------------------------------------------------------------- edge paths by hand

PROMPT = np.arange(1, 10)          # 9 tokens: two full 4-token blocks, published, and one more


def test_shared_pages_freed_under_a_step_by_a_request_outside_it():
    """r0 decodes in step 1 holding pages 0, 1 (its published prompt blocks) and 2. During
    step 1, r1 is admitted with hits on 0 and 1 (so it is not in the step), r0 is cancelled
    and released (2 is freed; 0 and 1 stay, r1 holds them), then r1 is cancelled: 0 and 1 are
    freed now, by a request the step does not pin, yet step 1 still reads them through r0.
    r2 then takes the whole pool: 3 (r1's own, harmless), 2, the free pages, and last the
    cached 1 and 0 (least recently used first): three pages overwritten under step 1."""
    model, worker = machine(16, page_tokens=4, cost=CostModel(step_fixed=0.1))
    requests = (request(0, 0.0, PROMPT, 20, cancel_at_s=0.13),
                request(1, 0.12, np.concatenate([PROMPT[:8], np.arange(500, 504)]), 2,
                        cancel_at_s=0.14),
                request(2, 0.15, 63, 1))
    result, trace = traced(model, worker, AT_CANCEL, requests)
    uaf = [v for v in result.violations if v.kind == "use_after_free"]
    assert [(v.step, v.pages, v.requests) for v in uaf] == [
        (1, (2,), ("r0", "r2")), (1, (1,), ("r1", "r2")), (1, (0,), ("r1", "r2"))]
    assert uaf[1].detail == ("cancel of r1 at 0.140 s during step 1 (ends 0.200 s); page 1 "
                             "released at 0.140 s, given to r2 at 0.150 s, overwritten by step 1")
    check_run(result, trace)


def test_pages_taken_one_at_a_time_are_checked_for_use_after_free_too():
    """An admission that reserves nothing takes its prompt pages one by one (the path a
    short reservation takes): r0's unpublished page 2, freed at its cancel under step 1, is
    the first r1 gets."""
    model, worker = machine(16, page_tokens=4, cost=CostModel(step_fixed=0.1))
    requests = (request(0, 0.0, PROMPT, 20, cancel_at_s=0.13), request(1, 0.15, 40, 2))
    result, trace = traced(model, worker, GREEDY_AT_CANCEL, requests)
    uaf = [(v.step, v.pages, v.requests) for v in result.violations if v.kind == "use_after_free"]
    assert uaf == [(1, (2,), ("r0", "r1"))]
    check_run(result, trace)


FIXED, TOKEN, CONTEXT, PAIR = F(1, 64), F(1, 4096), F(1, 65536), F(1, 2 ** 20)
DYADIC = CostModel(float(FIXED), float(TOKEN), float(CONTEXT), float(PAIR))


@pytest.mark.parametrize("cancel_at", [0.025, 0.0179])
def test_a_cancel_in_the_first_decode_step_waits_for_that_steps_fence(cancel_at):
    """r0's first decode step (step 1) is in flight from its first token on: a cancel then
    is fenced at the end of step 1, and its pages are released only there."""
    model, worker = machine(16, page_tokens=4, cost=DYADIC)
    result, trace = traced(model, worker, None, (request(0, 0.0, PROMPT, 5, cancel_at_s=cancel_at),))
    # Step 0: the 9-token prompt (T 9, A 45); step 1: the decode of token 2 (T 1, C 10).
    end0 = FIXED + 9 * TOKEN + 45 * PAIR
    end1 = end0 + FIXED + TOKEN + 10 * CONTEXT
    assert float(end0) < cancel_at < float(end1)
    (rec,) = result.requests
    assert (rec.outcome, rec.tokens_out, rec.cancel_s) == ("cancelled_by_client", 1, cancel_at)
    assert rec.fence_s == rec.released_s == float(end1)
    check_run(result, trace, fence=True)


def test_an_admission_given_back_holds_nothing_its_record_shows():
    """r2's prompt hits r0's cached page, but the rest finds no free page: the hit is
    ref'd and given back, and r2 is cancelled in the queue. It never held a page as an
    admitted request, so its record says 0 (lesson 6 reads a cancelled request with pages
    held and no release as one whose pages were kept); r0 and r1 held theirs."""
    model, worker = machine(13, page_tokens=2, max_running=2, cost=CostModel(step_fixed=0.004))
    requests = (request(0, 0.0, [123, 120], 1, scope="b"),
                request(1, 0.0, list(range(1, 13)) + list(range(2000, 2010)), 1, scope="a"),
                request(2, 0.008, [123, 120, 3000], 1, scope="b", cancel_at_s=0.008),
                request(3, 0.008, [4000], 1, scope="a"))
    result, trace = traced(model, worker, POLICIES["greedy"], requests)
    assert ("ref", 0.008, "r2", 0) in trace and ("unref", 0.008, "r2", 0) in trace   # the premise
    check_run(result, trace, fence=True)
    held = {r.id: r.pages_held for r in result.requests}
    assert held == {"r0": 2, "r1": 12, "r2": 0, "r3": 1}        # prompt + first output token, in pages
