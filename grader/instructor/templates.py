"""The course's known submissions of a lesson: the reference, the stub and the wrong ones.

Tests grade them, generated classes are made of them, and ``grader release`` records the
oracle's answers while grading them (every path a mistake takes through a lesson's checks
asks its own questions). Wrong solutions are files under tests/submissions/<lesson>/, or
mutations of a correct one listed in its mutants.yaml: each names the (old, new)
replacements that turn the lesson's base (BASES) into it, and a mutant is written only if
each replacement applies exactly once, so it differs from a correct solution exactly where
it claims to.
"""
from __future__ import annotations

from pathlib import Path

from grader.engine.errors import InputError
from grader.engine.layout import read_yaml

# The correct solution each lesson's mutants.yaml applies to (it keeps full marks itself).
BASES = {"lesson2": "alt_correct.py", "lesson3": "alt_search.py", "lesson4": "plain_correct.py",
         "lesson5": "alt_correct.py"}


def submissions(root: Path, lesson: str) -> Path:
    return root / "tests" / "submissions" / lesson


def write_mutant(base: Path, mutations, folder: Path, name: str) -> Path:
    """``base`` with each (old, new) replaced exactly once."""
    source = base.read_text()
    for old, new in mutations:
        if source.count(old) != 1:
            raise ValueError(f"the mutation {name} no longer applies to {base.name}: {old!r}")
        source = source.replace(old, new)
    path = folder / f"{name}.py"
    path.write_text(source)
    return path


def mutations(root: Path, lesson: str) -> dict[str, tuple[tuple[str, str], ...]]:
    """Each of the lesson's mutants: its (old, new) pairs ({} for a lesson without mutants)."""
    path = submissions(root, lesson) / "mutants.yaml"
    if not path.is_file():
        return {}
    listed = read_yaml(path)
    if not isinstance(listed, dict):
        raise InputError(str(path), "expected a mapping of mutant names to their replacements")
    found = {}
    for name, entry in listed.items():
        replace = entry.get("replace") if isinstance(entry, dict) else None
        if not isinstance(replace, list) or not replace or not all(
                isinstance(r, dict) and isinstance(r.get("old"), str) and isinstance(r.get("new"), str)
                for r in replace):
            raise InputError(f"{path}: {name}.replace", "expected a list of {old: text, new: text}")
        found[name] = tuple((r["old"], r["new"]) for r in replace)
    return found


def templates(root: Path, lesson: str, folder: Path) -> dict[str, Path]:
    """The reference first, the stub, then every test submission by name: real files (and
    folders, for a lesson graded on a folder) and the mutants, written into ``folder``."""
    found: dict[str, Path] = {}
    for ref in (root / "reference" / "solutions" / f"{lesson}.py", root / "reference" / "solutions" / lesson):
        if ref.exists():
            found["reference"] = ref
    for stub in (root / "assignments" / lesson / "exercise.py", root / "assignments" / lesson / "submission"):
        if stub.exists():
            found["stub"] = stub
    mine = submissions(root, lesson)
    if mine.is_dir():
        found.update({p.stem: p for p in sorted(mine.iterdir())
                      if p.suffix == ".py" or (p.is_dir() and not p.name.startswith((".", "__")))})
    base = mine / BASES.get(lesson, "")
    for name, pairs in sorted(mutations(root, lesson).items()):
        found[name] = write_mutant(base, pairs, folder, name)
    return found
