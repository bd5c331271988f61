"""A solution written from each lesson's README alone, without the reference solution,
reaches full marks on the public check: the README teaches all a learner needs, though it
no longer dictates the algorithm (tests/test_learner_files.py). Each differs from the
reference where the README leaves a choice: lesson 3 searches page counts where the
reference solves the inequality, lesson 4 keys by JSON and SHA-256 where the reference
length-prefixes and uses BLAKE2b."""
import pytest

from conftest import SUBMISSIONS, full, grade, scores


@pytest.mark.parametrize("lesson", ["lesson1", "lesson2", "lesson3", "lesson4", "lesson5"])
def test_a_solution_from_the_readme_gets_full_marks(lesson):
    report = grade(lesson, SUBMISSIONS / lesson / "from_readme.py", "check")
    assert scores(report) == full(report), [c.feedback for c in report.criteria if c.score < c.max_score]
