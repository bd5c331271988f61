"""Wrong test solutions written as mutations of a correct one, not kept as copied files.

The mechanism is grader.instructor.templates (``grader release`` records the oracle's
answers on the same submissions); here the lesson tests write a mutant where they need it,
and tests/classroom.py writes every one of them once per process for its generated classes.
"""
from __future__ import annotations

import atexit
import functools
import shutil
import tempfile
from pathlib import Path

from grader.instructor import templates as course_templates

SUBMISSIONS = Path(__file__).resolve().parent / "submissions"
ROOT = SUBMISSIONS.parent.parent
BASES = course_templates.BASES
write_mutant = course_templates.write_mutant


@functools.cache
def mutations(lesson: str) -> dict[str, tuple[tuple[str, str], ...]]:
    """Each of the lesson's mutants: its (old, new) pairs ({} for a lesson without mutants)."""
    return course_templates.mutations(ROOT, lesson)


def wrong_file(lesson: str, name: str, folder: Path) -> Path:
    """The lesson's test submission ``name``: its file under tests/submissions/<lesson>/, or
    else its mutant, written into ``folder``."""
    real = SUBMISSIONS / lesson / f"{name}.py"
    if real.is_file():
        return real
    return write_mutant(SUBMISSIONS / lesson / BASES[lesson], mutations(lesson)[name], folder, name)


@functools.cache
def _folder() -> Path:
    folder = Path(tempfile.mkdtemp(prefix="grader-mutants-"))
    atexit.register(shutil.rmtree, folder, True)
    return folder


@functools.cache
def written(lesson: str) -> dict[str, Path]:
    """Every mutant of the lesson, written once per process into a folder of its own."""
    found = mutations(lesson)
    if not found:
        return {}
    folder = _folder() / lesson
    folder.mkdir()
    real = {p.stem for p in (SUBMISSIONS / lesson).glob("*.py")}
    assert not real & set(found), f"{lesson}: a mutant has a real file's name: {real & set(found)}"
    return {name: wrong_file(lesson, name, folder) for name in sorted(found)}
