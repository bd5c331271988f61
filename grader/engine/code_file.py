"""Which file is a learner's code submission: one rule for a class folder, a file named on
the command line and a Gradescope upload, so a file graded in one is graded in the others.

- A code file is a ``.py`` file or a ``.ipynb`` notebook, its suffix in any case: a
  Windows machine's ``alice.PY`` is Python, and ``.IPYNB`` a notebook. Anything else is not
  a submission.
- Among several code files, the one that defines most of the functions the lesson's stub
  declares is graded (a function still as the stub left it, raising NotImplementedError,
  is not defined); a file named ``exercise.*`` or ``lessonN.*`` wins a tie (a tie at
  none too: that file is the submission by its name, and its report says what it lacks).
  Otherwise (a tie, or none defining any and none so named) no file is chosen, and the
  learner keeps one. Files are parsed to count, never run.

Where the candidates are listed is the caller's: a class folder's files, a Gradescope
upload's files (with its subfolders, as a repository is uploaded).
"""
from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path

from grader.engine.text import first_few

CODE_SUFFIXES = (".py", ".ipynb")


def code_suffix(path: Path | str) -> str | None:
    """``.py`` or ``.ipynb`` for a code file (its suffix in any case), else None."""
    suffix = Path(path).suffix.lower()
    return suffix if suffix in CODE_SUFFIXES else None


def lesson_functions(stub: Path) -> tuple[str, ...]:
    """The top-level functions a lesson's exercise stub declares. A stub missing from the
    course (or not Python) is one line naming it: a class cannot be graded without it,
    since it tells a student's several files apart."""
    from grader.engine.errors import InputError
    try:
        tree = ast.parse(stub.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise InputError(str(stub), "the lesson's stub is missing from the course: it names the "
                                    "functions by which a student's files are told apart") from None
    except (OSError, UnicodeDecodeError, SyntaxError, ValueError) as e:
        raise InputError(str(stub), f"the lesson's stub cannot be read as Python: {e}") from None
    return tuple(n.name for n in tree.body if isinstance(n, ast.FunctionDef))


def _defined(path: Path) -> set[str]:
    """Top-level function names of a code file (a notebook's code cells), parsed, not run;
    none for a file that cannot be read or parsed."""
    from grader.engine.errors import InputError
    from grader.engine.submission import load_submission
    try:
        tree = ast.parse(load_submission(path).source)
    except (InputError, SyntaxError, ValueError, RecursionError, MemoryError):
        return set()
    return {n.name for n in tree.body
            if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) and not _left_as_stub(n)}


def _left_as_stub(function: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
    """A function whose body is still the stub's (a docstring, then ``raise
    NotImplementedError`` or a bare ``pass`` / ``...``) is declared, not written: counted as
    defined, the untouched stub kept beside a learner's own file (an upload of their whole
    folder) won by its name, and the file that held their work was passed over."""
    body = function.body
    if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant) \
            and isinstance(body[0].value.value, str):
        body = body[1:]                                  # the docstring
    if len(body) != 1:
        return not body
    [statement] = body
    if isinstance(statement, ast.Pass):
        return True
    if isinstance(statement, ast.Expr) and isinstance(statement.value, ast.Constant):
        return statement.value.value is Ellipsis
    if isinstance(statement, ast.Raise) and statement.exc is not None:
        raised = statement.exc.func if isinstance(statement.exc, ast.Call) else statement.exc
        return isinstance(raised, ast.Name) and raised.id == "NotImplementedError"
    return False


@dataclass(frozen=True)
class Choice:
    """The file to grade among ``candidates`` (as the caller listed them), or why none."""
    file: Path | None
    passed_over: tuple[Path, ...] = ()     # the other code files, not graded
    problem: str = ""                      # why none was chosen, naming the files

    @property
    def note(self) -> str:
        """For the report: which file was graded, when there was a choice."""
        if self.file is None or not self.passed_over:
            return ""
        others = first_few([p.as_posix() for p in self.passed_over])
        return (f"graded {self.file.as_posix()}, the file that defines the lesson's functions; "
                f"not graded: {others}")


def choose(folder: Path, files: list[Path], lesson: str, functions: tuple[str, ...]) -> Choice:
    """The code file to grade among ``files`` (paths relative to ``folder``)."""
    candidates = sorted(f for f in files if code_suffix(f))
    if not candidates:
        return Choice(None, problem="no .py or .ipynb file")
    if len(candidates) == 1:
        return Choice(candidates[0])

    rank = {f: (len(_defined(folder / f) & set(functions)),
                f.stem.lower() in ("exercise", lesson.lower())) for f in candidates}
    ranked = sorted(candidates, key=rank.__getitem__, reverse=True)   # stable: ties in name order
    best = rank[ranked[0]]
    if best == (0, False) or rank[ranked[1]] == best:
        names = first_few([p.as_posix() for p in candidates], 8)
        which = "none defines any" if best[0] == 0 else "more than one defines the most"
        # Tied files named as a submission already (exercise.py and lesson1.py): renaming
        # one would change nothing.
        way = "keep one" if best[1] else "keep one, or name it exercise.py"
        return Choice(None, problem=f"several submission files ({names}), and {which} of the "
                                    f"lesson's functions ({', '.join(functions)}); {way}")
    return Choice(ranked[0], tuple(ranked[1:]))
