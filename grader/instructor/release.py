"""The learner edition: the copy of the course a course can publish (``grader release``).

Left out: the reference solutions (reference/solutions/), the hidden families
(grader/instructor/families/), the instructor commands and their modules (grade, export, feedback,
release), and every lesson whose public checks cannot run without the reference,
with the modules beside it (grader/lessons/) that no released lesson needs.
Put in: the oracle's answers to each released lesson's public cases
(grader/expectations/<lesson>.json, see grader.engine.oracle), recorded by grading the reference
solution, the stub and the course's test submissions in check mode, so ``grader check``
gives the same report in the release as in the course.

Worker runs are the exception: a learner's function runs in the worker beside the
reference's other decisions (lesson 2's ledger beside lesson 3's chunk rule and lesson 4's
cancellation), so publishing those runs would publish the other lessons' answers. The
learner edition has no such cases (grader.engine.oracle.reference_policies); a criterion that
only runs can show is reported as not checked there, and counts in neither total.

A lesson is released when nothing importing its grading module needs (followed through
the release's own modules) is missing from the release. The build then proves itself: no
function body of a reference solution appears anywhere in the release, and ``grader
check`` run inside the release gives the reference solution full marks.
"""
from __future__ import annotations

import ast
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import textwrap
from dataclasses import dataclass, field
from pathlib import Path

from grader import __version__
from grader.engine.layout import Course
from grader.engine.edition import MARKER
from grader.engine.errors import InputError

PACKAGE_ROOT = Path(__file__).resolve().parents[2]
SOLUTIONS = Path("reference") / "solutions"
LEFT_OUT = (                           # never in the learner edition
    SOLUTIONS,
    # The instructor's tools (batch, gradebook, exports, release) and the hidden families
    # drawn with the secret: learners need none of them.
    Path("grader") / "instructor",
    Path("grader") / "expectations",   # rebuilt for each release
    Path("grader") / MARKER.name,
)
IGNORED = shutil.ignore_patterns("__pycache__", "*.pyc", ".*", "*.db", "*.db-*", "*.secret",
                                 "*.egg-info")
# Learner commands beyond `check`, as (package, its machinery modules): the command is
# available while at least one other module of the package made it into the release.
COMMAND_PACKAGES = {"experiment": ("grader.course.experiments", {"__init__", "common"})}


class ReleaseError(InputError):
    """The release could not be built safely (a leak, or a check that fails in it)."""


@dataclass(frozen=True)
class EditionManifest:
    out: str
    lessons: tuple[str, ...]
    left_out: dict = field(default_factory=dict)            # lesson -> why
    expectations: dict = field(default_factory=dict)        # lesson -> answers recorded
    unavailable_commands: dict = field(default_factory=dict)  # command -> why
    pruned: tuple[str, ...] = ()                            # modules that could not ship
    files: int = 0

    def to_dict(self) -> dict:
        return {"edition": "learner", "grader_version": __version__, "lessons": list(self.lessons),
                "left_out": self.left_out, "expectations": self.expectations,
                "unavailable_commands": self.unavailable_commands, "pruned": list(self.pruned)}

    def render(self) -> str:
        lines = [f"learner edition in {self.out}: {self.files} files; lessons: "
                 f"{', '.join(self.lessons) or 'none'}"]
        lines += [f"  {lesson}: {n} expected answers precomputed"
                  for lesson, n in self.expectations.items()]
        lines += [f"  left out {lesson}: {why}" for lesson, why in self.left_out.items()]
        lines += [f"  no `grader {cmd}`: {why}" for cmd, why in self.unavailable_commands.items()]
        if self.pruned:
            lines.append(f"  modules left out (they import what is not shipped): {', '.join(self.pruned)}")
        return "\n".join(lines)


# ---------------------------------------------------------------------------- imports

def _module_path(root: Path, dotted: str) -> Path | None:
    base = root.joinpath(*dotted.split("."))
    for path in (base.with_suffix(".py"), base / "__init__.py"):
        if path.is_file():
            return path
    return None


def _imports(path: Path, dotted: str, anywhere: bool = True) -> set[str]:
    """The course's own modules (grader.*, reference.*) a module imports: anywhere in it,
    or only at its top level (what importing the module itself needs)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    package = dotted if path.name == "__init__.py" else dotted.rpartition(".")[0]
    found = set()
    for node in (ast.walk(tree) if anywhere else tree.body):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")
                parent = ".".join(parts[:len(parts) - node.level + 1])
                base = f"{parent}.{base}" if base else parent
            found.add(base)
            found.update(f"{base}.{a.name}" for a in node.names)
    return {m for m in found if m.split(".")[0] in ("grader", "reference")}


def missing_imports(root: Path, module: str, anywhere: bool = True) -> list[str]:
    """Modules that ``module`` needs (directly or through the release's own modules) and
    that the tree at ``root`` does not hold. ``from x import name`` counts x only, unless
    x.name is a module of its own. ``anywhere=False`` follows top-level imports only."""
    missing, seen, todo = set(), set(), [module]
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        path = _module_path(root, name)
        if path is None:
            parent = name.rpartition(".")[0]
            # `from pkg import attr`: fine when pkg exists and attr is not a module there.
            if parent and _module_path(root, parent) is not None and \
                    _module_path(PACKAGE_ROOT, name) is None:
                continue
            missing.add(name)
            continue
        todo += sorted(_imports(path, name, anywhere))
        if "." in name:
            todo.append(name.rpartition(".")[0])     # importing a.b runs a/__init__ first
    # Name the outermost missing package once, not each module under it.
    return sorted(m for m in missing if not any(m.startswith(o + ".") for o in missing))


# ---------------------------------------------------------------------------- leaks

def _bodies(tree: ast.AST):
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(getattr(body[0], "value", None), ast.Constant) \
                    and isinstance(body[0].value.value, str):
                body = body[1:]                      # the docstring is the contract, not the answer
            if body:
                yield node, body


def solution_fingerprints(solutions: Path) -> dict[str, str]:
    """{normalized function body: "file:function"} for every reference solution function
    whose body is more than a stub that raises NotImplementedError."""
    prints = {}
    for path in sorted(solutions.glob("*.py")):
        if path.name == "__init__.py":
            continue
        for fn, body in _bodies(ast.parse(path.read_text(encoding="utf-8"))):
            text = ast.unparse(ast.Module(body=body, type_ignores=[]))
            # A one-line body this short is arithmetic any implementation shares (a ceiling
            # division): the worker's own sizes hold it too, and it gives nothing away.
            trivial = len(body) == 1 and len(text) < 40
            if not trivial and "NotImplementedError" not in text:
                prints[text] = f"{path.name}:{fn.name}"
    return prints


def find_leaks(root: Path, prints: dict[str, str]) -> list[str]:
    """Where a reference solution's function body appears in the tree: as the body of a
    function (any formatting or comments) or verbatim in any text file."""
    leaks = []
    for path in sorted(p for p in root.rglob("*") if p.is_file()):
        try:
            text = path.read_text(encoding="utf-8")
        except (UnicodeDecodeError, OSError):
            continue
        rel = path.relative_to(root)
        if path.suffix == ".py":
            try:
                tree = ast.parse(text)
            except SyntaxError:
                tree = None
            if tree is not None:
                for fn, body in _bodies(tree):
                    body_text = ast.unparse(ast.Module(body=body, type_ignores=[]))
                    if body_text in prints:
                        leaks.append(f"{rel}: {fn.name} is {prints[body_text]}")
        for body_text, where in prints.items():
            if len(body_text) >= 60 and body_text in text:
                leaks.append(f"{rel}: holds the text of {where}")
    return leaks


# ---------------------------------------------------------------------------- building

def _prepare(out: Path, course: Course) -> None:
    out = out.resolve()
    for source in (PACKAGE_ROOT, course.root):
        for sub in ("grader", "reference", "assignments", "rubrics"):
            inside = (source / sub).resolve()
            if out == inside or inside in out.parents:
                raise InputError(str(out), f"is inside the course's {sub}/ folder; choose another")
    if out.exists():
        if not out.is_dir():
            raise InputError(str(out), "exists and is not a folder")
        if any(out.iterdir()):
            if not (out / "grader" / MARKER.name).is_file():
                raise InputError(str(out), "is not empty and holds no earlier learner edition")
            shutil.rmtree(out)


def _copy(out: Path, course: Course) -> None:
    out.mkdir(parents=True, exist_ok=True)
    for sub in ("grader", "reference"):
        shutil.copytree(PACKAGE_ROOT / sub, out / sub, ignore=IGNORED)
    if (PACKAGE_ROOT / "pyproject.toml").is_file():
        shutil.copy2(PACKAGE_ROOT / "pyproject.toml", out / "pyproject.toml")
    for sub in ("assignments", "rubrics"):
        shutil.copytree(course.root / sub, out / sub, ignore=IGNORED, dirs_exist_ok=True)
    for rel in LEFT_OUT:
        path = out / rel
        if path.is_dir():
            shutil.rmtree(path)
        elif path.exists():
            path.unlink()


def _modules(out: Path):
    for path in sorted(out.rglob("*.py")):
        rel = path.relative_to(out).with_suffix("")
        parts = rel.parts[:-1] if rel.name == "__init__" else rel.parts
        if parts and parts[0] in ("grader", "reference"):
            yield ".".join(parts), path


def _prune(out: Path) -> list[str]:
    """Delete the modules that cannot even be imported without what was left out (the
    worker, the reference policies, ...): what ships, runs."""
    broken = [(name, path) for name, path in _modules(out)
              if missing_imports(out, name, anywhere=False)]
    for _, path in broken:
        path.unlink()
    return [name for name, _ in broken]


def _drop_lesson(out: Path, lesson: str) -> None:
    for path in (out / "rubrics" / f"{lesson}.yaml", out / "grader" / "lessons" / f"{lesson}.py"):
        if path.exists():
            path.unlink()
    if (out / "assignments" / lesson).is_dir():
        shutil.rmtree(out / "assignments" / lesson)


def _drop_unneeded_lesson_parts(out: Path) -> None:
    """A lesson's own modules beside it go with it: only those a shipped module imports
    (anywhere, followed through each other) stay. Some need nothing the release leaves out
    (lesson 4's table model checker, lesson 3's search oracle), yet they judge, and so
    give away, the answers of a lesson the release does not have."""
    folder = out / "grader" / "lessons"
    parts = {f"grader.lessons.{p.stem}": p for p in folder.glob("*.py")
             if p.stem != "__init__" and not p.stem.startswith("lesson")}
    needed: set[str] = set()
    todo = [(name, path) for name, path in _modules(out) if name not in parts]
    while todo:
        name, path = todo.pop()
        for part in _imports(path, name) & parts.keys() - needed:
            needed.add(part)
            todo.append((part, parts[part]))
    for name in parts.keys() - needed:
        parts[name].unlink()


# Import name of each distribution the course depends on (the release keeps only those
# its shipped modules import).
IMPORT_NAMES = {"numpy": "numpy", "pyyaml": "yaml", "jsonschema": "jsonschema",
                "matplotlib": "matplotlib", "sqlalchemy": "sqlalchemy"}


def _third_party_imports(out: Path) -> set[str]:
    found = set()
    for _, path in _modules(out):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                found.update(a.name.split(".")[0] for a in node.names)
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                found.add(node.module.split(".")[0])
    return found


def _trim_pyproject(out: Path) -> None:
    """The release installs what its own modules import: the dependencies of what was left
    out (the gradebook's SQLAlchemy) and the instructor extras (nbgrader, dask, postgres,
    test) go. The course's pyproject is ours, so its layout is known: one dependency per
    line, the extras in their own table."""
    path = out / "pyproject.toml"
    if not path.is_file():
        return
    used = _third_party_imports(out)
    lines, kept, in_deps, in_extras = path.read_text(encoding="utf-8").splitlines(), [], False, False
    for line in lines:
        stripped = line.strip()
        if stripped.startswith("["):
            in_extras = stripped == "[project.optional-dependencies]"
        if in_extras:
            continue
        if stripped.startswith("dependencies = ["):
            in_deps = True
        elif in_deps and stripped.startswith("]"):
            in_deps = False
        elif in_deps and stripped.startswith('"'):
            dist = re.match(r'"([A-Za-z0-9_.-]+)', stripped).group(1).lower()
            if IMPORT_NAMES.get(dist, dist) not in used:
                continue
        kept.append(line)
    path.write_text("\n".join(kept) + "\n", encoding="utf-8")


def _recorded_submissions(course: Course, lesson: str) -> list[Path]:
    """What expectations are recorded on: the reference (every judge runs), the stub, and
    the course's wrong test submissions (the paths a mistake takes)."""
    paths = [PACKAGE_ROOT / SOLUTIONS / f"{lesson}.py", course.assignment(lesson) / "exercise.py"]
    paths += sorted((PACKAGE_ROOT / "tests" / "submissions" / lesson).glob("*.py"))
    return [p for p in paths if p.is_file()]


def record_expectations(course: Course, lesson: str) -> dict[str, dict]:
    """The oracle's answers to every call the lesson's public checks make of it, as they
    run in the learner edition: {oracle lesson: {key: answer}} (lesson 2 asks lesson 1's
    oracle to count pages)."""
    from grader.engine.errors import InputError as _InputError
    from grader.engine.oracle import as_in_the_learner_edition, recording
    from grader.engine.pipeline import grade_path
    with recording() as answers, as_in_the_learner_edition():
        for path in _recorded_submissions(course, lesson):
            try:
                grade_path(lesson, path, course, mode="check")
            except _InputError:
                continue            # a test submission that is unreadable on purpose
    return answers


# Runs a command in the release as a fresh install would: the course's own editable
# install (a meta-path finder that maps `reference` to the course) must not answer imports
# the release does not hold, or the check would pass on the course's solutions.
ISOLATED = """
import runpy, sys
sys.meta_path[:] = [f for f in sys.meta_path if "editable" not in repr(f).lower()]
sys.argv[0] = "grader"
runpy.run_module(sys.argv.pop(1), run_name="__main__", alter_sys=True)
"""


def run_in_release(out: Path, module: str, *args: str, cwd: Path | None = None):
    """``python -m module args`` inside the release (as a fresh install of it would run)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTHON")}
    env["PYTHONPATH"] = str(out)
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    return subprocess.run([sys.executable, "-c", ISOLATED, module, *args], cwd=cwd or out,
                          env=env, capture_output=True, text=True, timeout=300)


def _verify(out: Path, lessons: tuple[str, ...]) -> None:
    """Run `grader check` inside the release on each released lesson's reference solution,
    from a folder outside the release: it must get full marks."""
    with tempfile.TemporaryDirectory(prefix="grader-release-check-") as tmp:
        for lesson in lessons:
            ref = Path(tmp) / f"{lesson}_reference.py"
            shutil.copy2(PACKAGE_ROOT / SOLUTIONS / f"{lesson}.py", ref)
            p = run_in_release(out, "grader.cli", "check", lesson, "--submission", str(ref), "--json")
            try:
                report = json.loads(p.stdout)
            except ValueError:
                report = None
            if p.returncode != 0 or report is None or report["score"] != report["max_score"]:
                detail = (p.stderr.strip().splitlines() or ["no output"])[-1]
                raise ReleaseError(str(out), f"`grader check {lesson}` in the release does not "
                                             f"give the reference full marks: {detail}")


def _readme(lessons: tuple[str, ...]) -> str:
    listed = "\n".join(f"- `{lesson}`: `assignments/{lesson}/`" for lesson in lessons)
    return textwrap.dedent("""\
        # Serving under pressure: from admission to release (learner edition)

        ```sh
        pip install -e .
        grader check lesson1                      # grades assignments/lesson1/exercise.py
        grader check lesson1 --submission my.ipynb --json
        ```

        Lessons in this edition:

        {listed}

        Read the lesson's README, implement the functions of its `exercise.py`, and run
        `grader check`: the public cases, a table of criteria with points, and one line of
        feedback per criterion that lost points. Your instructor grades on hidden cases of
        the same kinds as well, so fitting the public numbers by hand earns nothing.

        A criterion marked `n/a` (lesson 2's efficiency) needs worker runs of your function
        beside the other lessons' reference decisions, which this edition does not ship: it
        counts in neither total here, and your graded submission is checked on it.

        > The service-cost model is synthetic: a teaching model, not a measurement of any
        > engine or GPU.
        """).replace("{listed}", listed)


def build_learner_edition(course: Course, out: Path, *, verify: bool = True) -> EditionManifest:
    _prepare(out, course)
    out = out.resolve()
    _copy(out, course)

    released, left_out, expectations, recorded = [], {}, {}, {}
    candidates = set(course.lessons())
    candidates |= {p.name for p in (out / "assignments").glob("lesson[0-9]*") if p.is_dir()}
    candidates |= {p.stem for p in (out / "grader" / "lessons").glob("lesson[0-9]*.py")}
    for lesson in sorted(candidates):
        # What importing the lesson's module needs: a lesson may import the machinery of
        # its worker runs only where it has such cases, which the learner edition has not
        # (grader.engine.oracle.reference_policies); _verify proves the released check runs.
        missing = missing_imports(out, f"grader.lessons.{lesson}", anywhere=False)
        if lesson not in course.lessons():
            left_out[lesson] = "it has no rubric yet"
            _drop_lesson(out, lesson)
            continue
        if missing:
            left_out[lesson] = (f"its checks need {', '.join(missing)}, which the learner "
                                f"edition does not ship")
            _drop_lesson(out, lesson)
            continue
        answers = record_expectations(course, lesson)
        for oracle, table in answers.items():
            recorded.setdefault(oracle, {}).update(table)
        expectations[lesson] = sum(len(t) for t in answers.values())
        released.append(lesson)
    if recorded:
        folder = out / "grader" / "expectations"
        folder.mkdir(exist_ok=True)
        for oracle, table in recorded.items():
            (folder / f"{oracle}.json").write_text(json.dumps(table, sort_keys=True), encoding="utf-8")

    _drop_unneeded_lesson_parts(out)
    pruned = _prune(out)
    _trim_pyproject(out)
    unavailable = {}
    for command, (package, machinery) in COMMAND_PACKAGES.items():
        folder = out.joinpath(*package.split("."))
        if not any(p.stem not in machinery for p in folder.glob("*.py")):
            unavailable[command] = ("not in the learner edition: it runs the reference worker "
                                    "and policies, which are not shipped")

    (out / "README.md").write_text(_readme(tuple(released)), encoding="utf-8")
    manifest = EditionManifest(out=str(out), lessons=tuple(released), left_out=left_out,
                               expectations=expectations, unavailable_commands=unavailable,
                               pruned=tuple(pruned))
    (out / "grader" / MARKER.name).write_text(json.dumps(manifest.to_dict(), indent=2, sort_keys=True)
                                              + "\n", encoding="utf-8")

    leaks = find_leaks(out, solution_fingerprints(PACKAGE_ROOT / SOLUTIONS))
    if leaks:
        raise ReleaseError(str(out), "reference solution text in the learner edition: "
                           + "; ".join(leaks[:5]))
    if verify:
        _verify(out, manifest.lessons)
    files = sum(1 for p in out.rglob("*") if p.is_file())
    return EditionManifest(**{**manifest.__dict__, "files": files})
