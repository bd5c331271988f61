"""Which files of a Gradescope upload are the submission, whatever the student named them.

Gradescope puts the upload in /autograder/submission/ as the student made it: one file, a
few, or (from GitHub) a whole repository. Files are listed without following symbolic
links, hidden folders and caches skipped, and never run: a candidate is only read and, for
a code lesson, parsed.

- A code lesson: the one .py or .ipynb file; among several, the one that defines most of
  the functions the lesson's exercise stub declares (a file named exercise.* or lessonN.*
  wins a tie); no such file, or a tie, is a clear result listing what was found.
- A lesson whose submission is a folder of YAML files (lesson 6): each expected file by
  its name (.yaml or .yml, any case), else by what it holds (a diagnosis lists causes, a
  design sheet has the sheet's sections), else the one YAML file left for the one name
  left. The files are copied under their expected names into a folder of their own.
"""
from __future__ import annotations

import ast
import os
import shutil
import stat
from dataclasses import dataclass
from pathlib import Path

from grader.course.sheet import SECTIONS, read_yaml

CODE_SUFFIXES = (".py", ".ipynb")
YAML_SUFFIXES = (".yaml", ".yml")
SKIPPED_FOLDERS = {"__pycache__", ".ipynb_checkpoints", "node_modules"}
MAX_LISTED = 5000            # a repository upload: stop listing there
PEEK_BYTES = 1 << 20         # what is read of a candidate to tell what it is
# What tells lesson 6's files apart when their names do not: top-level keys.
CONTENT_KEYS = {"diagnosis.yaml": frozenset({"causes"}), "design_sheet.yaml": frozenset(SECTIONS)}


@dataclass(frozen=True)
class Picked:
    """The submission to grade: a file, or a folder holding the expected files."""
    path: Path
    shown: str                      # what the student uploaded, as they named it
    notes: tuple[str, ...] = ()


@dataclass(frozen=True)
class Missing:
    why: str                        # one paragraph the student can act on


def uploaded(folder: Path) -> list[Path]:
    """Regular files under ``folder`` (relative paths, sorted); links not followed."""
    found: list[Path] = []
    for here, dirs, files in os.walk(folder):
        dirs[:] = sorted(d for d in dirs if not d.startswith(".") and d not in SKIPPED_FOLDERS)
        for name in sorted(files):
            path = Path(here) / name
            if name.startswith(".") or not stat.S_ISREG(path.lstat().st_mode):
                continue
            found.append(path.relative_to(folder))
            if len(found) >= MAX_LISTED:
                return found
    return found


def _listing(files: list[Path]) -> str:
    if not files:
        return "your upload is empty"
    shown = ", ".join(str(f) for f in files[:12])
    return f"your upload holds {shown}{' ...' if len(files) > 12 else ''}"


def stub_functions(stub: Path) -> tuple[str, ...]:
    """The top-level functions a lesson's exercise stub declares."""
    tree = ast.parse(stub.read_text(encoding="utf-8"))
    return tuple(n.name for n in tree.body if isinstance(n, ast.FunctionDef))


def _defined(path: Path) -> set[str]:
    """Top-level function names of a .py file or a notebook's code cells (parsed, not run)."""
    from grader.engine.errors import InputError
    from grader.engine.submission import load_submission
    try:
        source = load_submission(path).source
        tree = ast.parse(source)
    except (InputError, SyntaxError, ValueError, RecursionError, MemoryError):
        return set()
    return {n.name for n in tree.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))}


def pick_code(folder: Path, lesson: str, functions: tuple[str, ...]) -> Picked | Missing:
    files = uploaded(folder)
    candidates = [f for f in files if f.suffix.lower() in CODE_SUFFIXES]
    wanted = ", ".join(functions)
    if not candidates:
        return Missing(f"no .py or .ipynb file to grade: upload your {lesson} exercise as a Python "
                       f"file or a Jupyter notebook defining {wanted}; {_listing(files)}")
    if len(candidates) == 1:
        return Picked(folder / candidates[0], str(candidates[0]))

    def rank(f: Path) -> tuple[int, bool]:
        return (len(_defined(folder / f) & set(functions)), f.stem.lower() in ("exercise", lesson))
    ranked = sorted(candidates, key=rank, reverse=True)
    best = rank(ranked[0])
    if best[0] == 0 or rank(ranked[1]) == best:
        return Missing(f"cannot tell which file to grade: {len(candidates)} Python files or "
                       f"notebooks and {'none defines' if best[0] == 0 else 'more than one defines'} "
                       f"the most of {wanted}; upload one file ({_listing(files)})")
    others = ", ".join(str(f) for f in ranked[1:6])
    return Picked(folder / ranked[0], str(ranked[0]),
                  (f"graded {ranked[0]}, the file that defines the lesson's functions; "
                   f"not graded: {others}{' ...' if len(ranked) > 6 else ''}",))


def _role_by_content(path: Path) -> str | None:
    with open(path, "rb") as f:
        data, problems = read_yaml(f.read(PEEK_BYTES))
    if problems or not isinstance(data, dict):
        return None
    roles = [name for name, keys in CONTENT_KEYS.items() if keys & set(data)]
    return roles[0] if len(roles) == 1 else None


def pick_folder(folder: Path, names: tuple[str, ...], into: Path) -> Picked | Missing:
    """Find each of ``names`` in the upload and copy it to ``into``/<name>."""
    files = [f for f in uploaded(folder) if f.suffix.lower() in YAML_SUFFIXES]
    roles: dict[str, Path] = {}
    for name in names:
        stem = Path(name).stem.lower()
        same = [f for f in files if f.stem.lower() == stem]
        if len(same) == 1:
            roles[name] = same[0]
    for f in files:
        if f in roles.values():
            continue
        role = _role_by_content(folder / f)
        if role in names and role not in roles:
            roles[role] = f
    left = [f for f in files if f not in roles.values()]
    unfilled = [n for n in names if n not in roles]
    if len(unfilled) == 1 and len(left) == 1:
        roles[unfilled[0]] = left.pop()
    if not roles:
        return Missing(f"no {' or '.join(names)} to grade: upload both YAML files (any names; "
                       f"{_listing(uploaded(folder))})")
    into.mkdir(parents=True, exist_ok=True)
    for name, f in roles.items():
        shutil.copyfile(folder / f, into / name)
    notes = [f"graded {f} as {name}" for name, f in sorted(roles.items()) if f.name != name]
    if left:
        notes.append(f"not graded: {', '.join(str(f) for f in left[:10])}")
    shown = ", ".join(str(roles[n]) for n in names if n in roles)
    return Picked(into, shown, tuple(notes))
