"""A generated class: many students' submissions for a lesson, for batch tests and bench/.

Each student's file is one of the lesson's known submissions (the reference solution,
every file under tests/submissions/<lesson>/: alternative correct ones, wrong ones,
crashing and looping ones, and every mutant its mutants.yaml lists) with the student's
own header comment and spacing, so every file has its own digest while its expected score
is the template's. Students come in nbgrader's layout
(submitted/<student>/<lesson>/exercise.py or .ipynb) or a flat folder.
"""
from __future__ import annotations

import contextlib
import csv
import json
import math
import os
import random
import signal
import sqlite3
import subprocess
import sys
import time
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


def templates(lesson: str, mutants: bool = True) -> dict[str, Path]:
    """The reference first, then the lesson's test submissions by name: real files, and
    (``mutants``) the mutants (written once per process, in a temporary folder)."""
    found = {"reference": ROOT / "reference" / "solutions" / f"{lesson}.py"}
    found.update({p.stem: p for p in sorted((SUBMISSIONS / lesson).glob("*.py"))})
    if mutants:
        found.update(written(lesson))
    return found


def is_slow(template: str) -> bool:
    return any(word in template for word in SLOW)


def notebook(source: str) -> str:
    cells = [{"cell_type": "markdown", "metadata": {}, "source": ["# My exercise\n"]},
             {"cell_type": "code", "execution_count": None, "metadata": {}, "outputs": [],
              "source": source.splitlines(keepends=True)}]
    return json.dumps({"cells": cells, "metadata": {}, "nbformat": 4, "nbformat_minor": 5})


def covering_size(lesson: str, slow: int = 2, mutants: bool = True) -> int:
    """The smallest class in which make_class(..., cover=True) holds every template (and
    every odd name)."""
    quick = [t for t in templates(lesson, mutants) if not is_slow(t)]
    return max(len(quick) + slow, len(ODD_NAMES))


def make_class(folder: Path, lesson: str, n: int, *, seed: int = 0, slow: int = 2,
               layout: str = "nbgrader", notebooks: float = 0.1, odd_names: bool = True,
               cover: bool = False, mutants: bool = True) -> list[Student]:
    """Write ``n`` students' submissions under ``folder``; ``slow`` of them loop. With
    ``cover``, every quick template is some student's (n >= covering_size). Without
    ``mutants``, the students' files are the reference and the real test files alone."""
    rng = random.Random(seed)
    pool = templates(lesson, mutants)
    quick = [t for t in pool if not is_slow(t)]
    loops = [t for t in pool if is_slow(t)]
    names = [f"student{i:03d}" for i in range(n)]
    if odd_names:
        # Every seventh place, or the next stride that shares no factor with n: on a class
        # of 21 the seventh places came round to the first, and two odd names were lost.
        stride = next(s for s in range(7, 7 + n) if math.gcd(s, n) == 1)
        for i, odd in enumerate(ODD_NAMES[:n]):
            names[i * stride % n] = odd
    chosen = [rng.choice(loops) for _ in range(min(slow, n))] if loops else []
    if cover:
        assert n >= len(chosen) + len(quick), f"a covering class of {lesson} needs {covering_size(lesson, slow)}"
        chosen += quick
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


# ---- grading a generated class through the command line, as an instructor does ----------------

def run_cli(*args, timeout=1800, **kw):
    return subprocess.run([sys.executable, "-m", "grader.cli", *args], cwd=ROOT,
                          capture_output=True, text=True, timeout=timeout, **kw)


def by_student(url) -> dict:
    from grader.instructor.gradebook import open_gradebook
    with open_gradebook(url) as book:
        return {r.student: r for r in book.results()}


def kill_and_resume(folder, url, secret_file, kills, seed, jobs="2", lesson="lesson1"):
    """Start the batch and SIGKILL it once it has written a seeded number of results (a
    point of progress, not of time: the same on a fast machine and a loaded one), again
    and again, then let a last run finish: it must keep what the killed runs recorded."""
    from grader.instructor.batch import discover
    students = len(discover(folder, lesson))
    # At least three students left at each point: a kill lands while the batch is grading.
    points = sorted(random.Random(seed).sample(range(1, students - 3), kills))
    args = ["grade", lesson, str(folder), "--secret-file", str(secret_file), "--gradebook",
            url, "--jobs", jobs, "--quiet", "--json"]
    for point in points:
        proc = subprocess.Popen([sys.executable, "-m", "grader.cli", *args], cwd=ROOT,
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 600          # a hang guard only
        while graded_rows(url) < point:
            assert proc.poll() is None, f"the run ended with {graded_rows(url)} results, before {point}"
            assert time.monotonic() < deadline, f"fewer than {point} results after 600 s"
            time.sleep(0.05)
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=60)
    p = run_cli(*args)
    assert p.returncode == 0, p.stderr
    summary = json.loads(p.stdout)
    assert summary["skipped"] >= points[-1], summary      # what was recorded before the kill is kept
    return summary


def graded_rows(url: str) -> int:
    """Results the gradebook (SQLite) holds now, read without taking part in its writes."""
    path = url.removeprefix("sqlite:///")
    if not os.path.exists(path):
        return 0
    try:
        with contextlib.closing(sqlite3.connect(path, timeout=60)) as conn:
            return conn.execute("SELECT count(*) FROM results WHERE status = 'graded'").fetchone()[0]
    except sqlite3.OperationalError:       # its tables are not created yet
        return 0


def assert_whole(url, n_criteria):
    """No partial rows: every graded result has all its criterion rows, summing to its total."""
    for r in by_student(url).values():
        if r.status == "graded":
            assert len(r.scores) == n_criteria
            assert abs(sum(s.score for s in r.scores) - r.score) < 1e-6


def check_class(lesson: str, n: int, tmp: Path, secret_file: Path, expected: dict, *,
                seed: int = 2026, cover: bool = False, mutants: bool = True) -> dict:
    """A class of ``n`` grades through kill -9 and a resume, every student exactly once with
    their template's scores (``expected``), and exports to csv and nbgrader with the same
    totals. Returns timings (s) of each step."""
    from nbgrader.api import Gradebook as NbGradebook

    timings = {}
    n_criteria = len(next(iter(expected.values())))
    students = make_class(tmp / "class", lesson, n, seed=seed, slow=2, cover=cover, mutants=mutants)
    url = f"sqlite:///{tmp / 'gb.db'}"
    t0 = time.monotonic()
    summary = kill_and_resume(tmp / "class", url, secret_file, kills=1, seed=7, lesson=lesson)
    timings["grade (one kill, then resumed)"] = time.monotonic() - t0
    assert summary["students"] == n and not summary["failed"]
    stored = by_student(url)
    assert set(stored) == {s.name for s in students}           # every student exactly once
    for s in students:
        got = {c.criterion: c.score for c in stored[s.name].scores}
        assert got == expected[s.template], s
    assert_whole(url, n_criteria)

    # CSV: one row per student, names intact through Python's csv module.
    out = tmp / "grades.csv"
    t0 = time.monotonic()
    assert run_cli("export", "--gradebook", url, "--format", "csv", "--out", str(out)).returncode == 0
    with out.open(encoding="utf-8-sig", newline="") as f:
        rows = list(csv.DictReader(f))
    assert len(rows) == n
    totals = {row["student"]: float(row[f"{lesson} total"]) for row in rows}
    assert set(ODD_NAMES) <= set(totals)
    assert totals == {name: r.score for name, r in stored.items()}

    # nbgrader: the same totals in its gradebook.
    nbdb = tmp / "nbgrader" / "gradebook.db"
    nbdb.parent.mkdir()
    p = run_cli("export", "--gradebook", url, "--format", "nbgrader", "--out", str(nbdb))
    assert p.returncode == 0, p.stderr
    with NbGradebook(f"sqlite:///{nbdb}") as gb:
        nb_totals = {sub.student.id: sub.score for sub in gb.assignment_submissions(lesson)}
        assert gb.find_assignment(lesson).max_score == 10
    assert nb_totals.keys() == totals.keys()
    assert all(abs(nb_totals[k] - totals[k]) < 1e-6 for k in totals)
    timings["two exports"] = time.monotonic() - t0
    return timings
