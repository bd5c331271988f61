"""The learner edition (`grader release`): no reference solution text, no hidden families,
no instructor commands, and `grader check` run inside it gives the course's reports."""
import ast
import json
import re
import shutil

import pytest

from classroom import templates
from conftest import ROOT, grade
from grader.engine.layout import find_course
from grader.engine.errors import InputError
from grader.instructor.release import (build_learner_edition, find_leaks, missing_imports,
                                    run_in_release, solution_fingerprints)
from grader.engine.oracle import as_in_the_learner_edition
from mutants import wrong_file

SOLUTIONS = ROOT / "reference" / "solutions"


@pytest.fixture(scope="module")
def release(tmp_path_factory):
    out = tmp_path_factory.mktemp("edition") / "learner"
    manifest = build_learner_edition(find_course(str(ROOT)), out)   # verifies `grader check` inside
    return out, manifest


def in_release(out, *args):
    return run_in_release(out, "grader.cli", *args)


def solution_code_lines():
    """Every line of code (not docstring, not comment) inside a reference solution's
    functions, less the lines an exercise's own docstrings already give the learner (the
    contract's formulas)."""
    published = "\n".join(p.read_text(encoding="utf-8")
                          for p in (ROOT / "assignments").glob("*/exercise.py"))
    # The worker's own size arithmetic (the spec's ceiling division) is no answer key.
    published += (ROOT / "reference" / "sizing.py").read_text(encoding="utf-8")
    lines = set()
    for path in SOLUTIONS.glob("lesson*.py"):
        source = path.read_text(encoding="utf-8")
        tree = ast.parse(source)
        text = source.splitlines()
        for fn in ast.walk(tree):
            if not isinstance(fn, ast.FunctionDef):
                continue
            body = fn.body
            if isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
                body = body[1:]
            for stmt in body:
                for line in text[stmt.lineno - 1:stmt.end_lineno]:
                    code = line.split("#")[0].strip()
                    if len(code) >= 28 and code not in published:
                        lines.add(code)
    return lines


def test_no_reference_solution_text_anywhere(release):
    out, _ = release
    assert not (out / "reference" / "solutions").exists()
    assert not (out / "grader" / "instructor").exists()
    code = solution_code_lines()
    assert len(code) > 20                    # the check has teeth
    for path in out.rglob("*"):
        if path.is_file():
            text = path.read_text(encoding="utf-8", errors="replace")
            hits = [line for line in code if line in text]
            assert not hits, f"{path.relative_to(out)} holds reference solution code: {hits[:3]}"
    assert find_leaks(out, solution_fingerprints(SOLUTIONS)) == []


def test_the_leak_guard_finds_a_planted_copy(tmp_path):
    source = (SOLUTIONS / "lesson1.py").read_text()
    tree = ast.parse(source)
    fn = next(n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == "contract_reasons")
    body = fn.body[1:] if isinstance(fn.body[0], ast.Expr) else fn.body
    planted = "def helper(request, model, worker):\n    # a comment the copier added\n" + \
        "\n".join("    " + l for l in ast.unparse(ast.Module(body, [])).splitlines()) + "\n"
    (tmp_path / "sneaky.py").write_text(planted)
    assert find_leaks(tmp_path, solution_fingerprints(SOLUTIONS))


def test_manifest_and_what_is_left_out(release):
    out, manifest = release
    assert {"lesson1", "lesson2"} <= set(manifest.lessons)     # the free lessons
    # Lesson 2 runs no worker there: its run machinery and the worker itself are not shipped.
    for module in ("grader/lessons/ledger_runs.py", "grader/course/scenario.py", "reference/worker.py",
                   "reference/policy.py"):
        assert not (out / module).exists(), module
    data = json.loads((out / "grader" / "learner_edition.json").read_text())
    assert data["edition"] == "learner" and data["lessons"] == list(manifest.lessons)
    assert (out / "grader" / "expectations" / "lesson1.json").is_file()
    for lesson in manifest.left_out:
        assert not (out / "rubrics" / f"{lesson}.yaml").exists()
        assert not (out / "grader" / "lessons" / f"{lesson}.py").exists()
    # A left-out lesson's own modules go with it, even those that import nothing left out.
    for module in ("transition_table", "prefix_keys", "chunk_oracle", "chunk_probes"):
        assert not (out / "grader" / "lessons" / f"{module}.py").exists(), module
    assert not (out / "grader" / "instructor").exists()
    # What ships, imports: no module of the release needs something left out.
    for path in (out / "grader").rglob("*.py"):
        rel = path.relative_to(out).with_suffix("")
        parts = rel.parts[:-1] if rel.name == "__init__" else rel.parts
        assert missing_imports(out, ".".join(parts), anywhere=False) == [], rel


GRADE_ALL = """
import json, sys
from pathlib import Path
from grader.engine.layout import find_course
from grader.lessons import ledger, lesson1
from grader.engine.pipeline import grade_path
course, lesson = find_course(sys.argv[1]), sys.argv[2]
reports = [grade_path(lesson, Path(p), course, mode="check").to_dict() for p in sys.argv[3:]]
oracles = (lesson1.oracle, ledger.sizes)
assert all(o._module is None for o in oracles) and any(o._table for o in oracles), "not replayed"
print(json.dumps(reports))
"""


@pytest.mark.parametrize("lesson", ["lesson1", "lesson2"])
def test_check_in_the_release_matches_the_course(release, tmp_path, lesson):
    out, _ = release
    p = in_release(out, "check", lesson, "--json")              # the stub exercise
    assert p.returncode == 0, p.stderr
    stub = json.loads(p.stdout)
    assert stub["score"] == 0 and "not implemented" in stub["criteria"][0]["feedback"]
    copies = []
    for sub in templates(lesson).values():                       # the reference first, mutants too
        copies.append(tmp_path / sub.name)                       # outside the release
        shutil.copy(sub, copies[-1])
    p = in_release(out, "check", lesson, "--submission", str(copies[0]), "--json")
    ref = json.loads(p.stdout)
    assert p.returncode == 0 and ref["score"] == ref["max_score"] == stub["max_score"] > 0
    # Every wrong submission: the same report in the release as in the course graded on
    # the cases the release has (one process for all of them).
    (tmp_path / "grade_all.py").write_text(GRADE_ALL)
    p = run_in_release(out, "grade_all", str(out), lesson, *map(str, copies), cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    with as_in_the_learner_edition():
        wanted = [json.loads(json.dumps(grade(lesson, c, "check").to_dict())) for c in copies]
    for copy, got, want in zip(copies, json.loads(p.stdout), wanted):
        for report in (got, want):
            report.pop("duration_s")
        assert got == want, copy.name


def test_lesson2_in_the_release_says_what_it_cannot_check(release, tmp_path):
    """Efficiency needs worker runs: the release reports it as not checked, in no total,
    while a wrong ledger still loses the criteria its probes show."""
    out, _ = release
    shutil.copy(wrong_file("lesson2", "prompt_only", tmp_path), tmp_path / "mine.py")
    p = in_release(out, "check", "lesson2", "--submission", str(tmp_path / "mine.py"))
    assert p.returncode == 0, p.stderr
    assert "n/a" in p.stdout and "not checked here" in p.stdout
    assert re.search(r"efficiency\s+-/3\s+n/a", p.stdout)
    assert re.search(r"total [0-9.]+ / 7 ", p.stdout)
    assert "reserved 7 pages, expected 9" in p.stdout


def test_the_course_never_skips_a_criterion_when_grading(tmp_path):
    """Only the learner edition's check may leave a criterion unchecked; a grade never does."""
    with as_in_the_learner_edition(), pytest.raises(InputError, match="could not be checked"):
        grade("lesson2", SOLUTIONS / "lesson2.py", "grade")


def test_no_instructor_commands_in_the_release(release):
    out, manifest = release
    p = in_release(out, "--help")
    assert p.returncode == 0
    commands = set(re.search(r"\{([a-z,]+)\}", p.stdout).group(1).split(","))
    assert "check" in commands and not commands & {"grade", "export", "feedback", "release"}
    assert "grader grade" not in p.stdout and "grader check" in p.stdout
    p = in_release(out, "grade", "lesson1", "x.py", "--secret-file", "s")
    assert p.returncode == 2 and "invalid choice" in p.stderr
    for command, why in manifest.unavailable_commands.items():
        p = in_release(out, command, "anything")
        assert p.returncode == 2 and why in p.stderr


def test_release_refuses_a_folder_that_is_not_a_release(tmp_path):
    (tmp_path / "precious.txt").write_text("keep me")
    with pytest.raises(InputError, match="not empty"):
        build_learner_edition(find_course(str(ROOT)), tmp_path, verify=False)
    assert (tmp_path / "precious.txt").read_text() == "keep me"
    with pytest.raises(InputError, match="inside the course"):
        build_learner_edition(find_course(str(ROOT)), ROOT / "grader" / "edition-out", verify=False)


def test_release_replaces_an_earlier_release(release):
    out, _ = release
    (out / "stale.txt").write_text("old")
    manifest = build_learner_edition(find_course(str(ROOT)), out, verify=False)
    assert not (out / "stale.txt").exists() and "lesson1" in manifest.lessons


def test_the_release_installs_what_it_imports_and_nothing_else(release):
    """No instructor extras, no dependency of what was left out (the gradebook's SQLAlchemy),
    and every third-party module the release imports is a declared dependency."""
    import sys
    import tomllib
    from grader.instructor.release import IMPORT_NAMES, _third_party_imports
    out, _ = release
    project = tomllib.loads((out / "pyproject.toml").read_text())["project"]
    assert "optional-dependencies" not in project
    declared = {IMPORT_NAMES[re.split(r"[<>=!~\[ ]", d)[0].lower()] for d in project["dependencies"]}
    imported = {m for m in _third_party_imports(out)
                if m not in sys.stdlib_module_names and m not in ("grader", "reference")}
    assert declared == imported and "sqlalchemy" not in declared
