"""Wrong test solutions written as mutations of a correct one, not kept as copied files.

tests/submissions/<lesson>/mutants.yaml names each wrong solution with the (old, new)
replacements that turn the lesson's base (BASES) into it, and why it is wrong. The lesson's
tests write a mutant where they need it (write_mutant checks each replacement applies
exactly once, so a mutant differs from a correct solution exactly where it claims to);
tests/classroom.py writes every one of them once per process for its generated classes.
"""
from __future__ import annotations

import atexit
import functools
import shutil
import tempfile
from pathlib import Path

import yaml

SUBMISSIONS = Path(__file__).resolve().parent / "submissions"
# The correct solution each lesson's mutants.yaml applies to (it keeps full marks itself).
BASES = {"lesson2": "alt_correct.py", "lesson3": "alt_search.py", "lesson4": "plain_correct.py",
         "lesson5": "alt_correct.py"}


def write_mutant(base: Path, mutations, folder: Path, name: str) -> Path:
    """``base`` with each (old, new) replaced exactly once: a wrong solution that differs
    from a correct one exactly where it claims to, instead of a copied file."""
    source = base.read_text()
    for old, new in mutations:
        assert source.count(old) == 1, f"the mutation {name} no longer applies to {base.name}: {old!r}"
        source = source.replace(old, new)
    path = folder / f"{name}.py"
    path.write_text(source)
    return path


@functools.cache
def mutations(lesson: str) -> dict[str, tuple[tuple[str, str], ...]]:
    """Each of the lesson's mutants: its (old, new) pairs ({} for a lesson without mutants)."""
    path = SUBMISSIONS / lesson / "mutants.yaml"
    if not path.is_file():
        return {}
    listed = yaml.safe_load(path.read_text())
    return {name: tuple((r["old"], r["new"]) for r in entry["replace"]) for name, entry in listed.items()}


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
