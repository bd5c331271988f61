"""Which files of a Gradescope upload are the submission, whatever the student named them.

Gradescope puts the upload in /autograder/submission/ as the student made it: one file, a
few, or (from GitHub) a whole repository. At most MAX_LISTED files are listed, without
following symbolic links, past hidden folders, caches and installed environments (a virtual
or conda environment, a site-packages folder); of a copy of the course uploaded whole, only
the learner's own files are candidates (learners_own); and none is run: a candidate is only read
and, for a code lesson, parsed. Every name this module reports is ``as_text``: a byte that is not
UTF-8 as \\xNN, as a class folder shows it, never a lone surrogate in results.json.

- A code lesson: the one code file, by the rule a class folder is read by too
  (grader.engine.code_file: .py or .ipynb in any case; among several, the one that defines
  most of the lesson's functions); no such file, or a tie, is a clear result listing what
  was found.
- A lesson whose submission is a folder of YAML files (lesson 6): each expected file by
  its name (.yaml or .yml, any case), else by what it holds (a diagnosis lists causes, a
  design sheet has the sheet's sections), else the one YAML file left for the one name
  left. The files are copied under their expected names into a folder of their own.
"""
from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from grader.course.sheet import SECTIONS, read_yaml
from grader.engine.code_file import choose, code_suffix
from grader.engine.pipeline import checked_by_default, folder_files
from grader.engine.submission import MAX_BYTES
from grader.engine.text import as_text
from grader.instructor.release import BYPRODUCTS, COURSE_DIRS, PACKAGE_DIRS

YAML_SUFFIXES = (".yaml", ".yml")
SKIPPED_FOLDERS = {"__pycache__", ".ipynb_checkpoints", "node_modules", "site-packages", "dist-packages"}
# A folder holding one of these is an installed environment (a virtual environment, a
# conda one), whose subfolders are never the student's work: a repository committed with
# one held thousands of files, which filled the listing before the student's own file was
# reached.
ENVIRONMENT_MARKERS = ("pyvenv.cfg", "conda-meta")
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


def _skipped(folder: Path) -> bool:
    return folder.name.startswith(".") or folder.name in SKIPPED_FOLDERS


def _environment(folder: Path) -> bool:
    """Does ``folder`` hold an installed environment? What it installed is in its subfolders,
    passed over; its own files are listed, for `python -m venv .` run in the exercise's
    folder puts pyvenv.cfg beside the student's code."""
    return any(os.path.lexists(folder / marker) for marker in ENVIRONMENT_MARKERS)


def uploaded(folder: Path, links: list[Path] | None = None) -> list[Path]:
    """Regular files under ``folder`` (relative paths; each folder's files by name, then its
    subfolders by name; at most MAX_LISTED); links not followed (each is added to ``links``,
    when given, for the student to be told: an upload of a link alone read "your upload is
    empty"); hidden folders, caches and what an installed environment installed passed
    over. Walked with a list of folders still to list, not by recursion: folders nested
    past Python's recursion limit failed the autograder."""
    found: list[Path] = []
    todo = [folder]
    while todo:
        here = todo.pop()
        try:
            with os.scandir(here) as it:
                entries = sorted(it, key=lambda e: e.name)
        except OSError:              # unreadable, or a path longer than the system takes
            continue
        subfolders = []
        for entry in entries:
            path = Path(entry.path)
            if entry.is_dir(follow_symlinks=False):
                if not _skipped(path):
                    subfolders.append(path)
            elif entry.is_file(follow_symlinks=False) and not entry.name.startswith("."):
                found.append(path.relative_to(folder))
                if len(found) >= MAX_LISTED:
                    return found
            elif (links is not None and len(links) < MAX_LISTED and entry.is_symlink()
                  and not entry.name.startswith(".")):
                links.append(path.relative_to(folder))
        # The upload's own folder is never taken for an environment: `python -m venv .` at a
        # repository's root would hide its src/ (site-packages is still passed over by name).
        if here == folder or not _environment(here):
            todo.extend(reversed(subfolders))
    return found


def _course_copies(folder: Path, files: list[Path]) -> list[Path]:
    """The folders of the upload that are a copy of the course (the learner edition, uploaded
    whole as a repository of it): rubrics/ beside assignments/, as a course is found. The
    deepest first, so a file is judged by the copy nearest to it."""
    roots = set()
    for f in files:
        for i, part in enumerate(f.parts[:-1]):
            if part == COURSE_DIRS[0] and (folder / Path(*f.parts[:i]) / COURSE_DIRS[1]).is_dir():
                roots.add(Path(*f.parts[:i]))
    return sorted(roots, key=lambda r: len(r.parts), reverse=True)


def learners_own(folder: Path, files: list[Path], lesson: str) -> list[Path]:
    """``files`` less what a copy of the course holds of its own: its code (grader/,
    reference/: lesson 1's sizes are the worker's too, and a lesson's judges define its
    functions' names), its rubrics and docs, what installing it left (build/), and of
    assignments/ every folder but the lesson's (lesson 6: but its submission/ folder, which
    `grader check lesson6` reads; its practice incidents and the templates hold design
    sheets too). Uploaded whole, the edition's half-written exercise lost to the course's
    grader/lessons/lesson1.py, and the template sheet was graded as lesson 6's. What the
    learner keeps beside the course's folders (a file at its top, a folder of their own)
    stays theirs."""
    roots = _course_copies(folder, files)
    if not roots:
        return files
    mine = (COURSE_DIRS[0], lesson)          # a code lesson: its exercise, and any file beside it
    if folder_files(lesson) is not None:
        mine += (checked_by_default(lesson),)
    course_own = {*PACKAGE_DIRS, *COURSE_DIRS[1:], "docs", *BYPRODUCTS}

    def own(f: Path) -> bool:
        root = next((r for r in roots if f.parts[:len(r.parts)] == r.parts), None)
        if root is None:
            return True
        rel = f.parts[len(root.parts):]
        if len(rel) == 1:
            return True
        if rel[0] == COURSE_DIRS[0]:
            return rel[:len(mine)] == mine
        return not (rel[0] in course_own or rel[0].endswith(".egg-info"))
    return [f for f in files if own(f)]


def _listing(files: list[Path], links: Sequence[Path] = ()) -> str:
    linked = (f"; symbolic links are not followed ({', '.join(as_text(str(f)) for f in links[:12])}"
              f"{' ...' if len(links) > 12 else ''}): upload the files themselves" if links else "")
    if not files:
        return ("your upload holds no file itself" if links else "your upload is empty") + linked
    shown = ", ".join(as_text(str(f)) for f in files[:12])
    cut = (f"; only its first {MAX_LISTED} files were looked at: upload your exercise alone"
           if len(files) >= MAX_LISTED else "")
    return f"your upload holds {shown}{' ...' if len(files) > 12 else ''}{cut}{linked}"


def pick_code(folder: Path, lesson: str, functions: tuple[str, ...]) -> Picked | Missing:
    """The file to grade, by the rule a class folder is read by too (grader.engine.code_file)."""
    links: list[Path] = []
    files = uploaded(folder, links)
    choice = choose(folder, learners_own(folder, files, lesson), lesson, functions)
    if choice.file is not None:
        return Picked(folder / choice.file, as_text(choice.file.as_posix()),
                      (as_text(choice.note),) if choice.note else ())
    if not any(code_suffix(f) for f in files):
        return Missing(f"{choice.problem} to grade: upload your {lesson} exercise as a Python "
                       f"file or a Jupyter notebook defining {', '.join(functions)}; "
                       f"{_listing(files, links)}")
    return Missing(f"cannot tell which file to grade: {as_text(choice.problem)} ({_listing(files, links)})")


def _role_by_content(path: Path) -> str | None:
    with open(path, "rb") as f:
        data, problems = read_yaml(f.read(PEEK_BYTES))
    if problems or not isinstance(data, dict):
        return None
    roles = [name for name, keys in CONTENT_KEYS.items() if keys & set(data)]
    return roles[0] if len(roles) == 1 else None


def _copy_head(source: Path, target: Path) -> None:
    """As much of ``source`` as the submission's reader reads (MAX_BYTES + 1, so a larger
    file is still refused as too large): a file of gigabytes was copied whole first."""
    with open(source, "rb") as f, open(target, "wb") as g:
        g.write(f.read(MAX_BYTES + 1))


def pick_folder(folder: Path, lesson: str, names: tuple[str, ...], into: Path) -> Picked | Missing:
    """Find each of ``names`` in the upload and copy it to ``into``/<name>."""
    files = [f for f in learners_own(folder, uploaded(folder), lesson)
             if f.suffix.lower() in YAML_SUFFIXES]
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
        links: list[Path] = []
        everything = uploaded(folder, links)
        return Missing(f"no {' or '.join(names)} to grade: upload both YAML files (any names; "
                       f"{_listing(everything, links)})")
    into.mkdir(parents=True, exist_ok=True)
    for name, f in roles.items():
        _copy_head(folder / f, into / name)
    notes = [f"graded {as_text(str(f))} as {name}" for name, f in sorted(roles.items()) if f.name != name]
    if left:
        notes.append(f"not graded: {', '.join(as_text(str(f)) for f in left[:10])}")
    shown = ", ".join(as_text(str(roles[n])) for n in names if n in roles)
    return Picked(into, shown, tuple(notes))
