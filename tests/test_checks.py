"""grader.engine.checks: the pieces every lesson's criteria are built from.

Each is checked on its own with hand-made answers, so a slip in one shows here and not
only as a changed score somewhere in a lesson: the words a failed call gets, the stub's
one line, how kinds of cases weigh, and that a failed call never hides the answers after it.
"""
import dataclasses

import pytest

from grader.engine.cases import Case
from grader.engine.checks import (Answer, CheckContext, Measure, ask, call_failure, grade_answers,
                                  not_checked_here, not_implemented)
from grader.engine.pipeline import score
from grader.engine.rubric import Credit, Criterion
from grader.engine.sandbox import CallResult


def case(name, kind="a"):
    return Case("probe", name, "public", kind, label=f"probe {name}")


@pytest.mark.parametrize("result,words", [
    (CallResult("raised", detail="NotImplementedError: later"), "f is not implemented yet (it raises NotImplementedError)"),
    (CallResult("raised", detail="ValueError: NotImplementedError"), "f raised ValueError: NotImplementedError"),
    (CallResult("bad", detail="NotImplementedError"), "f returned something unusable: NotImplementedError"),
    (CallResult("missing"), "f is not defined in your file"),
    (CallResult("timeout"), "f did not return in time (an endless loop?)"),
    # A call's own limit, said: slow work on a large input ends there too, not only a loop.
    (CallResult("timeout", detail="f() did not return within 2 s"),
     "f did not return in time (2 s a call): an endless loop, or work that grows too fast with its input?"),
    (CallResult("timeout", detail="f() did not return within 0.5 s"),
     "f did not return in time (0.5 s a call): an endless loop, or work that grows too fast with its input?"),
    # The whole submission's budget ran out during the call: slow calls do that, not only a loop.
    (CallResult("timeout", detail="f() was stopped: the time budget for this submission (60 s) ran out"),
     "f was stopped: the submission used up its time budget during this call; every call counts "
     "against it, so a function that is slow on each call spends it as an endless loop would"),
    (CallResult("crashed", detail="SIGKILL"), "f ended the process: SIGKILL"),
    # The sandbox's sentence names the call: said once, not "f ended the process: f() ended ...".
    (CallResult("crashed", detail="f() ended the process running x.py: the process exited with code 1"),
     "f ended the process running x.py: the process exited with code 1"),
    (CallResult("unavailable"), "f was not called: the submission used up its time budget"),
])
def test_a_failed_call_is_one_line_in_the_learners_words(result, words):
    assert call_failure("f", result) == words


STUB = "f is not implemented yet (it raises NotImplementedError)"


@pytest.mark.parametrize("problems,said", [
    ([STUB, STUB, STUB], STUB),
    ([STUB], STUB),
    ([STUB, STUB, "f raised ValueError: x"], ""),      # written in part: judge what is there
    ([STUB, ""], ""),                                   # one answer is usable
    (["f raised ValueError: x"] * 2, ""),
    ([], ""),
])
def test_only_a_stub_that_answers_nothing_is_called_not_implemented(problems, said):
    answers = [Answer(case(str(i)), value=None if p else 1, problem=p) for i, p in enumerate(problems)]
    assert not_implemented(answers) == said


def test_a_stub_beside_any_other_problem_is_judged_as_written():
    # A set of problems has no order: with 25 different second problems, a rule that looked
    # only at whichever came first would be caught on some of them, whatever the hash seed.
    for other in [f"f raised ValueError: {i}" for i in range(24)] + [""]:
        answers = [Answer(case("a"), problem=STUB), Answer(case("b"), value=1, problem=other)]
        assert not_implemented(answers) == "", other


def right_if_one(c, value):
    return "" if value == 1 else f"said {value}"


def test_kinds_weigh_the_same_and_worst_takes_the_lowest():
    # Kind a: 3 of 4 right; kind b: 1 of 2 right.
    answers = [Answer(case(f"a{i}", "a"), value=v) for i, v in enumerate((1, 1, 1, 0))] + \
              [Answer(case(f"b{i}", "b"), value=v) for i, v in enumerate((1, 0))]
    by = lambda c: c.inputs                                     # noqa: E731
    assert grade_answers(answers, right_if_one).value == pytest.approx(4 / 6)
    assert grade_answers(answers, right_if_one, by=by).value == pytest.approx((3 / 4 + 1 / 2) / 2)
    assert grade_answers(answers, right_if_one, by=by, worst=True).value == pytest.approx(1 / 2)
    m = grade_answers(answers, right_if_one, "chunks", by=by)
    assert m.feedback == "2 of 6 chunks wrong; first, probe a3: said 0"
    assert m.evidence == ("a3", "b1")


def test_clauses_weigh_the_same_within_their_kind_and_kinds_keep_their_weight():
    # Kind a: clause x 5 of 5 right, clause y 0 of 1; kind b: 1 of 2 right.
    answers = [Answer(case(f"a{i}", ("a", "x")), value=1) for i in range(5)] + \
              [Answer(case("a5", ("a", "y")), value=0)] + \
              [Answer(case(f"b{i}", ("b", "")), value=v) for i, v in enumerate((1, 0))]
    by, within = (lambda c: c.inputs[0]), (lambda c: c.inputs[1])     # noqa: E731
    assert grade_answers(answers, right_if_one, by=by).value == pytest.approx((5 / 6 + 1 / 2) / 2)
    assert grade_answers(answers, right_if_one, by=by, within=within).value == pytest.approx(
        ((1 + 0) / 2 + 1 / 2) / 2)
    assert grade_answers(answers, right_if_one, by=by, within=within, worst=True).value == pytest.approx(1 / 2)


def test_partial_credit_and_nothing_to_grade():
    answers = [Answer(case("x"), value=0.8), Answer(case("y"), value=1)]
    partial = grade_answers(answers, lambda c, v: "" if v == 1 else (v, f"{v:.0%} of the largest"))
    assert partial.value == pytest.approx(0.9) and "1 of 2 probes wrong" in partial.feedback
    nothing = grade_answers([], right_if_one, "probes")
    assert (nothing.value, nothing.feedback, nothing.checked) == (0.0, "no probes to grade", True)


def test_all_right_counts_one_as_one_of_one():
    assert grade_answers([Answer(case(f"x{i}"), value=1) for i in range(3)], right_if_one).feedback == \
        "all 3 probes right"
    assert grade_answers([Answer(case("x"), value=1)], right_if_one).feedback == "1 of 1 probes right"


def test_a_criterion_this_edition_cannot_check_scores_nothing_and_says_why():
    m = not_checked_here("needs the reference's runs")
    assert (m.value, m.feedback, m.checked) == (0.0, "needs the reference's runs", False)
    c = Criterion("c", "C", 3.0, "lesson1.kv_bytes", "both", Credit("linear", 0.0, 0.5))
    result = score(c, dataclasses.replace(m, value=1.0), "")
    assert (result.score, result.passed, result.checked) == (0.0, False, False)


def test_what_crosses_into_a_report_is_frozen():
    for value in (Measure(1.0, "ok"), Answer(case("x"), value=1)):
        with pytest.raises(dataclasses.FrozenInstanceError):
            value.value = 0


class Scripted:
    def __init__(self, results):
        self.results, self.asked, self.restarts = results, [], 0

    def call_many(self, function, args):
        self.asked.append((function, list(args)))
        return self.results[:len(args)]

    def restart(self):
        self.restarts += 1


def test_a_failed_call_costs_only_its_own_answer():
    cases = [case("p"), case("q"), case("r")]
    box = Scripted([CallResult("raised", detail="KeyError: 3"), CallResult("ok", 7), CallResult("ok", "x")])
    got = ask(CheckContext(box, cases), "f", cases, lambda c: (c.name,), int)
    assert [(a.case.name, a.value, a.problem) for a in got] == [
        ("p", None, "f raised KeyError: 3"), ("q", 7, ""),
        ("r", None, "f returned str 'x', expected int")]
    assert box.asked == [("f", [("p",), ("q",), ("r",)])]


def test_restart_restarts_each_child_once():
    one, other = Scripted([]), Scripted([])
    CheckContext(one, [], public_sandbox=one).restart()
    assert one.restarts == 1
    CheckContext(one, [], public_sandbox=other).restart()
    assert (one.restarts, other.restarts) == (2, 1)
    CheckContext(one, []).restart()
    assert one.restarts == 3


@pytest.mark.parametrize("value", [float("nan"), float("inf"), -1e-9, 1 + 1e-9, -float("inf")])
def test_a_measure_outside_zero_to_one_is_a_checks_bug_never_graded(value):
    # NaN compares false both ways: a linear credit would have paid it in full.
    with pytest.raises(ValueError, match="a measure is a share from 0 to 1"):
        Measure(value, "")


def test_a_measure_at_either_end_is_kept():
    import numpy as np
    assert [Measure(v, "").value for v in (0.0, -0.0, 1.0, np.float64(0.5))] == [0.0, 0.0, 1.0, 0.5]
