"""grader.engine.learner_policy: a learner's functions as the worker's decisions.

What must hold: every failed call (raised, timed out, junk, out of its domain) becomes a
PolicyError for the worker and is counted once, under its function, with the first one's
words kept; a usable answer reaches the worker as the course's type. The counts are what
feedback reports ("12 on_event calls gave no usable answer"), so they are checked exactly.
"""
import pytest

from grader.engine.learner_policy import CallLog, learner_decisions
from grader.engine.sandbox import CallResult
from reference.shapes import EVENTS, STATES, Admission, Transition
from reference.worker import PolicyError


class Scripted:
    """A sandbox stand-in answering each call from a script, in order; it has no budget."""

    def __init__(self, answers):
        self.answers, self.asked = list(answers), []

    def call(self, fname, *args):
        self.asked.append((fname, args))
        return self.answers.pop(0)

    def call_many(self, fname, arg_tuples):
        return [self.call(fname, *a) for a in arg_tuples]


def test_the_log_counts_each_failure_once_and_keeps_the_first_words():
    log = CallLog()
    for function, problem in [("admit", "one"), ("prefix_key", "p"), ("admit", "two"), ("admit", "three")]:
        log.note(function, problem)
    assert log.failures == {"admit": 3, "prefix_key": 1}
    assert log.first == {"admit": "one", "prefix_key": "p"}
    assert log.summary() == "admit failed on 3 calls (first: one); prefix_key failed on 1 calls (first: p)"
    assert CallLog().summary() == ""


def test_each_failed_call_is_a_policy_error_counted_under_its_function():
    script = [CallResult("ok", "k1"), CallResult("raised", detail="ValueError: no"),
              CallResult("ok", 7), CallResult("timeout", detail="prefix_key() did not return within 2 s"),
              CallResult("ok", "k2"), CallResult("bad", detail="returned a non-finite float (nan)")]
    box, log = Scripted(script), CallLog()
    prefix_key = learner_decisions(box, ("prefix_key",), log)["prefix_key"]
    got = []
    for i in range(len(script)):
        try:
            got.append(prefix_key("s", "", (i,)))
        except PolicyError:
            got.append(PolicyError)
    assert got == ["k1", PolicyError, PolicyError, PolicyError, "k2", PolicyError]
    assert log.failures == {"prefix_key": 4}            # raised, wrong type, timeout, bad
    assert log.first["prefix_key"] == "prefix_key raised ValueError: no"
    assert [args for _, args in box.asked] == [("s", "", (i,)) for i in range(len(script))]


def test_the_table_is_read_once_and_its_failed_entries_counted_once_each():
    keys = [(s, e, f) for s in STATES for e in EVENTS for f in (False, True)]
    # Every third entry fails: alternately it raises and it is not a Transition.
    script, failing = [], 0
    for i, _ in enumerate(keys):
        if i % 3 == 2:
            failing += 1
            script.append(CallResult("raised", detail="KeyError: x") if i % 2 else
                          CallResult("ok", 7))
        else:
            script.append(CallResult("ok", {"__type__": "Transition", "next_state": STATES[0], "actions": []}))
    box, log = Scripted(script), CallLog()
    on_event = learner_decisions(box, ("on_event",), log)["on_event"]
    assert len(box.asked) == len(keys) and log.failures == {"on_event": failing}
    for i, key in enumerate(keys):
        if i % 3 == 2:
            with pytest.raises(PolicyError):
                on_event(*key)
        else:
            assert on_event(*key) == Transition(STATES[0], ())
    assert len(box.asked) == len(keys) and log.failures == {"on_event": failing}   # answered from the table


def test_in_the_learners_own_tools_a_function_that_hung_is_not_asked_again():
    # An experiment with a choose_chunk that loops ran for its hour's budget: every one of
    # thousands of calls waited out its call limit and restarted the child.
    from reference.shapes import ChunkContext, CostModel
    ctx = ChunkContext(0.1, CostModel(), (), 0, 64, 16, 16)
    # A call whose answer broke the wire's rules stopped the child as well: every later call
    # restarted it (a publishable answering a million pages: forty minutes of experiment).
    for status, stopped in (("timeout", False), ("crashed", False), ("bad", True)):
        box, log = Scripted([CallResult(status, detail="it hung", stopped=stopped)]), CallLog()
        chunk = learner_decisions(box, ("choose_chunk",), log, gives_up=True)["choose_chunk"]
        for _ in range(3):
            with pytest.raises(PolicyError):
                chunk(ctx)
        assert len(box.asked) == 1 and log.failures == {"choose_chunk": 3}
        assert log.first["choose_chunk"].endswith("it is not asked again: the worker's fallback "
                                                   "answers every later call"), log.first
    # A grade keeps asking (its own budget stops it), and a plain failure never stops either.
    box, log = Scripted([CallResult("timeout", detail="x"), CallResult("raised", detail="y"),
                         CallResult("raised", detail="z")]), CallLog()
    chunk = learner_decisions(box, ("choose_chunk",), log)["choose_chunk"]
    for _ in range(3):
        with pytest.raises(PolicyError):
            chunk(ctx)
    assert len(box.asked) == 3
    # An unusable answer the child sent within the rules (its process goes on) is asked again.
    box, log = Scripted([CallResult("bad", detail="y"), CallResult("raised", detail="z")]), CallLog()
    chunk = learner_decisions(box, ("choose_chunk",), log, gives_up=True)["choose_chunk"]
    for _ in range(2):
        with pytest.raises(PolicyError):
            chunk(ctx)
    assert len(box.asked) == 2


def test_the_log_counts_usable_answers_of_every_function_together():
    # The experiments' rows are a rule's only when some call of it gave a usable answer
    # (grader/course/experiments/plugged.py), so the count must be exact, table and calls alike.
    keys = [(s, e, f) for s in STATES for e in EVENTS for f in (False, True)]
    good = {"__type__": "Transition", "next_state": STATES[0], "actions": []}
    table = [CallResult("raised", detail="KeyError: x") if i < 3 else CallResult("ok", good)
             for i, _ in enumerate(keys)]
    calls = [CallResult("ok", "k1"), CallResult("raised", detail="no"), CallResult("ok", 7),
             CallResult("ok", "k2"), CallResult("ok", "k3")]
    box, log = Scripted(table + calls), CallLog()
    assert log.answered == 0
    fields = learner_decisions(box, ("on_event", "prefix_key"), log)
    assert log.answered == len(keys) - 3                 # the table is read when it is made
    for i in range(len(calls)):
        try:
            fields["prefix_key"]("s", "", (i,))
        except PolicyError:
            pass
    assert log.answered == len(keys) - 3 + 3             # k1, k2, k3; a raise and a 7 are not


def test_a_promise_is_passed_on_only_with_an_admission():
    """reserve_pages is read only when admit admits: a wait's or a reject's promise reaches
    the worker as 0 whatever it was (the worker refuses a negative one whatever the decision),
    and an admission's promise as it was."""
    def admission(decision, pages):
        return CallResult("ok", {"__type__": "Admission", "decision": decision,
                                 "reserve_pages": pages, "reason": "why"})
    script = [admission("wait", -3), admission("reject", 7), admission("admit", 9), admission("wait", 0)]
    box, log = Scripted(script), CallLog()
    admit = learner_decisions(box, ("admit",), log)["admit"]
    got = [admit("request", "ledger") for _ in script]
    assert got == [Admission("wait", 0, "why"), Admission("reject", 0, "why"), Admission("admit", 9, "why"),
                   Admission("wait", 0, "why")]
    assert all(type(a) is Admission for a in got) and log.failures == {}
