"""No credit for junk: constant and trivial submissions of every code lesson earn at most
their tier's bound (tests/junk.py: BOUNDS), each graded the way a learner's check is.

A constant ignores every input, so it earns nothing on any criterion; a trivial answer (an
argument passed back) may keep a property it has honestly (a key that is its scope is
deterministic), at most a tenth of the lesson."""
import pytest

import junk
import reference.shapes as shapes
from conftest import SECRET, grade
from grader.engine.validate import coerce


def test_the_issue_s_examples_are_among_the_constants():
    """The answers the issue found paid: a negative chunk, one key, always rollback or
    inconclusive, a constant admit."""
    constants = {f: set(c) for lesson in junk.FUNCTIONS.values() for f, (_, c, _) in lesson.items()}
    assert "ChunkPlan(-1, 'ok')" in constants["choose_chunk"]
    assert "'k'" in constants["prefix_key"]
    assert {"ReleaseDecision('rollback')", "ReleaseDecision('inconclusive')"} <= constants["decide_release"]
    assert "Admission('admit', 0)" in constants["admit"]


def _value(expression: str):
    return eval(expression, vars(shapes).copy())       # tests' own, fixed expressions


@pytest.mark.parametrize("lesson", junk.LESSONS)
def test_every_constant_is_a_value_the_validator_accepts(lesson):
    """Junk, not a type error: each constant passes validation, so only the criteria can
    refuse it; and each lesson's submissions give every answer of every function."""
    from grader.engine.learner_policy import RETURNS
    returns = {**RETURNS, "kv_bytes_per_token": int, "pages_for": int, "pool_pages": int,
               "worst_case_pages": int, "qualify": str, "goodput": float,
               "decide_release": shapes.ReleaseDecision}
    for function, (_, constants, _) in junk.FUNCTIONS[lesson].items():
        for expression in constants:
            value = _value(expression)
            plain = {"__type__": type(value).__name__, **vars(value)} if hasattr(value, "__dataclass_fields__") \
                else list(value) if isinstance(value, tuple) else value
            coerce(plain, returns[function])
    for tier in junk.TIERS:
        sources = "\n".join(source for _, source in junk.submissions(lesson, tier))
        for function, (_, constants, trivial) in junk.FUNCTIONS[lesson].items():
            for expression in (trivial or constants) if tier == "trivial" else constants:
                assert f"    return {expression}\n" in sources, (lesson, tier, expression)


# Lessons whose checks are quick enough to grade the hidden cases too (the others run the
# worker on every hidden scenario for each junk submission; their public runs are graded).
GRADED_HIDDEN = ("lesson1", "lesson5")


@pytest.mark.parametrize("tier", junk.TIERS)
@pytest.mark.parametrize("lesson", junk.LESSONS)
def test_junk_earns_at_most_its_bound(lesson, tier, tmp_path):
    bound = junk.BOUNDS[tier]
    mode = "grade" if lesson in GRADED_HIDDEN else "check"
    for path in junk.write(lesson, tier, tmp_path):
        report = grade(lesson, path, mode, SECRET)
        paid = {c.id: c.score for c in report.criteria if c.score > 0}
        assert report.score <= bound * report.max_score, (path.stem, paid)
        if tier == "constant":
            assert not paid, (path.stem, paid)
