"""Lesson 5's goodput criterion judged in this process, against a scripted learner.

tests/test_lesson5.py grades whole submissions, where a wrong goodput's feedback is read
only for its words. Here the criterion runs on record sets built by hand, whose good
requests are counted by hand from the SLO (first token by arrival + ttft, no gap above
gap_s), and the learner is two plain functions: every figure its feedback quotes, which
record sets its own qualify is asked about, and the tolerance of "right" are pinned.
"""
from __future__ import annotations

import pytest

import grader.lessons.goodput  # noqa: F401  (registers the check, as a rubric loads it)
from grader.engine.cases import Case
from grader.engine.checks import REGISTRY, CheckContext
from grader.engine.sandbox.session import CallResult
from grader.lessons.lesson5 import probe_record
from reference.shapes import Slo

SLO = Slo(ttft_s=1.0, gap_s=0.25)          # arrival at 2.0: the first token is due by 3.0


def rec(rid, outcome, times=()):
    return probe_record(rid, SLO, 2.0, outcome, times)


A = rec("a", "completed", (3.0, 3.25))        # good: first token at the deadline, a gap of gap_s
B = rec("b", "completed", (2.5, 2.75, 3.0))   # good
C = rec("c", "completed", (3.5,))             # late first token
D = rec("d", "rejected")
E = rec("e", "completed", (2.5,))             # good: one token, no gap
X = rec("x", "failed", (2.5, 2.75))


def goodput_case(name, records, window, slo=None):
    return Case("goodput", name, "public", (records, slo, window), f"set {name}")


# 3 good of 6 over 8 s: 0.375 req/s. A qualify that calls every completed request good
# counts 4 (A, B, C, E): 0.5.
SEED_1 = goodput_case("runs/seed 1", (A, B, C, D, E, X), 8.0)
# 1 good of 3 over 4 s (0.25), with the SLO passed explicitly; that qualify counts 2 (0.5).
SEED_2 = goodput_case("runs/seed 2", (A, C, D), 4.0, SLO)
RIGHT = goodput_case("right", (B, E), 2.0)                      # 2 good over 2 s: 1.0


def completed_is_good(record, slo):
    """A wrong qualify: deadlines ignored."""
    return "good" if record.outcome == "completed" else record.outcome


class Learner:
    """A submission's functions called in this process, each call recorded."""

    def __init__(self, **functions):
        self.functions, self.asked = functions, []

    def call_many(self, function, args):
        self.asked.append((function, list(args)))
        results = []
        for a in args:
            try:
                results.append(CallResult("ok", self.functions[function](*a)))
            except Exception as e:          # what the sandbox reports of a raising call
                results.append(CallResult("raised", detail=f"{type(e).__name__}: {e}"))
        return results


def judged(learner, cases):
    return REGISTRY["lesson5.goodput"](CheckContext(learner, cases), {})


def test_a_wrong_goodput_is_told_the_good_requests_and_what_its_own_qualify_counts():
    # seed 1 is wrong both ways; seed 2 agrees with the learner's own qualify (its mistake is
    # charged to the qualify criteria); the right one is right.
    learner = Learner(goodput=lambda records, slo, window: {8.0: 0.25, 4.0: 0.5, 2.0: 1.0}[window],
                      qualify=completed_is_good)
    m = judged(learner, [SEED_1, SEED_2, RIGHT])
    assert m.feedback == ("1 of 3 record sets wrong; first, set runs/seed 1: returned 0.25 req/s, expected "
                          "0.375 (3 good requests / 8 s); your qualify counts 4 good, which would give 0.5")
    assert (m.value, m.evidence) == (pytest.approx(2 / 3), ("runs/seed 1",))
    # Once a set is off, qualify is asked of every set's records, each with its set's SLO: a
    # set it splits may be one the goodput got right.
    assert learner.asked == [
        ("goodput", [SEED_1.inputs, SEED_2.inputs, RIGHT.inputs]),
        ("qualify", [(r, None) for r in (A, B, C, D, E, X)] + [(r, SLO) for r in (A, C, D)]
         + [(r, None) for r in (B, E)])]


def test_a_goodput_that_raises_on_one_set_loses_that_set_alone():
    # Its qualify is asked, to learn whether it raised the same there: it did not.
    learner = Learner(goodput=lambda records, slo, window: 1.0 if window == 2.0 else 1 / 0,
                      qualify=completed_is_good)
    broken = goodput_case("broken", (A,), 1.0)
    m = judged(learner, [RIGHT, broken])
    assert (m.value, m.feedback) == (0.5, "1 of 2 record sets wrong; first, set broken: goodput raised "
                                          "ZeroDivisionError: division by zero")
    assert [function for function, _ in learner.asked] == ["goodput", "qualify"]


def no_tokens_raise(record, slo):
    """A wrong qualify: it reads the first token of a record that has none (D, rejected)."""
    record.token_times[0]
    return completed_is_good(record, slo)


def counts_with(qualify):
    return lambda records, slo, window: sum(qualify(r, slo) == "good" for r in records) / window


def test_a_goodput_that_raises_what_its_qualify_raised_is_not_charged_for_it():
    # no_tokens_raise raises on D, so a goodput counting its verdicts raises on both seeds
    # (D is in each), and matches its own count on (B, X), which that qualify splits (B
    # good, X failed): the raises are charged to the qualify criteria alone.
    split = goodput_case("split", (B, X), 2.0)
    learner = Learner(goodput=counts_with(no_tokens_raise), qualify=no_tokens_raise)
    m = judged(learner, [SEED_1, SEED_2, split])
    assert (m.value, m.feedback) == (1.0, "all 3 record sets right")


def test_a_goodput_that_raises_with_a_qualify_that_splits_no_set_is_charged():
    # Without a set where it matches its qualify's count on a split, raising where the
    # qualify raised shows nothing: a goodput that raises everywhere would be excused.
    learner = Learner(goodput=counts_with(no_tokens_raise), qualify=no_tokens_raise)
    m = judged(learner, [SEED_1, SEED_2])
    assert m.value == 0.0
    assert m.feedback.startswith("2 of 2 record sets wrong; first, set runs/seed 1: goodput raised IndexError")


def qualify_raising(message):
    """A wrong qualify: it raises ValueError(message) on a record that has no tokens (D)."""
    def qualify(record, slo):
        if not record.token_times:
            raise ValueError(message)
        return completed_is_good(record, slo)
    return qualify


@pytest.mark.parametrize("message,qualify,raises_on", [
    # On sets of more than three records, where its qualify raised on no-token records.
    ("too many", no_tokens_raise, lambda records: len(records) > 3),
    # Where its qualify raised, in words alike up to a second " raised ", then not.
    ("a record raised there", qualify_raising("a record raised here"),
     lambda records: any(not r.token_times for r in records)),
])
def test_a_goodput_that_raises_otherwise_than_its_qualify_is_charged(message, qualify, raises_on):
    def goodput(records, slo, window):
        if raises_on(records):
            raise ValueError(message)
        return counts_with(qualify)(records, slo, window)
    split = goodput_case("split", (B, X), 2.0)
    m = judged(Learner(goodput=goodput, qualify=qualify), [SEED_1, split])
    assert (m.value, m.feedback) == (0.5, "1 of 2 record sets wrong; first, set runs/seed 1: goodput raised "
                                          f"ValueError: {message}")


@pytest.mark.parametrize("case,got,right", [
    (SEED_1, 0.375 * (1 + 1e-10), True),        # within the relative tolerance of 1e-9
    (SEED_1, 0.375 * (1 + 1e-8), False),
    (SEED_1, 0.375 - 1e-9, False),              # 2.7e-9 relative
    (goodput_case("empty", (), 4.0), 1e-13, True),   # nothing good: float dust around 0 is 0
    (goodput_case("empty", (), 4.0), 1e-9, False),
])
def test_right_is_within_a_relative_billionth(case, got, right):
    m = judged(Learner(goodput=lambda *_: got, qualify=completed_is_good), [case])
    assert m.value == (1.0 if right else 0.0), m.feedback


def test_a_qualify_that_answers_every_record_alike_excuses_nothing():
    # "good" for all six records: a goodput of 6 / 8 agrees with it, and is still wrong.
    m = judged(Learner(goodput=lambda *_: 0.75, qualify=lambda r, slo: "good"), [SEED_1])
    assert m.feedback == ("1 of 1 record sets wrong; first, set runs/seed 1: returned 0.75 req/s, "
                          "expected 0.375 (3 good requests / 8 s)")


def test_a_qualify_that_fails_on_a_record_of_the_set_excuses_nothing_there():
    def qualify(record, slo):
        if record.id == "x":
            raise KeyError("x")
        return completed_is_good(record, slo)
    m = judged(Learner(goodput=lambda *_: 0.5, qualify=qualify), [SEED_1])
    assert m.feedback == ("1 of 1 record sets wrong; first, set runs/seed 1: returned 0.5 req/s, "
                          "expected 0.375 (3 good requests / 8 s)")


def never_good(record, slo):
    """A wrong qualify that spells good as a miss: it calls no record good."""
    return "slow_tokens" if record.outcome == "completed" else record.outcome


def test_a_goodput_that_ignores_the_verdicts_gets_nothing_from_a_qualify_that_never_says_good():
    # 0.0 matches never_good's count (0) on every set, as any goodput that reads no verdict
    # would: no set is split by that qualify, so agreeing with it shows nothing.
    learner = Learner(goodput=lambda records, slo, window: 0.0, qualify=never_good)
    m = judged(learner, [SEED_1, RIGHT])
    assert m.value == 0.0
    assert m.feedback == (
        "2 of 2 record sets wrong; first, set runs/seed 1: returned 0 req/s, expected 0.375 "
        "(3 good requests / 8 s); your qualify calls none of this set's 6 records good, so a "
        "goodput that ignores the verdicts would match it too, and on no set your qualify "
        "splits does your goodput match its count")


def test_agreeing_with_a_splitting_qualify_on_one_set_opens_the_own_count_on_every_set():
    # completed_is_good splits seed 1 (4 of 6) and seed 2 (2 of 3): a goodput counting its
    # verdicts matches it there, so its wrong figures are charged to qualify alone.
    def counts_own(records, slo, window):
        return sum(completed_is_good(r, slo) == "good" for r in records) / window
    learner = Learner(goodput=counts_own, qualify=completed_is_good)
    m = judged(learner, [SEED_1, SEED_2, RIGHT])
    assert (m.value, m.feedback) == (1.0, "all 3 record sets right")


def test_a_set_the_qualify_calls_all_good_is_told_so():
    # completed_is_good calls both of (B, C) good (C's first token is late), and only
    # D's set otherwise: no set split, so counting every record earns nothing.
    all_good = goodput_case("all completed", (B, C), 2.0)           # 1 good over 2 s: 0.5
    rejected = goodput_case("rejected", (D,), 1.0)
    learner = Learner(goodput=lambda records, slo, window: len(records) / window,
                      qualify=completed_is_good)
    m = judged(learner, [all_good, rejected])
    assert m.value == 0.0
    assert m.feedback.startswith(
        "2 of 2 record sets wrong; first, set all completed: returned 1 req/s, expected 0.5 "
        "(1 good requests / 2 s); your qualify calls all of this set's 2 records good, so a "
        "goodput that ignores the verdicts would match it too")


def test_a_set_split_one_good_to_one_not_shows_the_goodput_reads_the_verdicts():
    # completed_is_good counts C (late) good and D not: 1 of 2, a split. The oracle counts 0.
    split = goodput_case("one of two", (C, D), 2.0)
    def counts_own(records, slo, window):
        return sum(completed_is_good(r, slo) == "good" for r in records) / window
    m = judged(Learner(goodput=counts_own, qualify=completed_is_good), [split])
    assert (m.value, m.feedback) == (1.0, "1 of 1 record sets right")
