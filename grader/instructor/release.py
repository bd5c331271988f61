"""The learner edition: the copy of the course a course can hand to learners (``grader release``).

What learners get: every lesson (or those of ``--lessons``), each checked with
``grader check`` exactly as the course checks it on the public cases; the worker
(reference/, less its solutions); the course machinery (experiments, the design sheet,
scenarios) with the learner's own functions as the correct core; the lessons' files.

What they never get: a reference solution (unless the instructor publishes the ones whose
deadline has passed: ``--publish-solutions``), the hidden families and every instructor
tool (grader/instructor/), and the code that computes a lesson's answer for its judges
(grader/lessons/oracles/). In their place, what the checks ask of the reference on the
public cases (answers, oracle figures, and lessons 5 and 6's public cases, which are made
of the reference's runs) is recorded into grader/expectations/ by grading the course's
known submissions (grader.instructor.templates) in check mode.

The build proves itself three ways before it returns: no function body of a reference
solution appears in any file (find_leaks); ``grader check`` inside the release gives the
reference full marks (_verify); and every shipped callable that could be handed in for a
graded function, by its name or its parameters, earns at most half of its lesson on hidden
cases (grader.instructor.equivalence).
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
from grader.engine.layout import Course, did_you_mean
from grader.engine.edition import MARKER
from grader.engine.errors import InputError
from grader.engine.text import first_few

PACKAGE_ROOT = Path(__file__).resolve().parents[2]
SOLUTIONS = Path("reference") / "solutions"
LEFT_OUT = (                           # never in the learner edition
    SOLUTIONS,
    # The instructor's tools (batch, gradebook, exports, release) and the hidden families
    # drawn with the secret: learners need none of them.
    Path("grader") / "instructor",
    # The code that computes a lesson's answer for its judges: recorded instead.
    Path("grader") / "lessons" / "oracles",
    Path("grader") / "expectations",   # rebuilt for each release
    Path("grader") / MARKER.name,
)
# The pages written for learners (docs/learners.md says it is for the edition's holder too):
# the commands, the worker's semantics and what each experiment shows. The instructors',
# authors' and developers' pages stay with the course.
LEARNER_DOCS = ("learners.md", "worker.md", "experiments.md")
IGNORED = shutil.ignore_patterns("__pycache__", "*.pyc", ".*", "*.db", "*.db-*", "*.secret",
                                 "*.egg-info")


class ReleaseError(InputError):
    """The release could not be built safely (a leak, or a check that fails in it)."""


@dataclass(frozen=True)
class EditionManifest:
    out: str
    lessons: tuple[str, ...]
    left_out: dict = field(default_factory=dict)            # lesson -> why
    expectations: dict = field(default_factory=dict)        # lesson -> answers recorded
    experiments: tuple[str, ...] = ()                       # whose reference rows were recorded
    pruned: tuple[str, ...] = ()                            # modules that could not ship
    published: tuple[str, ...] = ()                         # lessons whose solutions ship
    files: int = 0
    proof: tuple[str, ...] = ()                             # what each shipped look-alike earns

    def to_dict(self) -> dict:
        return {"edition": "learner", "grader_version": __version__, "lessons": list(self.lessons),
                "left_out": self.left_out, "expectations": self.expectations,
                "experiments": list(self.experiments),
                "pruned": list(self.pruned), "published_solutions": list(self.published)}

    def render(self) -> str:
        lines = [f"learner edition in {self.out}: {self.files} files; lessons: "
                 f"{', '.join(self.lessons) or 'none'}"]
        lines += [f"  {lesson}: {n} expected answers precomputed"
                  for lesson, n in self.expectations.items()]
        if self.experiments:
            lines.append(f"  experiments with the reference's rows recorded at their defaults: "
                         f"{', '.join(self.experiments)}")
        lines += [f"  left out {lesson}: {why}" for lesson, why in self.left_out.items()]
        if self.published:
            lines.append(f"  reference solutions published: {', '.join(self.published)}")
        lines += [f"  self-proof: {line}" for line in self.proof]
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


def missing_imports(root: Path, module: str, anywhere: bool = True,
                    read: dict[str, set[str]] | None = None) -> list[str]:
    """Modules that ``module`` needs (directly or through the release's own modules) and
    that the tree at ``root`` does not hold. ``from x import name`` counts x only, unless
    x.name is a module of its own. ``anywhere=False`` follows top-level imports only.

    ``read`` keeps each module's imports between calls on one tree that does not change
    in between: asked of every module of a release in turn, the walks share their modules,
    and each was parsed again by every walk that reached it (15 times on average)."""
    read = {} if read is None else read
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
        if name not in read:
            read[name] = _imports(path, name, anywhere)
        todo += sorted(read[name])
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
            trivial = len(body) == 1 and len(text) < 60
            if not trivial and "NotImplementedError" not in text:
                prints[text] = f"{path.name}:{fn.name}"
    return prints


def find_leaks(root: Path, prints: dict[str, str], allowed: tuple[Path, ...] = ()) -> list[str]:
    """Where a reference solution's function body appears in the tree: as the body of a
    function (any formatting or comments) or verbatim in any text file (``allowed``: the
    solutions published on purpose)."""
    leaks = []
    allowed_files = {p.resolve() for p in allowed}
    for path in sorted(p for p in root.rglob("*") if p.is_file() and p.resolve() not in allowed_files):
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


def instructor_outputs(root: Path, folder: str) -> list[str]:
    """Files in ``root``'s ``folder`` (the course's own: assignments/, rubrics/, copied as
    they are) that an instructor's command wrote, told by their bytes whatever
    their names: an autograder zip (the secret and the solutions), a gradebook or any SQLite
    database, a CSV export, feedback pages, a class report, and an incident's answer key
    (`grader incident --practice p1 --out assignments/lesson6/practice/p1/ --answer
    assignments/lesson6/practice/p1/answer/`: the edition seals the practice answers it
    records). Saved into a lesson's folder (`grader gradescope lesson1 --out
    assignments/lesson1/...`), each would be copied into the learner edition with the
    lesson's files."""
    from grader.instructor.outputs import course_outputs
    return course_outputs((p.relative_to(root).as_posix(), p) for p in
                          sorted(p for p in (root / folder).rglob("*") if p.is_file() and not p.is_symlink()))


def links_out(root: Path, folder: str) -> list[str]:
    """Symbolic links in ``root``'s ``folder`` (the course's own, copied as they are) that
    lead out of it, or nowhere. The copy follows a link: one to the secret under a name
    other than *.secret, or to a folder of the instructor's, shipped what it leads to, which
    neither the names the copy skips nor the bytes of an instructor's output tell. A link
    that stays inside the folder copies what learners get anyway."""
    inside = (root / folder).resolve()
    found = []
    for here, dirs, files in os.walk(root / folder):       # a link to a folder is listed, not entered
        skipped = IGNORED(here, dirs + files)
        dirs[:] = [d for d in dirs if d not in skipped]
        for name in sorted(n for n in dirs + files if n not in skipped):
            path = Path(here) / name
            if not path.is_symlink():
                continue
            target = Path(os.path.realpath(path))
            if not target.exists():
                found.append(f"{path.relative_to(root).as_posix()} leads nowhere")
            elif target != inside and inside not in target.parents:
                found.append(f"{path.relative_to(root).as_posix()} -> {target}")
    return found


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
        if any(out.iterdir()) and not (out / "grader" / MARKER.name).is_file():
            raise InputError(str(out), "is not empty and holds no earlier learner edition")
        theirs = sorted(p.name for p in out.iterdir() if not _edition_writes(p.name))
        if theirs:
            # Replacing the earlier edition removes the whole folder: a .git/ kept there to
            # hand the edition out (its history), or notes of the instructor's, would go with it.
            raise InputError(str(out), f"holds an earlier learner edition and what no edition writes "
                                       f"({first_few(theirs)}), which replacing it would delete: move "
                                       f"{'it' if len(theirs) == 1 else 'them'} out first, then back "
                                       f"once the new edition is in place")


# What an edition holds at its top: the package's folders and the course's (_copy), the
# learner docs, pyproject.toml and the README _build writes; and what installing or testing
# it there leaves beside them: all replaced with the edition. Anything else is someone's own.
PACKAGE_DIRS = ("grader", "reference")
COURSE_DIRS = ("assignments", "rubrics")
EDITION_TOP = (*PACKAGE_DIRS, *COURSE_DIRS, "docs", "pyproject.toml", "README.md")
BYPRODUCTS = ("build", "__pycache__", ".pytest_cache")


def _edition_writes(name: str) -> bool:
    return name in EDITION_TOP or name in BYPRODUCTS or name.endswith(".egg-info")


def _aside(out: Path) -> Path:
    """A new hidden folder beside ``out`` to build the edition in, made as ``out`` would
    be (the umask's permissions, not mkdtemp's owner-only ones)."""
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        build = Path(tempfile.mkdtemp(prefix=f".{out.name}.building-", dir=out.parent))
    except OSError as e:
        raise InputError(str(out), f"cannot write the learner edition: {e.strerror or e}") from None
    umask = os.umask(0o022)
    os.umask(umask)
    build.chmod(0o777 & ~umask)
    return build


def _put_in_place(build: Path, out: Path) -> None:
    """The finished edition becomes ``out``; an earlier one there goes only now."""
    if not out.exists():
        os.rename(build, out)
        return
    old = Path(tempfile.mkdtemp(prefix=f".{out.name}.earlier-", dir=out.parent))
    os.rename(out, old / out.name)
    try:
        os.rename(build, out)
    except OSError:
        os.rename(old / out.name, out)
        old.rmdir()
        raise
    shutil.rmtree(old, ignore_errors=True)


def _not_shipped(directory: str, names: list[str]) -> set[str]:
    """copytree's ignore for the package: what IGNORED skips and what LEFT_OUT names, never
    copied (a build killed before it removed them must not leave the solutions on disk)."""
    here = Path(directory).relative_to(PACKAGE_ROOT)
    return set(IGNORED(directory, names)) | {n for n in names if here / n in LEFT_OUT}


def _copy(out: Path, course: Course) -> None:
    out.mkdir(parents=True, exist_ok=True)
    for sub in PACKAGE_DIRS:
        shutil.copytree(PACKAGE_ROOT / sub, out / sub, ignore=_not_shipped)
    if (PACKAGE_ROOT / "pyproject.toml").is_file():
        shutil.copy2(PACKAGE_ROOT / "pyproject.toml", out / "pyproject.toml")
    for sub in COURSE_DIRS:
        shutil.copytree(course.root / sub, out / sub, ignore=IGNORED, dirs_exist_ok=True)
    pages = [PACKAGE_ROOT / "docs" / name for name in LEARNER_DOCS]
    if any(page.is_file() for page in pages):
        (out / "docs").mkdir(exist_ok=True)
    for page in pages:
        if page.is_file():
            shutil.copy2(page, out / "docs" / page.name)
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
    read: dict[str, set[str]] = {}
    broken = [(name, path) for name, path in _modules(out)
              if missing_imports(out, name, anywhere=False, read=read)]
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
                "matplotlib": "matplotlib", "sqlalchemy": "sqlalchemy", "greenlet": "greenlet"}


def _third_party_imports(out: Path) -> set[str]:
    found = set()
    for _, path in _modules(out):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                found.update(a.name.split(".")[0] for a in node.names)
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                found.add(node.module.split(".")[0])
    return found


# Tables of the course's pyproject that configure what stays with the course: the extras
# (instructor and test dependencies) and the course's own test suite, whose options
# (`-n auto`: pytest-xdist) would stop a learner's plain `pytest` of their own tests.
COURSE_ONLY_TABLES = ("[project.optional-dependencies]", "[tool.pytest.ini_options]")


def _trim_pyproject(out: Path) -> None:
    """The release installs what its own modules import: the dependencies of what was left
    out (the gradebook's SQLAlchemy) and the instructor extras (nbgrader, dask, postgres,
    test) go, and so do the test suite's options and the data of packages left out (the
    Gradescope image's scripts). The course's pyproject is ours, so its layout is known:
    one dependency per line, one package's data per line, the extras in their own table."""
    path = out / "pyproject.toml"
    if not path.is_file():
        return
    used = _third_party_imports(out)
    lines, kept, in_deps, skipping = path.read_text(encoding="utf-8").splitlines(), [], False, False
    table = ""
    for line in lines:
        stripped = line.strip()
        if stripped.startswith("["):
            table = stripped
            skipping = table in COURSE_ONLY_TABLES
        if skipping:
            continue
        if table == "[tool.setuptools.package-data]" and stripped.startswith('"'):
            package = stripped.split('"')[1]
            if package != "*" and not out.joinpath(*package.split(".")).is_dir():
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
    path.write_text("\n".join(kept).rstrip() + "\n", encoding="utf-8")


def _published(out: Path, lessons: tuple[str, ...]) -> None:
    """Copy the reference solutions an instructor chose to publish (their deadlines passed)."""
    if not lessons:
        return
    target = out / SOLUTIONS
    target.mkdir(parents=True, exist_ok=True)
    shutil.copy2(PACKAGE_ROOT / SOLUTIONS / "__init__.py", target / "__init__.py")
    for lesson in lessons:
        source = PACKAGE_ROOT / SOLUTIONS / f"{lesson}.py"
        if source.is_file():
            shutil.copy2(source, target / source.name)
        elif (PACKAGE_ROOT / SOLUTIONS / lesson).is_dir():
            shutil.copytree(PACKAGE_ROOT / SOLUTIONS / lesson, target / lesson, ignore=IGNORED)
        else:
            raise InputError("--publish-solutions", f"{lesson} has no reference solution to publish")


def record_expectations(course: Course, lesson: str) -> dict[str, dict]:
    """Every answer, figure and public case the lesson's checks ask of the reference, as
    they grade the course's known submissions (the reference, the stub, every wrong one):
    {namespace: {key: value}}, what the learner edition answers from."""
    from grader.engine.oracle import recording
    from grader.engine.pipeline import grade_path
    from grader.instructor.templates import templates
    from grader.lessons import lesson_module
    with tempfile.TemporaryDirectory(prefix="grader-release-templates-") as tmp, recording() as answers:
        for path in templates(PACKAGE_ROOT, lesson, Path(tmp)).values():
            try:
                grade_path(lesson, path, course, mode="check")
            except InputError:
                continue            # a test submission that is unreadable on purpose
        more = getattr(lesson_module(lesson), "record_more", None)
        if more is not None:
            more(course)            # what a learner may hand in beyond the known submissions
    return answers


def record_experiments(course: Course, lessons: tuple[str, ...]) -> dict[str, dict]:
    """The reference's rows of every experiment about one of ``lessons``, at its default
    settings: what the edition shows beside a learner's own (grader.course.experiments.plugged)."""
    from grader.course import experiments
    from grader.engine.oracle import recording
    with recording() as answers:
        experiments.record(course, lessons)
    return answers


# Runs a command in the release as a fresh install would: the course's own editable
# install (a meta-path finder that maps `reference` to the course) must not answer imports
# the release does not hold, or the check would pass on the course's solutions.
# An editable install of the course (pip install -e) puts a finder on sys.meta_path that
# would import the course's own modules, its reference solutions among them, into a release.
UNEDITABLE = """
import sys
sys.meta_path[:] = [f for f in sys.meta_path if "editable" not in repr(f).lower()]
"""
ISOLATED = UNEDITABLE + """
import runpy
sys.argv[0] = "grader"
runpy.run_module(sys.argv.pop(1), run_name="__main__", alter_sys=True)
"""


def install_env(out: Path) -> dict[str, str]:
    """The environment a fresh install of the release runs in: no PYTHON* variable but
    the PYTHONPATH that finds it."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTHON")}
    env["PYTHONPATH"] = str(out)
    return env


def run_in_release(out: Path, module: str, *args: str, cwd: Path | None = None):
    """``python -m module args`` inside the release (as a fresh install of it would run)."""
    env = install_env(out)
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    return subprocess.run([sys.executable, "-c", ISOLATED, module, *args], cwd=cwd or out,
                          env=env, capture_output=True, text=True, timeout=600)


def _verify(out: Path, lessons: tuple[str, ...]) -> None:
    """Run `grader check` inside the release on each released lesson's reference solution,
    from a folder outside the release: it must get full marks."""
    from grader.instructor.templates import templates
    with tempfile.TemporaryDirectory(prefix="grader-release-check-") as tmp:
        for lesson in lessons:
            source = templates(PACKAGE_ROOT, lesson, Path(tmp))["reference"]
            ref = Path(tmp) / f"{lesson}_reference{source.suffix}"
            (shutil.copytree if source.is_dir() else shutil.copy2)(source, ref)
            p = run_in_release(out, "grader.cli", "check", lesson, "--submission", str(ref), "--json")
            try:
                report = json.loads(p.stdout)
            except ValueError:
                report = None
            if p.returncode != 0 or report is None or report["score"] != report["max_score"]:
                detail = (p.stderr.strip().splitlines() or ["no output"])[-1]
                raise ReleaseError(str(out), f"`grader check {lesson}` in the release does not "
                                             f"give the reference full marks: {detail}")


def _prove(out: Path, course: Course, lessons: tuple[str, ...]) -> list[str]:
    """Every shipped callable that could be handed in for a graded function earns at most
    half of its lesson on hidden cases (grader.instructor.equivalence)."""
    from grader.instructor.equivalence import prove
    shipped = [name for name, _ in _modules(out) if not name.startswith("reference.solutions")]
    verdicts = prove(out, shipped, course, lessons)
    failed = [v.line() for v in verdicts if not v.passed]
    if failed:
        raise ReleaseError(str(out), "the learner edition holds callables that earn more than half "
                                     "of a lesson when handed in: " + "; ".join(failed[:3]))
    return [v.line() for v in verdicts]


def _prove_lesson_files(out: Path, lessons: tuple[str, ...]) -> list[str]:
    """Every code file the edition's assignments/ holds (each lesson's stub, and whatever
    else was saved there: a solution drafted beside the stub, a worked answer, a stub filled
    in and never restored) earns at most half of its lesson handed in as it stands, by
    `grader check` inside the edition. _prove covers the package's modules only, so such a
    file shipped with a build that called itself proven. A file in a lesson's folder is
    checked for that lesson; one elsewhere in assignments/, for every lesson of the
    edition. Checked, not graded: the file is run in the sandbox as a learner's would be,
    on public cases, with no secret."""
    from grader.engine.code_file import code_suffix
    from grader.engine.pipeline import folder_files
    from grader.instructor.equivalence import SHARE
    code_lessons = [lesson for lesson in lessons if folder_files(lesson) is None]
    found, lines = [], []
    for path in sorted(p for p in (out / "assignments").rglob("*") if p.is_file() and code_suffix(p)):
        rel = path.relative_to(out)
        own = rel.parts[1] if len(rel.parts) > 2 and rel.parts[1] in lessons else None
        for lesson in ([own] if own in code_lessons else [] if own else code_lessons):
            p = run_in_release(out, "grader.cli", "check", lesson, "--submission", str(path), "--json")
            try:
                report = json.loads(p.stdout)
                score, max_score = float(report["score"]), float(report["max_score"])
            except (ValueError, KeyError, TypeError):
                continue                 # not even checked (unreadable, not code): earns nothing
            line = f"{lesson}: {rel.as_posix()} as it stands earns {score:g} of {max_score:g} (public cases)"
            lines.append(line)
            if score > SHARE * max_score + 1e-9:
                found.append(line)
    if found:
        raise ReleaseError(str(out), "the course's assignments/ holds code that earns more than half of "
                           "a lesson handed in as it stands: " + "; ".join(found[:3]) + "; move a "
                           "solution out of the course's folders, or restore the lesson's stub")
    return lines


def _readme(lessons: tuple[str, ...], published: tuple[str, ...]) -> str:
    listed = "\n".join(f"- `{lesson}`: `assignments/{lesson}/`" for lesson in lessons)
    shown = (f"Your instructor published the reference solutions of {', '.join(published)}: "
             "they are in `reference/solutions/`.\n" if published else "")
    # Only what this edition holds: an edition of lessons 1 and 2 told its learners of lesson
    # 6's folder, and not that a design sheet's own workload (lesson 5's) is not here.
    folder = (" (lesson 6: the\ntwo files of `assignments/lesson6/submission/`)" if "lesson6" in lessons
              else "")
    workload = ("" if "lesson5" in lessons else
                "\nThis edition holds no lesson 5, whose workload a design sheet names: give\n"
                "`grader sheet run` a `--workload` of a lesson it holds\n"
                "(`assignments/lessonN/public/*.scenario.yaml`).\n")
    return textwrap.dedent("""\
        # Serving under pressure: from admission to release (learner edition)

        ```sh
        python3 -m venv .venv && . .venv/bin/activate     # Python 3.11 or newer
        pip install -e . && grader check lesson1           # grades assignments/lesson1/exercise.py
        ```

        Lessons in this edition:

        {listed}

        Read a lesson's README, implement the functions of its `exercise.py`{folder},
        and run `grader check lessonN`: the public cases, a table of criteria with
        points, and one line of feedback per criterion that lost points. Your instructor
        grades on hidden cases of the same kinds as well, so fitting the public numbers
        by hand earns nothing.

        Also here: the worker itself (`reference/`), the experiments with your own
        functions plugged in (`grader experiment --help`), and the design sheet
        (`grader sheet validate`, `grader sheet run`). Runs of one lesson's functions use
        the course's baselines for the other decisions (`reference/baselines.py`): naive,
        safe policies, not the answers. The reference's figures for the public cases were
        recorded when this edition was built (`grader/expectations/`).
        {workload}
        More to read in `docs/`: `learners.md` (every command, and how to read what it
        prints), `worker.md` (what the worker does with your answers) and `experiments.md`
        (what each experiment shows).
        {shown}
        > The service-cost model is synthetic: a teaching model, not a measurement of any
        > engine or GPU.
        """).replace("{listed}", listed).replace("{shown}", shown).replace("{folder}", folder).replace(
        "{workload}", workload)


def build_learner_edition(course: Course, out: Path, *, lessons: tuple[str, ...] | None = None,
                          publish: tuple[str, ...] = (), verify: bool = True,
                          say=lambda step: None) -> EditionManifest:
    """The learner edition of ``lessons`` (default: every lesson with a rubric) in ``out``,
    with the reference solutions of ``publish`` (lessons whose deadline passed). ``say``
    hears each step as it starts: a build takes a minute or two."""
    known = tuple(course.lessons())
    chosen = tuple(known if lessons is None else lessons)
    for lesson in (*chosen, *publish):
        if lesson not in known:
            raise InputError(lesson, f"no such lesson (known: {', '.join(known)})"
                                     f"{did_you_mean(lesson, list(known))}")
    # Refused before anything is written: an edition of no lesson (`--lessons ,`, or a
    # variable that was empty) takes minutes to build and teaches nothing, and a solution
    # published for a lesson the edition leaves out is a typo for one it holds.
    if not chosen:
        raise InputError("--lessons", f"no lesson given (known: {', '.join(known)})")
    for lesson in publish:
        if lesson not in chosen:
            raise InputError("--publish-solutions", f"{lesson} is not a lesson of this edition "
                                                    f"(--lessons {','.join(chosen)})")
    links = [link for sub in COURSE_DIRS for link in links_out(course.root, sub)]
    if links:
        raise InputError(str(course.root), "the course's folders hold symbolic links that lead out of "
                         "them, and the edition would ship what each leads to: " + "; ".join(links[:5])
                         + "; copy into the folder what learners need, or remove the link")
    _prepare(out, course)
    final = out.resolve()
    # Built beside it and put in place once proven: a build that fails its proof (a leak),
    # is interrupted or fills the disk leaves no half-made edition there, and an earlier
    # edition is replaced only by one that is whole.
    build = _aside(final)
    try:
        manifest = _build(course, build, known, chosen, tuple(publish), verify, say)
        _put_in_place(build, final)
    except BaseException as e:
        shutil.rmtree(build, ignore_errors=True)
        kept = ("an earlier edition there is left as it was"
                if final.is_dir() and any(final.iterdir()) else "nothing is written there")
        if isinstance(e, InputError) and e.where == str(build):
            raise type(e)(str(final), f"{e.message}; {kept}") from None
        if isinstance(e, OSError):
            raise InputError(str(final), f"cannot write the learner edition: "
                                         f"{e.strerror or e}; {kept}") from None
        raise
    return EditionManifest(**{**manifest.__dict__, "out": str(final)})


def _build(course: Course, out: Path, known: tuple[str, ...], chosen: tuple[str, ...],
           publish: tuple[str, ...], verify: bool, say) -> EditionManifest:
    """The edition, written into ``out`` (a new empty folder) and proven there."""
    _copy(out, course)          # a second or two: said with the next step, not before it
    outputs = [o for sub in ("assignments", "rubrics") for o in instructor_outputs(out, sub)]
    if outputs:
        raise ReleaseError(str(out), "the course's folders hold what an instructor's command wrote, "
                           "which would ship to every learner: " + "; ".join(outputs[:5])
                           + "; move them out of the course's folders")
    _published(out, tuple(publish))

    left_out = {lesson: "not chosen for this edition (grader release --lessons)"
                for lesson in known if lesson not in chosen}
    for lesson in left_out:
        _drop_lesson(out, lesson)
    recorded, expectations = {}, {}
    for n, lesson in enumerate(chosen, 1):
        say(f"recording what {lesson}'s public checks ask of the reference ({n} of {len(chosen)})")
        answers = record_expectations(course, lesson)
        for namespace, table in answers.items():
            recorded.setdefault(namespace, {}).update(table)
        expectations[lesson] = sum(len(t) for t in answers.values())
    say("recording the reference's rows of the experiments")
    experiments = record_experiments(course, chosen)
    for namespace, table in experiments.items():
        recorded.setdefault(namespace, {}).update(table)
    from grader.engine.oracle import write_expectations
    write_expectations(out / "grader" / "expectations", recorded)

    _drop_unneeded_lesson_parts(out)
    pruned = _prune(out)
    _trim_pyproject(out)
    (out / "README.md").write_text(_readme(chosen, tuple(publish)), encoding="utf-8")
    manifest = EditionManifest(out=str(out), lessons=chosen, left_out=left_out,
                               expectations=expectations, pruned=tuple(pruned),
                               experiments=tuple(sorted(n.removeprefix("figures-experiment-")
                                                        for n in experiments)),
                               published=tuple(publish))
    (out / "grader" / MARKER.name).write_text(json.dumps(manifest.to_dict(), indent=2, sort_keys=True)
                                              + "\n", encoding="utf-8")

    say("proving it: no reference solution's text in any file")
    leaks = find_leaks(out, solution_fingerprints(PACKAGE_ROOT / SOLUTIONS),
                       allowed=tuple(out / SOLUTIONS / f"{p}.py" for p in publish))
    if leaks:
        raise ReleaseError(str(out), "reference solution text in the learner edition: "
                           + "; ".join(leaks[:5]))
    proof: list[str] = []
    if verify:
        say("proving it: grader check inside the edition gives the reference full marks")
        _verify(out, manifest.lessons)
        say("proving it: no callable it ships earns more than half of a lesson as it stands")
        proof = _prove(out, course, manifest.lessons)
        say("proving it: no lesson file earns more than half of its lesson as it stands")
        proof += _prove_lesson_files(out, manifest.lessons)
    files = sum(1 for p in out.rglob("*") if p.is_file())
    return EditionManifest(**{**manifest.__dict__, "files": files, "proof": tuple(proof)})
