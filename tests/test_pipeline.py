"""The grading pipeline's own steps, with stand-in children and checks made here.

tests/test_engine.py and the lessons' files grade real submissions, where what a
criterion sees and which child it asks are read only through a lesson's scores. Here the
checks record what they were handed (which cases, through which child), the children are
stand-ins that count how many were opened, and every score is worked out by hand from the
credit rule: which cases a criterion of each visibility sees, which child hears hidden
inputs, when a grade refuses, and what the report's notes say.
"""
from __future__ import annotations

import time
from types import SimpleNamespace

import pytest

from conftest import ROOT
from grader.engine import pipeline
from grader.engine.cases import Case
from grader.engine.checks import REGISTRY, Measure
from grader.engine.errors import InputError
from grader.engine.layout import Course
from grader.engine.rubric import Credit, Criterion, Rubric
from grader.engine.submission import load_submission

PUB_A = Case("probe", "a", "public", 1)
PUB_B = Case("probe", "b", "public", 2)
HID_C = Case("probe", "probe#0", "hidden", 3)
CASES = [PUB_A, PUB_B, HID_C]
LINEAR = Credit("linear", 0.0, 1.0)


class Child:
    """A stand-in for a sandbox child: nothing is called through it here."""

    load_error = None
    isolation = "a stand-in"
    lacks = ""

    def __init__(self, name, confined=True, **extra):
        self.name, self.confined = name, confined
        self.__dict__.update(extra)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        pass


class Children:
    """The factory grade_submission opens its children with: the i-th opened is made with
    the i-th keyword set given (a child's `printed`, `confined`)."""

    def __init__(self, *settings):
        self.settings, self.opened = list(settings), []

    def __call__(self):
        extra = self.settings[len(self.opened)] if len(self.opened) < len(self.settings) else {}
        child = Child(["public child", "hidden child"][len(self.opened)], **extra)
        self.opened.append(child)
        return child


@pytest.fixture
def seen(monkeypatch):
    """Register the checks of this file: each records (criterion id, child, cases, public child)."""
    calls = []

    def recording(value, checked=True):
        def run(ctx, params):
            calls.append((params["id"], getattr(ctx.sandbox, "name", None),
                          [c.name for c in ctx.cases], getattr(ctx.public_sandbox, "name", None)))
            return Measure(value, f"measured on {len(ctx.cases)}", checked=checked)
        return run
    monkeypatch.setitem(REGISTRY, "test.full", recording(1.0))
    monkeypatch.setitem(REGISTRY, "test.third", recording(1 / 3))
    monkeypatch.setitem(REGISTRY, "test.unchecked", recording(1.0, checked=False))
    return calls


def crit(cid, visibility, check="test.full", points=1.0, credit=LINEAR):
    # The id goes to the check as a param, so what it records names the criterion.
    return Criterion(cid, f"title {cid}", points, check, visibility, credit, {"id": cid})


def rubric(*criteria):
    return Rubric("lesson1", "A test rubric", 1, tuple(criteria), "rubrics/lesson1.yaml")


@pytest.fixture
def submission(tmp_path):
    path = tmp_path / "mine.py"
    path.write_text("x = 1\n")
    return load_submission(path)


def graded(submission, mode, *criteria, children=None, cases=CASES):
    children = children or Children()
    report = pipeline.grade_submission("lesson1", submission, Course(ROOT), mode=mode,
                                       secret=b"s" if mode == "grade" else None,
                                       rubric=rubric(*criteria), cases=cases, sandbox=children)
    return report, children


# ---------------------------------------------------------------------------- score

def test_a_score_is_the_credit_share_of_the_points_to_four_places(seen):
    # linear from 0 to 1 at a measure of 1/3: a third of 3 points, 1.0 exactly; of 1 point 0.3333.
    third = pipeline.score(crit("x", "both", points=1.0), Measure(1 / 3, ""), "")
    assert (third.score, third.max_score, third.passed) == (0.3333, 1.0, False)
    full = pipeline.score(crit("x", "both", points=2.0), Measure(1.0, ""), "")
    assert (full.score, full.passed) == (2.0, True)
    # Just under the target is not a pass, whatever it rounds to.
    near = pipeline.score(crit("x", "both", points=1.0), Measure(0.99999, ""), "")
    assert (near.score, near.passed) == (1.0, False)


def test_a_measure_not_checked_here_scores_nothing_and_does_not_pass(seen):
    r = pipeline.score(crit("x", "both"), Measure(1.0, "", checked=False), "")
    assert (r.score, r.passed, r.checked) == (0.0, False, False)


# ---------------------------------------------------------------------------- what a criterion sees

def test_in_a_grade_each_visibility_sees_its_cases_and_hidden_inputs_go_to_the_hidden_child(seen, submission):
    report, children = graded(submission, "grade", crit("pub", "public"), crit("hid", "hidden"),
                              crit("both", "both"))
    assert [c.name for c in children.opened] == ["public child", "hidden child"]
    assert seen == [
        # Public cases only: measured once, on the public child, and told in full.
        ("pub", "public child", ["a", "b"], "public child"),
        # Every case: its public feedback first, on the public child and the public cases...
        ("both", "public child", ["a", "b"], "public child"),
        # ...then the hidden measures, on the hidden child.
        ("hid", "hidden child", ["probe#0"], "public child"),
        ("both", "hidden child", ["a", "b", "probe#0"], "public child"),
    ]
    feedback = {r.id: r.public_feedback for r in report.criteria}
    assert feedback == {"pub": "measured on 2", "hid": pipeline.HIDDEN_LATER,
                        "both": "measured on 2 (public cases; the hidden cases' feedback is published later)"}


def test_a_criterion_whose_cases_are_all_hidden_tells_nothing_early(seen, submission):
    report, _ = graded(submission, "grade", crit("both", "both"), cases=[HID_C])
    assert seen == [("both", "hidden child", ["probe#0"], "public child")]
    assert report.criteria[0].public_feedback == pipeline.HIDDEN_LATER


def test_a_check_runs_one_child_and_no_hidden_criterion(seen, submission):
    report, children = graded(submission, "check", crit("pub", "public"), crit("hid", "hidden"),
                              crit("both", "both"), cases=[PUB_A, PUB_B])
    assert [c.name for c in children.opened] == ["public child"]
    assert seen == [("pub", "public child", ["a", "b"], "public child"),
                    ("both", "public child", ["a", "b"], "public child")]
    assert [r.id for r in report.criteria] == ["pub", "both"]


def test_a_check_builds_no_hidden_case_and_a_grade_builds_them_from_the_secret(seen, submission, monkeypatch):
    secrets = []
    monkeypatch.setattr(pipeline, "build_cases",
                        lambda lesson, course, secret: secrets.append(secret) or [PUB_A])
    for mode in ("check", "grade"):
        pipeline.grade_submission("lesson1", submission, Course(ROOT), mode=mode, secret=b"s",
                                  rubric=rubric(crit("pub", "public")), sandbox=Children())
    assert secrets == [None, b"s"]


# ---------------------------------------------------------------------------- refusals and notes

def test_a_grade_refuses_a_criterion_it_could_not_check_and_a_check_reports_it(seen, submission):
    with pytest.raises(InputError) as e:
        graded(submission, "grade", crit("pub", "public"), crit("off", "public", check="test.unchecked"))
    assert "criteria off could not be checked here" in str(e.value)
    report, _ = graded(submission, "check", crit("off", "public", check="test.unchecked"))
    assert [(r.id, r.checked, r.score) for r in report.criteria] == [("off", False, 0.0)]


@pytest.mark.parametrize("settings, printed", [
    ((), False),                                    # a child that does not say it printed
    (({"printed": False},), False),
    (({"printed": True},), True),
    (({}, {"printed": True}), False),               # the hidden child's printing is never told
])
def test_printing_is_told_from_the_public_child_alone(seen, submission, settings, printed):
    report, _ = graded(submission, "grade", crit("pub", "public"), children=Children(*settings))
    assert (pipeline.PRINTED in report.notes) == printed


@pytest.mark.parametrize("settings", [({"confined": False},), ({}, {"confined": False})],
                         ids=["public child", "hidden child"])
def test_either_child_unconfined_is_told(seen, submission, settings):
    report, _ = graded(submission, "grade", crit("pub", "public"), children=Children(*settings))
    assert any(n.startswith("not confined:") for n in report.notes)
    report, _ = graded(submission, "grade", crit("pub", "public"))
    assert not any(n.startswith("not confined:") for n in report.notes)


def test_a_grade_names_the_grading_code_it_ran_and_a_check_the_release(seen, submission):
    """A grade's version carries the digest of its grading code (the gradebook regrades a
    result whose code changed); a check, which no gradebook keeps, names the release alone."""
    from grader import __version__
    from grader.engine.fingerprint import grading_version
    assert grading_version().startswith(__version__ + "+")
    for mode, version in (("grade", grading_version()), ("check", __version__)):
        report, _ = graded(submission, mode, crit("pub", "public"), cases=[PUB_A])
        assert report.grader_version == version, mode


def test_the_duration_is_the_grades_own_in_milliseconds(seen, submission, monkeypatch):
    # Read against a clock around the call: no bound on how long the call takes.
    before = time.perf_counter()
    report, _ = graded(submission, "check", crit("pub", "public"), cases=[PUB_A])
    after = time.perf_counter()
    assert 0.0 <= report.duration_s <= round(after - before, 3) + 0.001
    assert report.duration_s == round(report.duration_s, 3)
    # The grade's own clock, read at its start and at its end, made to say 1.23456 s apart.
    clock = iter([100.0, 101.23456])
    monkeypatch.setattr(pipeline, "time", SimpleNamespace(perf_counter=lambda: next(clock)))
    report, _ = graded(submission, "check", crit("pub", "public"), cases=[PUB_A])
    assert report.duration_s == 1.235
