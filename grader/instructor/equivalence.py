"""The learner edition's proof that it holds no answer in disguise.

A text search (grader.instructor.release.find_leaks) finds a reference solution copied
into the edition; it cannot find a baseline or a helper that *behaves* like an answer. So
every callable the edition ships that could be handed in for a graded function, because it
has that function's name or its parameters, is graded as that function, on hidden cases
drawn from a fresh secret, alone and together with the other such callables of its lesson;
none may earn more than half of the lesson's points.

The callables are course code (the edition's modules are the course's, less what is left
out), so they are called in this process through a stand-in for the sandbox: nothing of a
learner runs here. Module-level functions and static or class methods count; a method that
needs an instance, or a function nested in another (a closure over a core), cannot be
handed in as it stands.
"""
from __future__ import annotations

import ast
import secrets
from dataclasses import dataclass
from importlib import import_module
from importlib.util import module_from_spec, spec_from_file_location
from pathlib import Path
from typing import Callable

from grader.engine.sandbox.child import encode
from grader.engine.sandbox.session import CallResult
from grader.engine.submission import Submission

SHARE = 0.5              # the most of a lesson's points a shipped callable may earn


@dataclass(frozen=True)
class Graded:
    """One graded function of a lesson: its name and its positional parameters."""
    lesson: str
    name: str
    params: tuple               # ((name, annotation or None), ...)


@dataclass(frozen=True)
class Candidate:
    module: str
    qualname: str
    graded: Graded              # the graded function it could stand for
    why: str                    # "name" or "parameters"


@dataclass(frozen=True)
class Verdict:
    lesson: str
    handed_in: tuple[str, ...]  # "module:qualname as function"
    score: float
    max_score: float

    @property
    def passed(self) -> bool:
        return self.score <= SHARE * self.max_score + 1e-9

    def line(self) -> str:
        return f"{self.lesson}: {', '.join(self.handed_in)} earns {self.score:g} of {self.max_score:g}"


def _params(fn: ast.FunctionDef | ast.AsyncFunctionDef, skip_first: bool = False) -> tuple:
    """Positional parameters as (name, annotation text or None)."""
    args = fn.args.posonlyargs + fn.args.args
    return tuple((a.arg, ast.unparse(a.annotation) if a.annotation else None)
                 for a in (args[1:] if skip_first else args))


def _same_signature(candidate: tuple, graded: tuple) -> bool:
    """Same parameter names, and no annotation that says another type."""
    return (len(candidate) == len(graded)
            and all(n == g and (a is None or b is None or a == b)
                    for (n, a), (g, b) in zip(candidate, graded)))


def graded_functions(assignments: Path, lessons) -> list[Graded]:
    """The functions each lesson's exercise stub asks for (a lesson graded on data has none)."""
    out = []
    for lesson in lessons:
        stub = assignments / lesson / "exercise.py"
        if not stub.is_file():
            continue
        for node in ast.parse(stub.read_text(encoding="utf-8")).body:
            if isinstance(node, ast.FunctionDef) and not node.name.startswith("_"):
                out.append(Graded(lesson, node.name, _params(node)))
    return out


def candidates(root: Path, modules, graded: list[Graded]) -> list[Candidate]:
    """Callables of ``modules`` (dotted names of files under ``root``) that match a graded
    function by name or by positional parameters."""
    found = []
    for module in modules:
        tree = ast.parse(_module_file(root, module).read_text(encoding="utf-8"))
        defs = [(n.name, _params(n)) for n in tree.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))]
        for cls in (n for n in tree.body if isinstance(n, ast.ClassDef)):
            for m in cls.body:
                if isinstance(m, ast.FunctionDef):
                    kinds = {d.id for d in m.decorator_list if isinstance(d, ast.Name)}
                    if "staticmethod" in kinds:
                        defs.append((f"{cls.name}.{m.name}", _params(m)))
                    elif "classmethod" in kinds:
                        defs.append((f"{cls.name}.{m.name}", _params(m, skip_first=True)))
        for qualname, params in defs:
            short = qualname.rsplit(".", 1)[-1]
            for g in graded:
                if short == g.name:
                    found.append(Candidate(module, qualname, g, "name"))
                elif _same_signature(params, g.params):
                    found.append(Candidate(module, qualname, g, "parameters"))
    return found


def _module_file(root: Path, module: str) -> Path:
    path = root.joinpath(*module.split(".")).with_suffix(".py")
    return path if path.is_file() else root.joinpath(*module.split("."), "__init__.py")


def _resolve(root: Path, c: Candidate) -> Callable:
    """The callable as the edition's file defines it: the course's own module when the
    edition's file is a copy of it (a module of checks cannot load twice), else that file."""
    path = _module_file(root, c.module)
    try:
        obj = import_module(c.module)
        same = Path(obj.__file__).read_bytes() == path.read_bytes()
    except (ImportError, OSError, TypeError):
        same = False
    if not same:
        spec = spec_from_file_location(f"_edition_proof.{c.module}", path)
        obj = module_from_spec(spec)
        spec.loader.exec_module(obj)
    for part in c.qualname.split("."):
        obj = getattr(obj, part)
    return obj


class InProcess:
    """The sandbox's interface over trusted course functions: answers come back as the
    child would send them (plain JSON), so the checks validate them as they always do."""

    isolation = "none: course code, graded in the grader's process (the edition's self-proof)"
    load_error = None
    confined, lacks = True, ""      # nothing of a learner's runs here: there is nothing to confine

    def __init__(self, functions: dict[str, Callable]):
        self.functions = functions

    def call(self, fname: str, *args) -> CallResult:
        return self.call_many(fname, [args])[0]

    def call_each(self, calls) -> list[CallResult]:
        return [self.call(fname, *args) for fname, args in calls]

    def call_many(self, fname: str, arg_tuples) -> list[CallResult]:
        fn = self.functions.get(fname)
        out = []
        for args in arg_tuples:
            if fn is None:
                out.append(CallResult("missing", detail=f"{fname} is not defined"))
                continue
            try:
                out.append(CallResult("ok", encode(fn(*args))))
            except Exception as e:      # a callable that is no answer fails like one
                out.append(CallResult("raised", detail=f"{type(e).__name__}: {e}"))
        return out

    def restart(self) -> None:
        """The child's restart gives a fresh process; course code keeps no state to lose."""

    def close(self) -> None:
        pass

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        pass


def _grade(lesson: str, functions: dict[str, Callable], course, secret: bytes) -> tuple[float, float]:
    from grader.engine.pipeline import grade_submission
    sub = Submission(path=f"<{lesson} self-proof>", source="", digest="", notes=())
    report = grade_submission(lesson, sub, course, mode="grade", secret=secret,
                              sandbox=lambda: InProcess(functions))
    return report.score, report.max_score


def prove(root: Path, modules, course, lessons) -> list[Verdict]:
    """Grade every candidate alone, then each lesson's candidates together (one per function,
    the one that earned most alone); a fresh secret draws the hidden cases."""
    secret = secrets.token_bytes(32)
    graded = graded_functions(course.root / "assignments", lessons)
    verdicts = []
    best: dict[tuple[str, str], tuple[float, Candidate]] = {}
    for c in candidates(root, modules, graded):
        score, top = _grade(c.graded.lesson, {c.graded.name: _resolve(root, c)}, course, secret)
        label = f"{c.module}:{c.qualname} as {c.graded.name}"
        verdicts.append(Verdict(c.graded.lesson, (label,), score, top))
        slot = (c.graded.lesson, c.graded.name)
        if slot not in best or score > best[slot][0]:
            best[slot] = (score, c)
    for lesson in sorted({lesson for lesson, _ in best}):
        chosen = [c for (l, _), (_, c) in sorted(best.items()) if l == lesson]
        if len(chosen) > 1:
            score, top = _grade(lesson, {c.graded.name: _resolve(root, c) for c in chosen}, course, secret)
            verdicts.append(Verdict(lesson, tuple(f"{c.module}:{c.qualname} as {c.graded.name}"
                                                  for c in chosen), score, top))
    return verdicts
