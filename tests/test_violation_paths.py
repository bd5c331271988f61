"""Every place in the worker that records a violation, provoked through that very place.

A kind can be recorded from several places (``invalid_decision`` from six decisions,
``broken_promise`` at admission and at a running request's growth, ``leak`` for a request
that completed, was cancelled or was stopped for good). A test of the kind that happens to
go through one of them says nothing of the others, so each place is listed here with the
test that reaches it. The check that a listed test really goes through its place: replace the kind
at that line with another string, run the test files below, and the listed test must
fail. Planted that way, every place below fails its test.

Each place (a module of reference/worker/, the method, what provokes it), its kind, and the
tests that fail when the kind at that place is changed ("here" is this file):

admission.py _arrive: check_contract's answer unusable                    invalid_decision
    test_worker.py test_invalid_contract_verdict_is_a_violation
    here test_a_contract_verdict_of_the_wrong_type_is_invalid_and_rejects
admission.py _admit: admit's answer unusable                              invalid_decision
    test_worker.py test_invalid_admission_is_a_violation_and_the_request_is_rejected,
    test_an_unusable_admission_says_what_was_returned
admission.py _admit: outstanding promises beyond free capacity            over_commit
    test_worker.py test_over_commit_when_outstanding_promises_are_ignored
    here test_an_over_committed_promise_the_pool_cannot_honour_breaks_at_admission
admission.py _grow: a running request finds no page (three sentences)     broken_promise
    test_worker.py test_broken_promise_when_reserving_the_prompt_only (asker alone),
    test_an_asker_preempted_after_the_others_says_so (others, then the asker),
    test_preemption_after_a_broken_promise_keeps_the_run_going (others; asker served);
    test_preemption.py test_over_admission_preempts_the_latest_admitted_...
lifecycle.py _read_table: on_event's transition unusable                  invalid_decision
    test_worker.py test_invalid_transition_table_is_a_violation_and_treated_as_no_change
lifecycle.py _cancel: the cancel transition does not stop                 scheduled_after_cancel
    test_worker.py test_scheduled_after_cancel_without_stop_scheduling
pages.py _allocate_prompt: a prompt page beyond what can be had           broken_promise
    here test_a_prompt_beyond_its_promise_breaks_it_at_admission_once_however_often_retried,
    test_an_over_committed_promise_the_pool_cannot_honour_breaks_at_admission
pages.py _use_after_free                                                  use_after_free
    reached from _allocate (one page):      test_page_oracle.py
                                            test_pages_taken_one_at_a_time_are_checked_...
    reached from _allocate_prompt (batch):  test_worker.py
                                            test_use_after_free_names_cancel_page_owner_and_step
pages.py _release: released a second time                                 double_release
    test_worker.py test_double_release_and_release_of_referenced_shared_prefix_pages
pages.py _release: the second release would drop a held page              release_of_referenced
    test_worker.py test_double_release_and_release_of_referenced_shared_prefix_pages
prefix_cache.py _key: prefix_key's answer unusable                        invalid_decision
    test_worker.py test_an_unusable_prefix_key_is_named_in_the_violation
    here test_an_unusable_key_is_flagged_by_whichever_asks_it_first (lookup, publish)
prefix_cache.py _verify_hit: a hit published under another scope          cross_scope_hit
    test_worker.py test_cross_scope_hit_by_hand
prefix_cache.py _verify_hit: a hit of another block or other tokens       wrong_prefix_hit
    test_worker.py test_a_hit_on_a_later_block_of_the_same_tokens_is_a_wrong_prefix_hit,
    test_a_hit_whose_block_differs_in_one_token_is_a_wrong_prefix_hit
prefix_cache.py _publish: publishable's answer unusable                   invalid_decision
    test_worker.py test_invalid_decision_once_per_request_and_the_run_goes_on[publish-*]
    here test_an_unusable_publish_choice_is_named_in_the_violation
prefix_cache.py _publish: an unwritten or partial page chosen             poisoned_publish
    test_worker.py test_poisoned_publish_of_unwritten_pages, ..._of_a_partial_page
steps.py _plan_chunk: choose_chunk's answer unusable                      invalid_decision
    test_worker.py test_invalid_decision_once_per_request_and_the_run_goes_on[chunk-*]
    here test_an_unusable_chunk_plan_is_named_in_the_violation
recorder.py _finish_run: an ended request still holds pages               leak
    test_worker.py test_a_leak_says_how_many_pages_are_held_and_names_the_first_four
    (completed); here test_a_request_its_machine_stops_for_good_fails_and_what_it_holds_is_a_leak
    (stopped on another event than its cancel or its finish)

The test files of that check: tests/test_worker.py, tests/test_preemption.py,
tests/test_page_oracle.py, tests/test_records.py, tests/test_decisions.py and this one.

The admission once flagged ``scheduled_after_cancel`` for a cancelled request it admitted.
It could record nothing of its own: a request only got there cancelled and still queued,
which means its cancel transition did not stop it, and ``_cancel`` had then flagged the
same kind for it already (once per request). It is gone; the test below pins that such a
request is flagged once, by its cancel, with the cancel's sentence.

Expected values are worked out by hand below from pool sizes, promises and the free stack;
none is computed with the worker's own helpers.
"""
from __future__ import annotations

import numpy as np

from grader.engine.oracle import reference_policy
from reference.records import Violation
from reference.shapes import Admission, ChunkPlan, Transition
from reference.solutions import lesson4
from worker_helpers import STOP, machine, no_stop_on_event, nonzero, outcomes, request, run


def promising(pages: dict[str, int], asks: list | None = None):
    """No prefix cache, and each request promised the pages given here whatever the ledger
    says: an over-commit or a shortfall is then the worker's to notice, not the policy's."""
    def admit(ask, ledger):
        if asks is not None:
            asks.append(ask.id)
        return Admission("admit", pages[ask.id], "test")
    return reference_policy().with_(prefix_cache=False, admit=admit)


# ---- broken_promise at admission (pages.py, _allocate_prompt) -----------------------------------

def test_a_prompt_beyond_its_promise_breaks_it_at_admission_once_however_often_retried():
    """10 pages. r0 (16-token prompt, 100 output: 116 tokens, 8 pages) is promised all 8. At
    t=0 it takes its prompt page and, at the launch of its one-chunk prefill, the page of
    its first token's slot: 2 held, 6 still promised, 8 free. r1 arrives at 0.001 s, inside
    that first step (over 4 ms), promised nothing, with a 48-token prompt: 3 pages, all from
    unpromised capacity. Free minus promised is 8 - 6 = 2: it takes 2 and the third breaks
    its promise, with 6 free and all 6 promised to r0. It gives the 2 back and waits.
    r0 grows only within its promise, so free minus promised stays 2 until r0 ends; r1 is
    asked again at every step's completion and fails the same way each time: one violation,
    however many retries. r0's 100 tokens take 100 steps (the prefill emits the first), so
    r1 is asked once at arrival and once at each completion, 101 times, the last admitting
    it when r0's 8 pages come back."""
    asks: list = []
    model, worker = machine(10)
    requests = (request(0, 0.0, 16, 100), request(1, 0.001, 48, 4))
    result = run(model, worker, promising({"r0": 8, "r1": 0}, asks), requests)
    assert result.violations == (Violation(
        "broken_promise", 0.001, ("r1",), (), None,
        "r1 needed page 3 with 0 reserved pages left; 6 free, 6 promised to other requests"),)
    r0, r1 = result.requests
    assert asks.count("r1") == 101
    assert r1.admitted_s == r0.finish_s and outcomes(result) == {"completed": 2}


def test_an_over_committed_promise_the_pool_cannot_honour_breaks_at_admission():
    """6 pages. r0 (16 + 30 tokens: 3 pages) is promised its 3; at the first launch it holds
    2 (prompt page, first token's page) with 1 still promised, leaving 4 free. r1 arrives
    at 0.001 s, promised 5, with an 80-token prompt (5 pages). Outstanding promises become
    1 + 5 = 6 against 4 free pages: an over-commit. Its prompt needs 5 pages, more than the
    4 free, so they are taken one by one within its promise: 4 come, the fifth does not.
    Its promise then has 5 - 4 = 1 page left, no page is free, and r0's 1 is the only
    other promise. Both are flagged once, although r1 is retried until r0 ends: 6 free
    pages then cover its 5."""
    model, worker = machine(6)
    requests = (request(0, 0.0, 16, 30), request(1, 0.001, 80, 4))
    result = run(model, worker, promising({"r0": 3, "r1": 5}), requests)
    assert result.violations == (
        Violation("over_commit", 0.001, ("r1",), (), None,
                  "admitting r1 with 5 reserved pages made outstanding promises 6 exceed "
                  "free capacity 4"),
        Violation("broken_promise", 0.001, ("r1",), (), None,
                  "r1 needed page 5 with 1 reserved pages left; 0 free, 1 promised to other "
                  "requests"))
    r0, r1 = result.requests
    assert r1.admitted_s == r0.finish_s and outcomes(result) == {"completed": 2}


# ---- scheduled_after_cancel, once, for a request admitted after its cancel ----------------------

def test_a_cancelled_request_admitted_later_is_flagged_once_by_its_cancel():
    """One request runs at a time. r1 queues behind r0 and is cancelled at 0.02 s by a
    machine that does not stop it: the cancel flags it then (its machine goes to "done"
    and will act on no later event). It stays queued, and when r0 ends it is admitted all
    the same, which adds nothing. The run's violations are the cancel's, with the cancel's
    sentence, and the leak of what it was then given, released by no one: r0's 4 pages come back at its end
    tail first, its published prompt page 0 to the cache and 3, 2, 1 to the free stack,
    so r1's 20-token prompt and 5 tokens (25 slots, 2 pages) take pages 1 and 2."""
    model, worker = machine(40, max_running=1)
    requests = (request(0, 0.0, 20, 30), request(1, 0.01, 20, 5, cancel_at_s=0.02))
    result = run(model, worker, reference_policy().with_(on_event=no_stop_on_event), requests)
    assert result.violations == (
        Violation("scheduled_after_cancel", 0.02, ("r1",), (), None,
                  "r1 kept being scheduled after its cancel"),
        Violation("leak", result.end_s, ("r1",), (1, 2), None,
                  "r1 (cancelled_by_client) still holds 2 pages at the end of the run, "
                  "e.g. [1, 2]"))
    r0, r1 = result.requests
    assert r1.admitted_s == r0.finish_s > 0.02       # admitted after its cancel


# ---- invalid_decision: which decision, and what it returned --------------------------------------

def test_a_contract_verdict_of_the_wrong_type_is_invalid_and_rejects():
    """A bool where a Verdict is due: the worker cannot read it, so the request is rejected
    with the worker's own reason, and the violation names the decision and the request."""
    model, worker = machine(40)
    policy = reference_policy().with_(check_contract=lambda view, model, worker: True)
    result = run(model, worker, policy, (request(0, 0.5, 20, 3),))
    assert result.violations == (Violation("invalid_decision", 0.5, ("r0",), (), None,
                                           "check_contract gave no usable verdict for r0"),)
    (r0,) = result.requests
    assert (r0.outcome, r0.reason) == ("rejected", "the contract check gave no usable verdict")


def test_an_unusable_chunk_plan_is_named_in_the_violation():
    """64 tokens when 20 remain: more than the prompt has left, shown as returned."""
    model, worker = machine(40)
    policy = reference_policy().with_(choose_chunk=lambda ctx: ChunkPlan(64, "ok"))
    result = run(model, worker, policy, (request(0, 0.0, 20, 3),))
    assert result.violations == (Violation(
        "invalid_decision", 0.0, ("r0",), (), None,
        "choose_chunk returned ChunkPlan(tokens=64, verdict='ok')"),)
    assert outcomes(result) == {"completed": 1}


def test_an_unusable_publish_choice_is_named_in_the_violation():
    """r0's 40 tokens are prefilled in one chunk; its pages 0 and 1 are full and written,
    page 2 partial: the three are offered, and page 7 is not one of them."""
    model, worker = machine(40)
    policy = reference_policy().with_(publishable=lambda pages: (7,))
    result = run(model, worker, policy, (request(0, 0.0, 40, 3),))
    (v,) = result.violations
    assert (v.kind, v.requests, v.pages, v.detail) == ("invalid_decision", ("r0",), (),
                                                       "publishable returned (7,)")
    # After its one chunk, the only time r0 is offered pages: the end of step 0.
    assert v.time_s == result.steps.launch_s[0] + result.steps.duration_s[0]


def test_an_unusable_key_is_flagged_by_whichever_asks_it_first():
    """The lookup at admission asks block 0's key (an empty cache misses there and the
    walk stops); publishing after the first chunk asks the later blocks'. A key unusable
    for block 0 is flagged at admission, at the arrival; one unusable only for block 1 is
    first asked by the publish, at the end of the chunk's step. 68 tokens: 4 full blocks,
    first tokens 1, 17, 33, 49, prefilled in one chunk."""
    def key_failing_at(first_token):
        def key(scope, parent, tokens):
            return "" if tokens[0] == first_token else lesson4.prefix_key(scope, parent, tokens)
        return key

    model, worker = machine(60)
    prompt = np.arange(1, 69)
    at_lookup = run(model, worker, reference_policy().with_(prefix_key=key_failing_at(1)),
                    (request(0, 0.25, prompt, 3),))
    at_publish = run(model, worker, reference_policy().with_(prefix_key=key_failing_at(17)),
                     (request(0, 0.25, prompt, 3),))
    for result in (at_lookup, at_publish):
        (v,) = result.violations
        assert (v.kind, v.requests, v.detail) == ("invalid_decision", ("r0",),
                                                  "prefix_key gave no usable key: ''")
    assert at_lookup.violations[0].time_s == 0.25
    steps = at_publish.steps
    assert steps.launch_s[0] == 0.25
    assert at_publish.violations[0].time_s == steps.launch_s[0] + steps.duration_s[0]
    assert nonzero(at_lookup) == nonzero(at_publish) == {"invalid_decision": 1}


# ---- leak of a request its machine stops on another event (recorder.py, _finish_run) ---------

def stop_at_launch_on_event(state: str, event: str, step_in_flight: bool):
    """The reference machine, but a request's first launched step stops it (no release)."""
    if state == "admitted" and event == "step_launched":
        return Transition("running", (STOP,))
    return lesson4.on_event(state, event, step_in_flight)


def test_a_request_its_machine_stops_for_good_fails_and_what_it_holds_is_a_leak():
    """A stop on step_launched is neither a cancel nor a finish: r0 is never scheduled
    again and never completes, so it ends failed with the worker's reason, and its pages
    are released by no later event of its own. r0 (20 prompt + 5 output tokens, 16-token
    pages) is given its ceil(20 / 16) = 2 prompt pages at admission, from a fresh free
    stack: pages 0 and 1. Before, it ended with no outcome at all and no violation."""
    model, worker = machine(40)
    result = run(model, worker, reference_policy().with_(on_event=stop_at_launch_on_event),
                 (request(0, 0.0, 20, 5),))
    (r0,) = result.requests
    assert r0.outcome == "failed"
    assert r0.reason == "stopped by its state machine without a cancel or a finish"
    assert result.unfinished == () and not result.aborted
    assert result.violations == (
        Violation("leak", result.end_s, ("r0",), (0, 1), None,
                  "r0 (failed) still holds 2 pages at the end of the run, e.g. [0, 1]"),)
