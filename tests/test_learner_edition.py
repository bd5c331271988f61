"""The learner edition (`grader release`): every lesson, the worker and the course machinery,
no reference solution and nothing that behaves like one, and `grader check` inside it gives
the course's report on the public cases for every known submission."""
import ast
import copy
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import ROOT, SUBMISSIONS
from grader.engine.errors import InputError
from grader.engine.layout import find_course
from grader.engine.pipeline import grade_path
from grader.instructor.equivalence import prove
from grader.instructor.release import (UNEDITABLE, build_learner_edition, find_leaks, install_env,
                                       missing_imports, run_in_release, solution_fingerprints)
from grader.instructor.templates import templates

SOLUTIONS = ROOT / "reference" / "solutions"
LESSONS = ("lesson1", "lesson2", "lesson3", "lesson4", "lesson5", "lesson6")


@pytest.fixture(scope="module")
def release(tmp_path_factory):
    out = tmp_path_factory.mktemp("edition") / "learner"
    # The build verifies `grader check` inside and runs the self-proof; both raise if they
    # fail. Its recording grades every known submission in the course: those reports are kept.
    from grader.engine import pipeline
    from grader.instructor import release as building
    grade, record = pipeline.grade_path, building.record_expectations

    def kept(lesson, path, course, **kw):
        report = grade(lesson, path, course, **kw)
        RECORDED[(lesson, Path(path).name, report.submission_digest)] = report.to_dict()
        return report

    def recorded(course, lesson):
        with pytest.MonkeyPatch.context() as inside:     # the recording's grades alone
            inside.setattr(pipeline, "grade_path", kept)
            answers = record(course, lesson)
        RECORDINGS[_recording_key(course, lesson)] = copy.deepcopy(answers)
        return answers
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(building, "record_expectations", recorded)
        manifest = build_learner_edition(find_course(str(ROOT)), out)
    return out, manifest


# The course's check reports of every known submission as the build's recording made them
# (release.record_expectations grades each in the course), by lesson, file name and the
# digest of its bytes: graded again for the comparison with the edition, they took a third
# of this module's time. That the recording grades as the course does is tested below.
RECORDED: dict = {}

# What a lesson's recording answered, by the course's files and the lesson.
RECORDINGS: dict = {}


def _recording_key(course, lesson: str) -> tuple[str, str]:
    from grader.engine.memo import files_digest
    return files_digest(course.root / "assignments", course.root / "rubrics"), lesson


@pytest.fixture
def recorded_once(monkeypatch):
    """For the tests of what a build writes, refuses or leaves behind, which build lesson 1
    again and again: its recording is made once in this module (by the edition's build, or
    the first such test) and handed out after, as the same course files make the same
    answers. Recording lesson 1 waits out its looping submission's call limits each time."""
    import grader.instructor.release as building
    record = building.record_expectations

    def once(course, lesson):
        key = _recording_key(course, lesson)
        if key not in RECORDINGS:
            RECORDINGS[key] = record(course, lesson)
        return copy.deepcopy(RECORDINGS[key])
    monkeypatch.setattr(building, "record_expectations", once)


def in_release(out, *args, cwd=None):
    return run_in_release(out, "grader.cli", *args, cwd=cwd)


def solution_code_lines():
    """Every line of code (not docstring, not comment) inside a reference solution's
    functions, less the lines an exercise's own docstrings already give the learner (the
    contract's formulas). Lines under 40 characters (an alias, a loop header) say nothing."""
    published = "\n".join(p.read_text(encoding="utf-8")
                          for p in (ROOT / "assignments").glob("*/exercise.py"))
    # The course's own arithmetic is no answer key: the worker's sizes (the spec's ceiling
    # division) and the release figures' definitions (goodput, attainment, rejected share).
    for course_module in ("reference/sizing.py", "grader/course/slo.py"):
        published += (ROOT / course_module).read_text(encoding="utf-8")
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
            for node in body:
                for n in range(node.lineno - 1, node.end_lineno):
                    line = text[n].strip()
                    if len(line) >= 40 and not line.startswith("#") and line not in published:
                        lines.add(line)
    return lines


def test_no_reference_solution_text_anywhere(release):
    out, _ = release
    assert not (out / "reference" / "solutions").exists()
    assert not (out / "grader" / "instructor").exists()
    assert not (out / "grader" / "lessons" / "oracles").exists()
    code = solution_code_lines()
    assert len(code) > 20                    # the check has teeth
    for path in out.rglob("*"):
        if path.is_file():
            text = path.read_text(encoding="utf-8", errors="replace")
            hits = [line for line in code if line in text]
            assert not hits, f"{path.relative_to(out)} holds reference solution code: {hits[:3]}"


def test_the_fingerprint_search_finds_a_copied_solution(tmp_path):
    """Renamed and reformatted, a copied answer is still found."""
    source = (SOLUTIONS / "lesson2.py").read_text().replace("def admit(", "def anything(")
    (tmp_path / "helper.py").write_text(ast.unparse(ast.parse(source)))
    assert any("lesson2.py:admit" in leak for leak in find_leaks(tmp_path, solution_fingerprints(SOLUTIONS)))


def test_the_recorded_practice_incidents_hold_no_answer(release):
    """Lesson 6's public cases are practice incidents no file works through: nothing the
    edition recorded names a mechanism of the taxonomy or a fault of the catalogue (the
    cases and their evidence are sealed), and the sealed evidence was recorded."""
    from grader.course.incident import MECHANISMS
    from grader.lessons.oracles.incident_catalogue import FAULTS
    out, _ = release
    recorded = sorted((out / "grader" / "expectations").glob("*.json"))
    assert any(p.name == "figures-lesson6-sealed-evidence.json" for p in recorded)
    for path in recorded:
        text = path.read_text(encoding="utf-8")
        named = [m for m in (*MECHANISMS, *FAULTS) if m in text]
        assert not named, f"{path.name} names {named[:3]}"


def test_no_file_of_the_edition_holds_the_incident_catalogue(release):
    """Every incident's changes are drawn from the catalogue with its very summaries and
    diffs: a change's summary looked up there names its mechanism, or says it is harmless.
    It shipped in grader/course/incident.py, and a diagnosis written by that lookup alone,
    no evidence read, earned 10 of 10 on a student's own incident (the hidden grade). No
    code of the edition holds a summary of it, and the edition cannot import it."""
    from grader.lessons.oracles.incident_catalogue import FAULTS, HARMLESS
    out, _ = release
    summaries = [c.summary for c in (*FAULTS.values(), *HARMLESS.values())]
    for path in out.rglob("*.py"):
        text = path.read_text(encoding="utf-8")
        held = [s for s in summaries if s in text or repr(s) in text]
        assert not held, f"{path.relative_to(out)} holds the catalogue: {held[:2]}"
    p = subprocess.run([sys.executable, "-c", UNEDITABLE + "import grader.lessons.oracles.incident_catalogue as c; print(len(c.FAULTS))"],
                       cwd=out, env=install_env(out), capture_output=True, text=True, timeout=120)
    assert p.returncode != 0 and "ModuleNotFoundError" in p.stderr, p.stdout + p.stderr[-500:]


def test_a_diagnosis_of_each_practice_incident_is_checked_in_the_edition(release, tmp_path):
    """`grader check lesson6` grades the practice incident the diagnosis names. The known
    submissions diagnose p1 only, and the edition recorded p1's evidence alone: any diagnosis
    of p2 that named a cause stopped with "this edition holds no recorded value". The
    reference answer to each practice incident gets full marks there."""
    from grader.course.bundle import write_answer
    from grader.course.incident import practice_incidents
    out, _ = release
    incidents = practice_incidents(find_course(str(ROOT)))
    assert len(incidents) > 1
    for incident in incidents:
        folder = write_answer(incident, tmp_path / incident.id)
        p = in_release(out, "check", "lesson6", str(folder), "--json", cwd=tmp_path)
        assert p.returncode == 0, (incident.id, p.stderr[-2000:])
        report = json.loads(p.stdout)
        assert report["score"] == report["max_score"], (incident.id, report["criteria"])


def test_manifest_every_lesson_and_what_ships(release):
    out, manifest = release
    assert manifest.lessons == LESSONS and manifest.left_out == {}
    data = json.loads((out / "grader" / "learner_edition.json").read_text())
    assert data["edition"] == "learner" and data["lessons"] == list(LESSONS)
    # The worker, the course machinery and every lesson ship; what they need of the
    # reference was recorded.
    for module in ("reference/worker/engine.py", "reference/baselines.py", "reference/knobs.py",
                   "grader/course/scenario.py", "grader/course/sheet.py", "grader/lessons/ledger_runs.py",
                   "grader/lessons/cancellation_runs.py", "grader/course/experiments/prefill_deadline.py",
                   "grader/course/experiments/prefix_ownership.py", "grader/course/experiments/goodput.py"):
        assert (out / module).is_file(), module
    for lesson in LESSONS:
        assert (out / "rubrics" / f"{lesson}.yaml").is_file()
    assert (out / "grader" / "expectations" / "cases-lesson5.json").is_file()
    assert data["experiments"] == ["goodput", "prefill-deadline", "prefix-ownership"]
    # What ships, imports: no module of the release needs something left out.
    read = {}
    for path in (out / "grader").rglob("*.py"):
        rel = path.relative_to(out).with_suffix("")
        parts = rel.parts[:-1] if rel.name == "__init__" else rel.parts
        assert missing_imports(out, ".".join(parts), anywhere=False, read=read) == [], rel


def test_the_learners_pages_ship_and_what_they_name_is_there(release):
    """docs/learners.md is written for the edition's holder too: it ships, with the worker's
    semantics and the experiments' page it links to; the README points at them. Every file
    or folder they name is in the edition (the course's tests, said to be the course's, aside),
    and the instructors' and developers' pages stay behind."""
    out, _ = release
    shipped = sorted(p.name for p in (out / "docs").iterdir())
    assert shipped == ["experiments.md", "learners.md", "worker.md"]
    readme = (out / "README.md").read_text(encoding="utf-8")
    for name in shipped:
        assert (out / "docs" / name).read_bytes() == (ROOT / "docs" / name).read_bytes()
        assert f"`{name}`" in readme
        text = (out / "docs" / name).read_text(encoding="utf-8")
        for link in re.findall(r"\]\(([a-z_-]+\.md)", text):
            assert (out / "docs" / link).is_file(), (name, link)
        for path in re.findall(r"`((?:assignments|reference|grader|rubrics|docs|tests)/[A-Za-z0-9_./-]*)`", text):
            if path.startswith("tests/"):
                assert "course's" in text[max(0, text.index(path) - 60):text.index(path)], (name, path)
            else:
                assert (out / path.rstrip("/")).exists(), (name, path)


def test_every_grader_command_the_learners_files_name_is_in_the_edition(release):
    """A learner runs what the lesson files and pages name. A command the edition leaves out
    (an instructor's `grader incident`) may be named only where the same sentence says the
    edition does not have it."""
    out, _ = release
    p = in_release(out, "--help")
    commands = set(re.search(r"\{([a-z,]+)\}", p.stdout).group(1).split(","))
    files = [out / "README.md", *(out / "docs").glob("*.md"),
             *(f for f in (out / "assignments").rglob("*") if f.suffix in (".md", ".yaml", ".py"))]
    for path in files:
        text = " ".join(path.read_text(encoding="utf-8").replace("#", " ").split())
        for m in re.finditer(r"`grader ([a-z]+)", text):
            if m.group(1) not in commands:
                sentence = text[m.start():m.start() + 160].split(". ")[0]
                assert "does not have" in sentence, (path.relative_to(out), sentence)


def test_the_self_proof_ran_and_the_baselines_earn_at_most_half(release):
    _, manifest = release
    lines = "\n".join(manifest.proof)
    for baseline in ("baseline_contract as check_contract", "baseline_admit as admit",
                     "baseline_chunk as choose_chunk", "baseline_on_event as on_event"):
        assert baseline in lines


def test_the_self_proof_catches_an_answer_under_another_name(tmp_path):
    """A helper that behaves like lesson 2's answer, under any name, fails the build."""
    pkg = tmp_path / "reference"
    pkg.mkdir()
    body = (SOLUTIONS / "lesson2.py").read_text()
    (pkg / "helpers.py").write_text(body.replace("def admit(", "def ledger_rule("))
    verdicts = prove(tmp_path, ["reference.helpers"], find_course(str(ROOT)), ("lesson2",))
    caught = [v for v in verdicts if "ledger_rule" in v.line()]
    assert caught and not all(v.passed for v in caught), [v.line() for v in verdicts]


GRADE_ALL = """
import json, sys
from pathlib import Path
from grader.engine.layout import find_course
from grader.engine.oracle import has_solution
from grader.engine.pipeline import grade_path
course, lesson = find_course(sys.argv[1]), sys.argv[2]
reports = {p: grade_path(lesson, Path(p), course, mode="check").to_dict() for p in sys.argv[3:]}
assert not any(has_solution(f"lesson{n}") for n in range(1, 7)), "a solution was importable"
assert not any(m.startswith("reference.solutions") for m in sys.modules), "a solution was imported"
print(json.dumps(reports))
"""


def _known_copies(lesson: str, tmp_path: Path) -> list[Path]:
    """Every known submission of the lesson, copied outside the release under the name it
    has in the course (a report's feedback may name the file)."""
    copies = []
    for name, path in templates(ROOT, lesson, tmp_path).items():
        copy = tmp_path / "subs" / name / path.name
        copy.parent.mkdir(parents=True)
        (shutil.copytree if path.is_dir() else shutil.copy)(path, copy)
        copies.append(copy)
    return copies


def _comparable(report: dict) -> dict:
    return {k: v for k, v in report.items() if k not in ("duration_s", "submission")}


@pytest.mark.parametrize("lesson", LESSONS)
def test_check_in_the_release_matches_the_course(release, tmp_path, lesson):
    """For every known submission (the reference, the stub, each wrong one and each mutant):
    the same report in the edition as in the course, but its duration and path."""
    out, _ = release
    copies = _known_copies(lesson, tmp_path)
    (tmp_path / "grade_all.py").write_text(GRADE_ALL)
    p = run_in_release(out, "grade_all", str(out), lesson, *map(str, copies), cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    got = json.loads(p.stdout)
    for copy in copies:
        mine = got[str(copy)]
        want = RECORDED[(lesson, copy.name, mine["submission_digest"])]
        assert _comparable(mine) == json.loads(json.dumps(_comparable(want))), copy.parent.name
        assert all(c["checked"] for c in mine["criteria"]), copy.parent.name     # no n/a anywhere
    assert any(r["score"] == r["max_score"] for r in got.values())            # the reference
    assert got[str(next(c for c in copies if c.parent.name == "stub"))]["score"] == 0


@pytest.mark.parametrize("lesson", ["lesson1", "lesson3"])
def test_the_recording_grades_as_the_course_does(release, tmp_path, lesson):
    """The comparison above takes the course's side from the build's recording: graded
    outside it, the course gives the same reports (lesson 1's answers are the oracle's,
    lesson 3's the worker's runs of the learner's rule)."""
    for copy in _known_copies(lesson, tmp_path):
        report = grade_path(lesson, copy, find_course(str(ROOT)), mode="check").to_dict()
        want = RECORDED[(lesson, copy.name, report["submission_digest"])]
        assert _comparable(report) == _comparable(want), copy.parent.name


def _checked_with_sheet_line(release, tmp_path, line: str, instead: str) -> dict:
    """The reference answer to lesson 6 with one line of its sheet (a regex of the whole
    line) changed, checked in the edition: its criteria by id."""
    out, _ = release
    folder = tmp_path / "mine"
    shutil.copytree(SOLUTIONS / "lesson6", folder)
    sheet = folder / "design_sheet.yaml"
    text = sheet.read_text(encoding="utf-8")
    tuned = re.sub(f"(?m)^{line}$", instead, text, count=1)
    assert tuned != text
    sheet.write_text(tuned, encoding="utf-8")
    p = in_release(out, "check", "lesson6", str(folder), "--json", cwd=tmp_path)
    assert p.returncode == 0, p.stderr[-2000:]
    return {c["id"]: c for c in json.loads(p.stdout)["criteria"]}


def test_a_fix_the_edition_cannot_judge_says_how_to_replay_it(release, tmp_path):
    """A fixed sheet that also changes a knob R42 did not touch: fix-replayed is n/a in the
    edition, and the line tells the learner the replay they can run themselves."""
    criteria = _checked_with_sheet_line(release, tmp_path, r"  gap_budget_s: 0\.1", "  gap_budget_s: 0.12")
    fix = criteria["fix-replayed"]
    assert fix["checked"] is False
    assert ("replay it yourself: grader sheet run design_sheet.yaml --baseline "
            "<your bundle>/sheets/R42.yaml") in fix["feedback"], fix["feedback"]


def test_a_rollback_rule_under_a_rule_the_edition_has_not_recorded_is_not_checked_here(release, tmp_path):
    """The rollback conditions are judged under the new release's own release_criteria.rule:
    the edition holds them under R41's and R42's rules (the reference answer keeps R42's),
    and says n/a for another, and the rest of the grade stands."""
    criteria = _checked_with_sheet_line(release, tmp_path, r"    max_class_drop: 0\.05",
                                        "    max_class_drop: 0.07")
    assert criteria["rollback-rule"]["checked"] is False, criteria["rollback-rule"]
    assert "under the release rules of R41 and R42" in criteria["rollback-rule"]["feedback"]
    assert all(c["checked"] and c["score"] == c["max_score"] for k, c in criteria.items() if k != "rollback-rule")


def test_instructor_commands_are_not_in_the_release_and_the_rest_is(release):
    out, _ = release
    p = in_release(out, "--help")
    assert p.returncode == 0
    commands = set(re.search(r"\{([a-z,]+)\}", p.stdout).group(1).split(","))
    assert {"check", "experiment", "sheet"} <= commands
    assert not commands & {"grade", "export", "feedback", "release", "incident", "gradebook",
                           "report", "gradescope"}
    assert "grader grade" not in p.stdout and "grader check" in p.stdout
    p = in_release(out, "grade", "lesson1", "x.py", "--secret-file", "s")
    assert p.returncode == 2 and "invalid choice" in p.stderr
    p = in_release(out, "sheet", "validate", str(out / "assignments" / "lesson1" / "design_sheet.yaml"))
    assert p.returncode in (0, 2) and "Traceback" not in p.stderr


def test_a_fresh_install_with_the_readme_commands(release, tmp_path):
    """The edition's README: its two set-up commands on a fresh machine, then a check."""
    out, _ = release
    readme = (out / "README.md").read_text()
    block = re.search(r"```sh\n(.*?)```", readme, re.S).group(1)
    commands = [line.split("#")[0].strip() for line in block.splitlines() if line.strip()]
    assert len(commands) == 2 and "venv" in commands[0] and "pip install" in commands[1]
    copy = tmp_path / "edition"
    shutil.copytree(out, copy)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "VIRTUAL_ENV"))}
    env["PATH"] = os.pathsep.join(p for p in env["PATH"].split(os.pathsep) if "venvs" not in p)
    script = " && ".join(commands) + " && grader check lesson2 --json"
    p = subprocess.run(["bash", "-c", script.replace("python3", sys.executable, 1)], cwd=copy,
                       env=env, capture_output=True, text=True, timeout=900)
    assert p.returncode == 0, p.stderr[-2000:]
    report = json.loads(p.stdout.strip().splitlines()[-1])
    assert report["lesson"] == "lesson2" and report["score"] == 0           # the stub
    assert all(c["checked"] for c in report["criteria"])
    assert any(c["family"] == "scenario" for c in report["cases"])           # the public runs


def test_the_free_edition_and_published_solutions(tmp_path, recorded_once):
    course = find_course(str(ROOT))
    heard = []
    free = build_learner_edition(course, tmp_path / "free", lessons=("lesson1", "lesson2"), verify=False,
                                 say=heard.append)
    # A build takes a minute or two: each step is said as it starts.
    assert heard == ["recording what lesson1's public checks ask of the reference (1 of 2)",
                     "recording what lesson2's public checks ask of the reference (2 of 2)",
                     "recording the reference's rows of the experiments",
                     "proving it: no reference solution's text in any file"]
    assert free.lessons == ("lesson1", "lesson2") and set(free.left_out) == {"lesson3", "lesson4",
                                                                          "lesson5", "lesson6"}
    assert not (tmp_path / "free" / "assignments" / "lesson3").exists()
    # Lesson 2's README replays a knob on its workload: the lessons the edition does not
    # hold are not the learner's to write, so the baselines stand in, as for a stub.
    sheet = tmp_path / "prompt_only.yaml"
    sheet.write_text((tmp_path / "free" / "assignments" / "design_sheet.yaml").read_text()
                     .replace("\n  reserve: prompt_and_output", "\n  reserve: prompt_only", 1))
    p = in_release(tmp_path / "free", "sheet", "run", str(sheet), "--workload",
                   "assignments/lesson2/public/heavy-load.scenario.yaml", "--seeds", "7")
    assert p.returncode == 0, p.stderr
    assert "lesson3: not in this edition: the course baseline" in p.stdout and "broken_promise" in p.stdout
    # An experiment about a lesson it does not hold says so in one line.
    p = in_release(tmp_path / "free", "experiment", "prefill-deadline")
    assert p.returncode == 2 and "lesson3: not in this edition" in p.stderr and "Traceback" not in p.stderr
    # Its experiment help lists every experiment, each saying that its lesson is not here.
    p = in_release(tmp_path / "free", "experiment", "--help")
    assert p.returncode == 0, p.stderr
    for name, lesson in (("goodput", "lesson5"), ("prefill-deadline", "lesson3"), ("prefix-ownership", "lesson4")):
        assert f"  {name} ({lesson}, not in this edition): " in p.stdout, p.stdout
    # Its README speaks of what it holds: no lesson 6 folder, and the --workload a design
    # sheet needs without lesson 5 (whose workload the sheet names). A sheet run without one
    # says so, with a workload of the edition to give it: it read "no such workload file".
    readme = (tmp_path / "free" / "README.md").read_text()
    assert "lesson6" not in readme and "holds no lesson 5" in readme and "--workload" in readme
    p = in_release(tmp_path / "free", "sheet", "run", "assignments/design_sheet.yaml", cwd=tmp_path / "free")
    assert p.returncode == 2 and "Traceback" not in p.stderr, p.stderr
    assert ("this edition holds no lesson5, whose workload the sheet's release_criteria.workload names: "
            "replay the sheet on a workload of a lesson it holds with --workload (e.g. --workload "
            "assignments/lesson2/public/") in p.stderr, p.stderr
    late = build_learner_edition(course, tmp_path / "late", lessons=("lesson1",), publish=("lesson1",),
                                 verify=False)
    assert late.published == ("lesson1",)
    assert (tmp_path / "late" / "reference" / "solutions" / "lesson1.py").is_file()
    assert not (tmp_path / "late" / "reference" / "solutions" / "lesson2.py").exists()
    with pytest.raises(InputError, match="no such lesson"):
        build_learner_edition(course, tmp_path / "bad", lessons=("lesson9",), verify=False)


@pytest.mark.parametrize("args, says", [
    (["--lessons", ","], "--lessons: no lesson given (known: lesson1, "),
    (["--lessons", "lesson1", "--publish-solutions", "lesson2"],
     "--publish-solutions: lesson2 is not a lesson of this edition (--lessons lesson1)"),
], ids=["no-lesson", "publish-one-left-out"])
def test_a_release_that_contradicts_itself_is_refused_before_anything_is_written(tmp_path, capsys, args, says):
    from grader.cli import main
    out = tmp_path / "edition"
    assert main(["release", "--out", str(out), *args]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"grader: {says}") and err.count("\n") == 1, err
    assert not out.exists()


def test_release_refuses_a_folder_that_is_not_a_release(tmp_path):
    (tmp_path / "precious.txt").write_text("keep me")
    with pytest.raises(InputError, match="not empty"):
        build_learner_edition(find_course(str(ROOT)), tmp_path, verify=False)
    assert (tmp_path / "precious.txt").read_text() == "keep me"
    with pytest.raises(InputError, match="inside the course"):
        build_learner_edition(find_course(str(ROOT)), ROOT / "grader" / "edition-out", verify=False)


def test_release_replaces_an_earlier_release(tmp_path, recorded_once):
    from grader.instructor.release import EDITION_TOP
    out = tmp_path / "learner"
    build_learner_edition(find_course(str(ROOT)), out, lessons=("lesson1",), verify=False)
    assert {p.name for p in out.iterdir()} <= set(EDITION_TOP)
    (out / "assignments" / "stale.txt").write_text("old")
    (out / "serving_grader.egg-info").mkdir()          # what `pip install .` leaves there
    manifest = build_learner_edition(find_course(str(ROOT)), out, lessons=("lesson1",), verify=False)
    assert not (out / "assignments" / "stale.txt").exists() and manifest.lessons == ("lesson1",)
    assert not (out / "serving_grader.egg-info").exists()


def test_release_refuses_an_earlier_edition_holding_what_no_edition_writes(tmp_path, recorded_once):
    """An edition kept as a git repository to hand out (or beside the instructor's notes)
    was replaced whole: its .git/ and the notes were deleted without a word."""
    out = tmp_path / "learner"
    build_learner_edition(find_course(str(ROOT)), out, lessons=("lesson1",), verify=False)
    (out / ".git").mkdir()
    (out / ".git" / "HEAD").write_text("ref: refs/heads/main\n")
    (out / "notes.md").write_text("keep me")
    before = {p.relative_to(out): p.read_bytes() for p in out.rglob("*") if p.is_file()}
    with pytest.raises(InputError) as refused:
        build_learner_edition(find_course(str(ROOT)), out, lessons=("lesson1",), verify=False)
    assert refused.value.where == str(out)
    assert "(.git, notes.md), which replacing it would delete" in refused.value.message
    assert {p.relative_to(out): p.read_bytes() for p in out.rglob("*") if p.is_file()} == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["learner"]


@pytest.mark.parametrize("failure", ["a leak", "interrupted"])
def test_a_release_that_fails_leaves_the_earlier_one_as_it_was_and_nothing_half_made(tmp_path, monkeypatch,
                                                                                   failure, recorded_once):
    """Built beside --out and put in place once proven: a build that finds a leak, or is
    stopped with Ctrl-C, neither removes the earlier edition nor leaves a half-made one
    (which would look finished, its marker written before the proof)."""
    import grader.instructor.release as release
    out = tmp_path / "learner"
    build_learner_edition(find_course(str(ROOT)), out, lessons=("lesson1",), verify=False)
    before = {p.relative_to(out): p.read_bytes() for p in out.rglob("*") if p.is_file()}
    if failure == "a leak":
        monkeypatch.setattr(release, "find_leaks", lambda *a, **k: ["grader/x.py: holds the text of y"])
    else:
        def stopped(*a, **k):
            raise KeyboardInterrupt
        monkeypatch.setattr(release, "record_experiments", stopped)
    fresh = tmp_path / "fresh"
    for where in (out, fresh):
        with pytest.raises(InputError if failure == "a leak" else KeyboardInterrupt) as failed:
            build_learner_edition(find_course(str(ROOT)), where, lessons=("lesson1",), verify=False)
        if failure == "a leak":
            kept = "an earlier edition there is left as it was" if where == out else "nothing is written there"
            assert failed.value.where == str(where) and failed.value.message.endswith(kept)
    assert {p.relative_to(out): p.read_bytes() for p in out.rglob("*") if p.is_file()} == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["learner"]


def test_the_solutions_and_instructor_tools_are_never_copied_into_a_build(tmp_path, monkeypatch):
    """Left out as they are copied, not removed after: a build killed in between (kill -9)
    leaves no reference solution on disk beside the edition."""
    import grader.instructor.release as release
    entered = []

    def listing(directory, names):                    # called for each folder copytree copies
        entered.append(Path(directory).relative_to(release.PACKAGE_ROOT).as_posix())
        return ignored(directory, names)
    ignored = release.IGNORED
    monkeypatch.setattr(release, "IGNORED", listing)

    def stop(*args):
        raise KeyboardInterrupt                       # killed once the copy is done
    monkeypatch.setattr(release, "_published", stop)
    with pytest.raises(KeyboardInterrupt):
        build_learner_edition(find_course(str(ROOT)), tmp_path / "learner", lessons=("lesson1",), verify=False)
    assert "reference" in entered and "grader" in entered
    for left_out in ("reference/solutions", "grader/instructor", "grader/lessons/oracles"):
        assert not any(d == left_out or d.startswith(left_out + "/") for d in entered), left_out

def _refused(course, out, lesson: str, verify: bool = False):
    """The release of ``lesson`` from the course at ``course`` into ``out``, refused: what
    pytest.raises caught."""
    from grader.engine.layout import Course
    with pytest.raises(InputError) as refused:
        build_learner_edition(Course(course), out, lessons=(lesson,), verify=verify)
    return refused



def test_an_instructors_output_saved_in_a_lessons_folder_stops_the_release(course, tmp_path):
    """`grader gradescope lesson1 --out assignments/lesson1/autograder.zip` (or an export, a
    gradebook kept there) would ship with the lesson's files: the zip holds the secret and
    the solutions, the others every student's grades. Told by their bytes, not their names."""
    lesson = course / "assignments" / "lesson1"
    import zipfile
    with zipfile.ZipFile(lesson / "autograder.zip", "w") as z:      # what `grader gradescope` writes
        for name in ("autograder.json", "run_autograder", "secret"):
            z.writestr(name, "")
    (lesson / "marks.txt").write_bytes('\ufeff"student","lesson1 total"\r\n'.encode())
    (lesson / "old.sqlite").write_bytes(b"SQLite format 3\x00" + bytes(100))
    out = tmp_path / "learner"
    refused = _refused(course, out, "lesson1")
    assert refused.value.where == str(out)
    assert refused.value.message == (
        "the course's folders hold what an instructor's command wrote, which would ship to every "
        "learner: assignments/lesson1/autograder.zip: autograder zip; assignments/lesson1/marks.txt: "
        "CSV export; assignments/lesson1/old.sqlite: gradebook or other SQLite database; move them "
        "out of the course's folders; nothing is written there")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["course"]


def test_an_incident_answer_key_saved_in_the_courses_folders_stops_the_release(course, tmp_path):
    """`grader incident --practice p1 --out assignments/lesson6/practice/p1/ --answer
    assignments/lesson6/practice/p1/answer/` keeps the key beside the bundle: the edition
    shipped it, though it seals the practice answers it records. Told by how the key's files
    begin, whatever they are named."""
    from grader.course.bundle import write_answer
    from grader.course.incident import practice_incidents
    from grader.engine.layout import Course
    p1 = next(i for i in practice_incidents(Course(course)) if i.id == "p1")
    key = write_answer(p1, course / "assignments" / "lesson6" / "practice" / "p1" / "answer")
    (key / "diagnosis.yaml").rename(key / "notes.yaml")
    out = tmp_path / "learner"
    refused = _refused(course, out, "lesson6")
    assert refused.value.message == (
        "the course's folders hold what an instructor's command wrote, which would ship to every "
        "learner: assignments/lesson6/practice/p1/answer/design_sheet.yaml: an incident's answer key; "
        "assignments/lesson6/practice/p1/answer/notes.yaml: an incident's answer key; move them out of "
        "the course's folders; nothing is written there")
    assert not out.exists()


def test_a_solution_saved_in_a_lessons_folder_stops_the_release(course, tmp_path):
    """A correct answer written otherwise than the reference (a draft beside the stub, a
    worked answer) shipped in assignments/ and earned 10 of 10, while the build said it had
    proven that nothing it ships earns more than half a lesson: the proof covered the
    package's modules only. Each lesson file is now checked as it stands."""
    from grader.engine.layout import Course
    text = (SUBMISSIONS / "lesson1" / "alt_correct.py").read_text()
    same = "    return pages_for(request.prompt_tokens + request.max_new_tokens, worker.page_tokens)\n"
    assert same in text                 # the one body the reference's text search would find
    draft = course / "assignments" / "lesson1" / "drafts" / "mine.py"
    draft.parent.mkdir()
    draft.write_text(text.replace(same, "    total = request.max_new_tokens + request.prompt_tokens\n"
                                        "    return pages_for(total, worker.page_tokens)\n"))
    out = tmp_path / "learner"
    refused = _refused(course, out, "lesson1", verify=True)
    assert refused.value.message == (
        "the course's assignments/ holds code that earns more than half of a lesson handed in as it "
        "stands: lesson1: assignments/lesson1/drafts/mine.py as it stands earns 10 of 10 (public cases); "
        "move a solution out of the course's folders, or restore the lesson's stub; nothing is written "
        "there")
    assert not out.exists()
    draft.unlink()                      # the stub alone: proven, and the proof says so
    manifest = build_learner_edition(Course(course), out, lessons=("lesson1",))
    assert "lesson1: assignments/lesson1/exercise.py as it stands earns 0 of 10 (public cases)" in manifest.proof


def test_a_link_leading_out_of_the_courses_folders_stops_the_release(course, tmp_path):
    """The course's folders were copied following every symbolic link: a link to the secret
    named other than *.secret (`assignments/lesson1/key -> ../../course.secret`) shipped the
    secret, and one to a folder of the instructor's shipped the folder, to every learner.
    Refused before anything is written, naming each; a link within the folder is copied."""
    secret = tmp_path / "course.secret"
    secret.write_text("s3cret, 7d02b1c9e4\n")
    private = tmp_path / "private"
    private.mkdir()
    (private / "answers.txt").write_text("the answers\n")
    lesson = course / "assignments" / "lesson1"
    (lesson / "key").symlink_to(secret)
    (lesson / "notes").symlink_to(private)
    (course / "rubrics" / "gone.yaml").symlink_to(tmp_path / "nothing.yaml")
    (lesson / "again.yaml").symlink_to("public.yaml")                  # inside: copied as a file
    (lesson / ".hidden").symlink_to(secret)                            # a dot-name is never copied
    out = tmp_path / "learner"
    refused = _refused(course, out, "lesson1")
    assert refused.value.where == str(course)
    assert refused.value.message == (
        "the course's folders hold symbolic links that lead out of them, and the edition would ship "
        f"what each leads to: assignments/lesson1/key -> {secret}; assignments/lesson1/notes -> "
        f"{private}; rubrics/gone.yaml leads nowhere; copy into the folder what learners need, or "
        "remove the link")
    assert not out.exists() and not any(p.name.startswith(".learner") for p in tmp_path.iterdir())


def test_the_release_installs_what_it_imports_and_nothing_else(release):
    """No instructor extras, no dependency of what was left out (the gradebook's SQLAlchemy),
    and every third-party module the release imports is a declared dependency."""
    import tomllib
    from grader.instructor.release import IMPORT_NAMES, _third_party_imports
    out, _ = release
    project = tomllib.loads((out / "pyproject.toml").read_text())["project"]
    assert "optional-dependencies" not in project
    declared = {IMPORT_NAMES[re.split(r"[<>=!~\[ ]", d)[0].lower()] for d in project["dependencies"]}
    imported = {m for m in _third_party_imports(out)
                if m not in sys.stdlib_module_names and m not in ("grader", "reference")}
    assert declared == imported and "sqlalchemy" not in declared


def test_a_learners_own_tests_run_under_the_editions_pyproject(release, tmp_path):
    """A learner who writes a test of their own functions runs `pytest` in the edition's
    folder, with pytest alone installed. The course's suite and its options (`-n auto`, which
    needs pytest-xdist) do not ship, so the edition's pyproject must not pass them; nor may it
    name data of a package it does not ship."""
    import tomllib
    out, _ = release
    shutil.copy2(out / "pyproject.toml", tmp_path / "pyproject.toml")
    (tmp_path / "test_mine.py").write_text("def test_pages():\n    assert -(-33 // 16) == 3\n")
    # Without the xdist plugin, as in a learner's venv where only pytest was installed.
    p = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:xdist", "-p", "no:cacheprovider",
                        "test_mine.py"], cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stdout[-1500:] + p.stderr[-1500:]
    assert "1 passed" in p.stdout
    tool = tomllib.loads((out / "pyproject.toml").read_text())["tool"]
    assert "pytest" not in tool
    for package in tool["setuptools"].get("package-data", {}):
        assert package == "*" or (out.joinpath(*package.split("."))).is_dir(), package


# ---- the experiments, with the learner's own functions plugged in ------------------------------
# Small settings (each call of a learner's function crosses to its sandbox); the edition
# recorded the reference's rows at the defaults only.
EXPERIMENTS = {"prefill-deadline": ("lesson3", "rule", ["prompts=2", "chunks=512"]),
               "prefix-ownership": ("lesson4", "variant", ["requests=60", "variants=no_scope", "cancel_rates=0"]),
               "goodput": ("lesson5", "design", ["rates=2", "seeds=2", "requests=30"])}


def course_experiment(name, settings=()):
    from grader.course import experiments
    return json.loads(json.dumps(experiments.run(name, list(settings), find_course(str(ROOT))).to_dict()))


def edition_experiment(out, name, settings=(), course=None):
    args = ["--course", str(course)] if course else []
    sets = [a for s in settings for a in ("--set", s)]
    p = in_release(out, *args, "experiment", name, *sets, "--json")
    assert p.returncode == 0 and "Traceback" not in p.stderr, p.stderr[-2000:]
    return json.loads(p.stdout)


@pytest.mark.parametrize("name", sorted(EXPERIMENTS))
def test_an_experiment_in_the_edition_with_the_reference_as_ones_own(release, tmp_path, name):
    """The learner's files are the reference solutions (goodput runs on all five lessons):
    the rows are the course's reference rows; the reference's own were not recorded at
    these settings, and the edition says so."""
    out, _ = release
    lesson, key, settings = EXPERIMENTS[name]
    course = tmp_path / "course"
    for sub in ("assignments", "rubrics"):
        shutil.copytree(out / sub, course / sub)
    for n in range(1, 6):
        shutil.copy(SOLUTIONS / f"lesson{n}.py", course / "assignments" / f"lesson{n}" / "exercise.py")
    got = edition_experiment(out, name, settings, course)
    assert got["rows"] == course_experiment(name, settings)["rows"]
    assert any("not available for these settings" in n for n in got["notes"])
    assert any(f"from {course / 'assignments' / lesson / 'exercise.py'}" in n for n in got["notes"])


@pytest.mark.parametrize("name", sorted(EXPERIMENTS))
def test_an_experiment_in_the_edition_with_the_stub(release, tmp_path, name):
    """The edition's own stubs: the learner's rows say not implemented, the reference's rows
    beside them are the course's at the defaults (recorded when the edition was built)."""
    out, _ = release
    _, key, _ = EXPERIMENTS[name]
    got = edition_experiment(out, name)
    want = [r for r in course_experiment(name)["rows"] if not r[key].startswith("fixed ")]
    missing = [r for r in got["rows"] if r.get("missing")]
    assert missing and all(r[key].endswith(": not implemented") for r in missing)
    ref = [{**r, key: r[key].removeprefix("reference: ")} for r in got["rows"] if r.get("reference")]
    assert [{k: v for k, v in r.items() if k != "reference"} for r in ref] == want
    assert any("recorded when this edition was built" in n for n in got["notes"])
    p = in_release(out, "experiment", name, "--plot", str(tmp_path / "stub.png"))
    assert p.returncode == 0 and "not implemented" in p.stdout, p.stderr[-2000:]
    assert (tmp_path / "stub.png").stat().st_size > 1000


@pytest.mark.parametrize("name", sorted(EXPERIMENTS))
def test_the_reference_rows_stay_once_the_learner_fills_in_the_design_sheet(release, tmp_path, name):
    """Filling in assignments/design_sheet.yaml is every lesson's homework, and no experiment
    reads that file: at the default settings the reference's recorded rows are still shown,
    not 'not available for these settings'."""
    out, _ = release
    course = tmp_path / "course"
    for sub in ("assignments", "rubrics"):
        shutil.copytree(out / sub, course / sub)
    sheet = course / "assignments" / "design_sheet.yaml"
    text = sheet.read_text(encoding="utf-8")
    filled = re.sub(r"(?m)^(  pool_pages:) ", r"\1 30720", text, count=1)
    assert filled != text
    sheet.write_text(filled, encoding="utf-8")
    got = edition_experiment(out, name, course=course)
    assert any(r.get("reference") for r in got["rows"]), got["notes"]
    assert not any("not available for these settings" in n for n in got["notes"])


def test_goodput_in_the_edition_with_qualify_written_and_decide_release_not(release, tmp_path):
    """Lesson 5 half done in the edition (the learner's lessons 1 to 4 beside it): goodput's
    figures and paired differences, no decision, and the notes say which function is missing
    under a label that covers lesson 5."""
    out, _ = release
    course = tmp_path / "course"
    for sub in ("assignments", "rubrics"):
        shutil.copytree(out / sub, course / sub)
    source = (SOLUTIONS / "lesson5.py").read_text(encoding="utf-8")
    source += "\n\ndef decide_release(baseline_runs, candidate_runs, rule):\n    raise NotImplementedError\n"
    (course / "assignments" / "lesson5" / "exercise.py").write_text(source, encoding="utf-8")
    got = edition_experiment(out, "goodput", EXPERIMENTS["goodput"][2] + ["candidates=gain"], course)
    mine = [r for r in got["rows"] if not r.get("reference") and r["design"] == "gain"]
    assert mine and all(r["decision"] is None and r["goodput"] is not None for r in mine)
    assert any(n.startswith("lessons 1 to 5: your own functions (") and
               "lesson5: decide_release is not written yet: no release decision" in n for n in got["notes"]), got["notes"]


def test_experiment_help_in_the_edition_lists_every_experiment_and_setting(release):
    from grader.course import experiments
    out, _ = release
    p = in_release(out, "experiment", "--help")
    assert p.returncode == 0, p.stderr
    text = " ".join(p.stdout.split())
    for name in experiments.names():
        assert f"{name} ({experiments.find(name).lesson})" in text
        assert all(f"{k.name} (default " in text for k in experiments.find(name).knobs)
    assert "not in this edition" not in text          # it holds every lesson
    assert "assignments/LESSON/exercise.py of the experiment's lesson" in text
