"""Batch grading benchmark: submissions per minute, this grader against `nbgrader autograde`.

    python bench/grading.py [--students 200] [--jobs N] [--nbgrader-students 40]
                            [--no-nbgrader] [--json] [--keep DIR]

One generated class of lesson 1 (tests/classroom.py: the reference, alternative correct
solutions, wrong ones, crashing ones (raising, a syntax error, wrong types) and looping
ones, 2% of the class) is graded twice, side by side in the same run:

- this grader: `grader grade lesson1 CLASS --secret-file S --jobs N` as a command (its
  start-up included), public and hidden cases, each submission in its own sandbox;
- nbgrader: an equivalent notebook assignment. The source notebook has one solution cell
  (the five functions) and one autograder test cell per rubric criterion, with the same
  points, asserting the oracle's answers on the SAME probes (the public cases and the
  hidden ones drawn from the same secret). Every student's notebook holds the student's
  file in the solution cell. `nbgrader generate_assignment` runs untimed; then
  `nbgrader autograde lesson1` is timed, with a 2 s cell timeout (the grader's per-call
  limit), so a looping submission costs each side about the same wall time.

nbgrader starts a Jupyter kernel per notebook, so it grades a subset of the same class
(--nbgrader-students, every k-th student, loopers in proportion); rates are per minute,
so the ratio compares like with like. Printed: both rates and the ratio.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

from classroom import is_slow, make_class  # noqa: E402  (a test helper, shared on purpose)

SECRET = b"bench secret: class of 2026"


# ---------------------------------------------------------------------------- this grader

def grade_with_grader(folder: Path, work: Path, jobs: int | None) -> dict:
    secret = work / "course.secret"
    secret.write_bytes(SECRET)
    args = [sys.executable, "-m", "grader.cli", "grade", "lesson1", str(folder), "--secret-file",
            str(secret), "--gradebook", str(work / "gradebook.db"), "--quiet", "--json"]
    if jobs:
        args += ["--jobs", str(jobs)]
    t0 = time.perf_counter()
    p = subprocess.run(args, cwd=ROOT, capture_output=True, text=True)
    elapsed = time.perf_counter() - t0
    if p.returncode != 0:
        raise SystemExit(f"grader failed: {p.stderr}")
    summary = json.loads(p.stdout)
    n = summary["graded"] + len(summary["failed"])
    return {"submissions": n, "seconds": round(elapsed, 2), "per_minute": round(n / elapsed * 60, 1),
            "workers": summary["workers"], "mean_score": summary["distribution"]["mean"]}


# ---------------------------------------------------------------------------- nbgrader

def _cell(kind: str, source: str, **meta) -> dict:
    cell = {"cell_type": kind, "metadata": {"nbgrader": {"schema_version": 3, **meta}} if meta else {},
            "source": source}
    if kind == "code":
        cell.update(execution_count=None, outputs=[])
    return cell


def _probes() -> dict[str, str]:
    """One test cell per lesson 1 criterion: the oracle's answers on the grader's cases."""
    from grader.engine.layout import find_course
    from grader.engine.pipeline import build_cases
    from reference.solutions import lesson1 as oracle

    cases = build_cases("lesson1", find_course(str(ROOT)), SECRET)
    fam = {name: [c for c in cases if c.family == name] for name in ("models", "shapes", "tokens", "contract")}
    rows = {
        "kv-bytes": [(repr((c.inputs,)), oracle.kv_bytes_per_token(c.inputs)) for c in fam["models"]],
        "pool-pages": [(repr(c.inputs), oracle.pool_pages(*c.inputs)) for c in fam["shapes"]],
        "pages-for": [(repr(c.inputs), oracle.pages_for(*c.inputs)) for c in fam["tokens"]],
        "worst-case": [(repr((c.inputs[0], c.inputs[2])), oracle.worst_case_pages(c.inputs[0], c.inputs[2]))
                       for c in fam["contract"]],
        "contract-ok": [(repr(c.inputs), not oracle.contract_reasons(*c.inputs)) for c in fam["contract"]],
        "contract-reason": [(repr(c.inputs), oracle.contract_reasons(*c.inputs)) for c in fam["contract"]
                            if oracle.contract_reasons(*c.inputs)],
    }
    calls = {"kv-bytes": ("kv_bytes_per_token", "got == want"),
             "pool-pages": ("pool_pages", "got == want"),
             "pages-for": ("pages_for", "got == want"),
             "worst-case": ("worst_case_pages", "got == want"),
             "contract-ok": ("check_contract", "got.ok == want"),
             "contract-reason": ("check_contract", "not got.ok and got.reason in want")}
    header = "from reference.shapes import *\n"
    cells = {}
    for cid, pairs in rows.items():
        fn, test = calls[cid]
        lines = [header, "_probes = [\n"] + [f"    ({args}, {want!r}),\n" for args, want in pairs] + ["]\n"]
        lines += ["for _args, want in _probes:\n", f"    got = {fn}(*_args)\n",
                  f"    assert {test}, (_args, got, want)\n"]
        cells[cid] = "".join(lines)
    return cells


def _source_notebook() -> dict:
    from grader.engine.checks import REGISTRY
    from grader.engine.rubric import load_rubric
    import grader.lessons.lesson1  # noqa: F401  (registers the checks)

    rubric = load_rubric(ROOT / "rubrics" / "lesson1.yaml", REGISTRY)
    reference = (ROOT / "reference" / "solutions" / "lesson1.py").read_text()
    cells = [_cell("markdown", "# Lesson 1: the request contract\n"),
             _cell("code", "### BEGIN SOLUTION\n" + reference + "### END SOLUTION\n",
                   solution=True, grade=False, locked=False, grade_id="functions")]
    for criterion in rubric.criteria:
        cells.append(_cell("code", _probes()[criterion.id], solution=False, grade=True, locked=True,
                           points=criterion.points, grade_id=criterion.id))
    return {"cells": cells, "metadata": {"kernelspec": {"name": "python3", "display_name": "Python 3",
                                                        "language": "python"}},
            "nbformat": 4, "nbformat_minor": 5}


def grade_with_nbgrader(students, work: Path) -> dict:
    course = work / "nbgrader"
    (course / "source" / "lesson1").mkdir(parents=True)
    (course / "nbgrader_config.py").write_text(
        "c = get_config()\n"
        f"c.CourseDirectory.root = {str(course)!r}\n"
        "c.Autograde.create_student = True\n"
        "c.Execute.timeout = 2\n"
        "c.Execute.interrupt_on_timeout = True\n")
    (course / "source" / "lesson1" / "lesson1.ipynb").write_text(json.dumps(_source_notebook()))
    env = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1"}
    p = subprocess.run([sys.executable, "-m", "nbgrader", "generate_assignment", "lesson1", "--force"],
                       cwd=course, env=env, capture_output=True, text=True)
    if p.returncode != 0:
        raise SystemExit(f"nbgrader generate_assignment failed: {p.stderr[-2000:]}")
    released = json.loads((course / "release" / "lesson1" / "lesson1.ipynb").read_text())
    for s in students:
        nb = json.loads(json.dumps(released))
        text = s.path.read_text()
        if s.path.suffix == ".ipynb":        # a notebook submission: its code cells, in order
            text = "\n".join("".join(c["source"]) for c in json.loads(text)["cells"]
                             if c["cell_type"] == "code")
        for cell in nb["cells"]:
            if cell["metadata"].get("nbgrader", {}).get("grade_id") == "functions":
                cell["source"] = text
        folder = course / "submitted" / s.name / "lesson1"
        folder.mkdir(parents=True)
        (folder / "lesson1.ipynb").write_text(json.dumps(nb))
    t0 = time.perf_counter()
    p = subprocess.run([sys.executable, "-m", "nbgrader", "autograde", "lesson1", "--force"],
                       cwd=course, env=env, capture_output=True, text=True)
    elapsed = time.perf_counter() - t0
    if p.returncode != 0:
        raise SystemExit(f"nbgrader autograde failed: {p.stderr[-2000:]}")
    from nbgrader.api import Gradebook
    with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gb:
        scores = [sub.score for sub in gb.assignment_submissions("lesson1")]
    n = len(students)
    return {"submissions": n, "graded": len(scores), "seconds": round(elapsed, 2),
            "per_minute": round(n / elapsed * 60, 1),
            "mean_score": round(sum(scores) / len(scores), 3) if scores else None}


# ---------------------------------------------------------------------------- main

def subset(students, k: int):
    """About k students of the class, every n-th, with loopers in the class's proportion."""
    if k >= len(students):
        return list(students)
    step = len(students) / k
    picked = [students[int(i * step)] for i in range(k)]
    slow_share = sum(is_slow(s.template) for s in students) / len(students)
    want = max(1, round(slow_share * k)) if slow_share else 0
    slow = [s for s in students if is_slow(s.template)]
    have = [s for s in picked if is_slow(s.template)]
    quick = [s for s in picked if not is_slow(s.template)]
    extra = [s for s in slow if s not in have][:max(0, want - len(have))]
    return quick[:k - len(have) - len(extra)] + have + extra


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--students", type=int, default=200)
    ap.add_argument("--jobs", type=int, help="the grader's worker processes (default: one per core)")
    ap.add_argument("--nbgrader-students", type=int, default=40)
    ap.add_argument("--no-nbgrader", action="store_true")
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--keep", metavar="DIR", help="keep the generated class and gradebooks here")
    args = ap.parse_args()

    work = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix="bench-grading-"))
    work.mkdir(parents=True, exist_ok=True)
    try:
        students = make_class(work / "class", "lesson1", args.students, seed=2026,
                              slow=max(1, args.students // 50), notebooks=0.1)
        kinds = {}
        for s in students:
            kinds[s.template] = kinds.get(s.template, 0) + 1
        ours = grade_with_grader(work / "class", work, args.jobs)
        result = {"lesson": "lesson1", "class": kinds, "cores": os.cpu_count(), "grader": ours}
        if not args.no_nbgrader:
            theirs = grade_with_nbgrader(subset(students, args.nbgrader_students), work)
            result["nbgrader"] = theirs
            result["ratio"] = round(ours["per_minute"] / theirs["per_minute"], 1)
        if args.json:
            print(json.dumps(result, indent=2, sort_keys=True))
        else:
            print(f"class: {args.students} lesson 1 submissions: " +
                  ", ".join(f"{k} {v}" for k, v in sorted(kinds.items())))
            print(f"grader  : {ours['submissions']:4d} submissions in {ours['seconds']:7.1f} s = "
                  f"{ours['per_minute']:8.1f}/min  ({ours['workers']})")
            if "nbgrader" in result:
                t = result["nbgrader"]
                print(f"nbgrader: {t['submissions']:4d} submissions in {t['seconds']:7.1f} s = "
                      f"{t['per_minute']:8.1f}/min  (nbgrader autograde, one kernel per notebook)")
                print(f"ratio   : {result['ratio']}x nbgrader's rate (target: at least 10x)")
        return 0
    finally:
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
