"""A generated class: many students' submissions for a lesson, for batch tests and bench/.

Each student's file is one of the lesson's known submissions (the reference solution,
every file under tests/submissions/<lesson>/: alternative correct ones, wrong ones,
crashing and looping ones, and every mutant its mutants.yaml lists) with the student's
own header comment and spacing, so every file has its own digest while its expected score
is the template's. Students come in nbgrader's layout
(submitted/<student>/<lesson>/exercise.py or .ipynb) or a flat folder.
"""
from __future__ import annotations

import json
import random
from dataclasses import dataclass
from pathlib import Path

from mutants import written

ROOT = Path(__file__).resolve().parent.parent
SUBMISSIONS = ROOT / "tests" / "submissions"
SLOW = ("loop", "hang", "forever", "sleep")     # templates that spend their time budget

# Names that must survive every export: commas, quotes, apostrophes, non-ASCII, spaces.
ODD_NAMES = ["O'Brien, Pat", 'Ana "Nan" Lima', "Zoë Ångström", "van der Berg; Jo", "  spaced  out "]


@dataclass(frozen=True)
class Student:
    name: str
    template: str          # the file it was made from (its stem)
    path: Path


def templates(lesson: str) -> dict[str, Path]:
    """The reference first, then the lesson's test submissions by name: real files, and the
    mutants (written once per process, in a temporary folder)."""
    found = {"reference": ROOT / "reference" / "solutions" / f"{lesson}.py"}
    found.update({p.stem: p for p in sorted((SUBMISSIONS / lesson).glob("*.py"))})
    found.update(written(lesson))
    return found


def is_slow(template: str) -> bool:
    return any(word in template for word in SLOW)


def notebook(source: str) -> str:
    cells = [{"cell_type": "markdown", "metadata": {}, "source": ["# My exercise\n"]},
             {"cell_type": "code", "execution_count": None, "metadata": {}, "outputs": [],
              "source": source.splitlines(keepends=True)}]
    return json.dumps({"cells": cells, "metadata": {}, "nbformat": 4, "nbformat_minor": 5})


def make_class(folder: Path, lesson: str, n: int, *, seed: int = 0, slow: int = 2,
               layout: str = "nbgrader", notebooks: float = 0.1, odd_names: bool = True) -> list[Student]:
    """Write ``n`` students' submissions under ``folder``; ``slow`` of them loop."""
    rng = random.Random(seed)
    pool = templates(lesson)
    quick = [t for t in pool if not is_slow(t)]
    loops = [t for t in pool if is_slow(t)]
    names = [f"student{i:03d}" for i in range(n)]
    if odd_names:
        for i, odd in enumerate(ODD_NAMES[:n]):
            names[i * 7 % n] = odd
    chosen = [rng.choice(loops) for _ in range(min(slow, n))] if loops else []
    chosen += [("reference" if rng.random() < 0.3 else rng.choice(quick)) for _ in range(n - len(chosen))]
    rng.shuffle(chosen)
    students = []
    for name, template in zip(names, chosen):
        text = pool[template].read_text(encoding="utf-8")
        text = f"# {lesson} exercise by {name}\n" + "\n" * rng.randint(0, 2) + text
        ext = ".ipynb" if rng.random() < notebooks else ".py"
        body = notebook(text) if ext == ".ipynb" else text
        if layout == "nbgrader":
            path = folder / "submitted" / name / lesson / f"exercise{ext}"
        else:
            path = folder / f"{name}{ext}"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(body, encoding="utf-8")
        students.append(Student(name, template, path))
    return students
