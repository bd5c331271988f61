"""Shared test helpers: grade a submission file the way the CLI does."""
from __future__ import annotations

from pathlib import Path

import pytest

from grader.course import find_course
from grader.pipeline import grade_path

ROOT = Path(__file__).resolve().parent.parent
SUBMISSIONS = ROOT / "tests" / "submissions"
SECRET = b"test-secret-for-hidden-cases"


def grade(lesson: str, path, mode: str = "check", secret: bytes | None = None):
    return grade_path(lesson, Path(path), find_course(str(ROOT)), mode=mode,
                      secret=secret if mode == "grade" else None)


def scores(report) -> dict[str, float]:
    return {c.id: c.score for c in report.criteria}


def full(report) -> dict[str, float]:
    return {c.id: c.max_score for c in report.criteria}


@pytest.fixture(scope="session")
def root() -> Path:
    return ROOT
