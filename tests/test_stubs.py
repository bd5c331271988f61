"""Every code lesson's stub (its exercise file as shipped) scores 0 on every criterion, each
with a feedback line saying what is not implemented."""
import pytest

from conftest import ROOT, grade


@pytest.mark.parametrize("lesson", ["lesson1", "lesson2", "lesson3", "lesson4", "lesson5"])
def test_stub_scores_zero_and_says_not_implemented(lesson):
    report = grade(lesson, ROOT / "assignments" / lesson / "exercise.py", "check")
    assert report.score == 0 and report.criteria
    for c in report.criteria:
        assert "not implemented" in c.feedback, c
