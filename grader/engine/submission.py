"""A learner's submission: a .py file, a notebook flattened to its code cells, or (lesson 6)
a folder of YAML files, read as bytes and never run."""
from __future__ import annotations

import codecs
import hashlib
import json
import os
import re
import unicodedata
from dataclasses import dataclass
from pathlib import Path

from grader.engine.code_file import code_suffix
from grader.engine.errors import InputError
from grader.engine.files import Unreadable, read_regular

MAX_BYTES = 1 << 20   # a submission is a few functions; a megabyte is already suspicious
# Where a statement starts, IPython's own syntax, never Python: a magic or a shell escape, an
# assignment from one (files = !ls, t = %timeit -o f()), and a help request (pages_for?,
# ?pages_for, model.layers??). Graded as Python, the last two were a SyntaxError that failed
# the whole notebook.
_MAGIC = re.compile(r"^\s*(%|!|[\w.]+(\s*,\s*[\w.]+)*\s*=\s*[%!])")
_HELP = re.compile(r"^\s*(\?{1,2}[\w.*]+|[\w.*]+\?{1,2})\s*$")
# A cell magic: IPython reads one only on a cell's first line that is not blank, and hands it
# the rest of the cell. These few run that body as the kernel's Python (a cell of
# definitions under %%time defines them); every other one (%%bash, %%writefile, %%html,
# %%python3 in a subprocess) does not, so its body is not the learner's code.
_CELL_MAGIC = re.compile(r"^%%(\w+)")
PYTHON_BODY = frozenset({"time", "timeit", "capture", "prun"})


@dataclass(frozen=True)
class Submission:
    path: str
    source: str
    digest: str                  # sha256 of the exact bytes graded
    notes: tuple[str, ...] = ()  # what the loader changed, for the report
    files: tuple[tuple[str, bytes], ...] = ()   # a folder submission: (name, bytes), sorted by name
    student: str = ""            # who handed it in, when known (lesson 6 draws their incident)
    # A notebook's code cells in ``source``: (the line its code starts on, its number in the
    # notebook), so feedback names a line as the learner sees it (cell 3, line 2).
    cells: tuple[tuple[int, int], ...] = ()


def is_submission_folder(path: Path, names: tuple[str, ...]) -> bool:
    """A folder that is one submission (it holds one of the lesson's files), not a class."""
    return path.is_dir() and any((path / n).exists() or (path / n).is_symlink() for n in names)


_LESSON_FOLDER = re.compile(r"lesson[0-9]+")     # nbgrader's <student>/<lessonN>/


def _student_of(path: Path) -> str:
    """A folder's student: its name, or its parent's in nbgrader's <student>/<lessonN>/ layout,
    as the path names it (a class's discovery names them so too): a symbolic link is not
    followed to another name, which would draw another student's incident. `.` and `..`
    are the folders they stand for."""
    path = Path(os.path.abspath(path))
    return path.parent.name if _LESSON_FOLDER.fullmatch(path.name) else path.name


def is_own_file_name(stem: str) -> bool:
    """exercise.py, lesson3.ipynb: the name a submission's file has inside its student's
    folder (the stub's, nbgrader's), never a student's own name."""
    return stem == "exercise" or _LESSON_FOLDER.fullmatch(stem) is not None


def student_named(path: Path, folder: bool) -> str:
    """Who a submission named on the command line is, as a class's discovery would name
    them: a folder's student (its name, or its parent's in nbgrader's layout), else the file's
    name without its suffix, unless that is a submission's own name (exercise.py in
    nbgrader's <student>/<lessonN>/), whose student is its folder's; in Unicode NFC."""
    if folder:
        name = _student_of(path)
    else:
        path = Path(os.path.abspath(path))
        name = _student_of(path.parent) if is_own_file_name(path.stem) else path.stem
    return unicodedata.normalize("NFC", name)


def load_folder(path: Path, names: tuple[str, ...], student: str = "") -> Submission:
    """The lesson's files in a folder, as bytes, under the rules of a code file: each is read
    up to MAX_BYTES + 1 (the lesson reports a file too large), only if it is a regular file
    with one name (no symbolic or hard link, FIFO or device), and other files are left alone."""
    where = str(path)
    if not path.is_dir():
        # Nothing there reads otherwise than a file where a folder was wanted: a mistyped
        # path was told it should be a folder, and looked right.
        what = "is a file; " if path.exists() else "no such folder: "
        raise InputError(where, f"{what}a submission for this lesson is a folder holding "
                                f"{' and '.join(names)}")
    files, notes = [], []
    for name in sorted(names):
        try:
            files.append((name, read_regular(path / name, MAX_BYTES, single_name=True,
                                             follow_links=False)))
        except FileNotFoundError:
            continue
        except Unreadable as e:
            notes.append(f"{name} {e}")
    if not files and not notes:
        raise InputError(where, f"the folder holds neither {' nor '.join(names)}")
    others = sorted(p.name for p in path.iterdir() if p.name not in names and not p.name.startswith("."))
    if others:
        notes.append(f"not graded: {', '.join(others[:10])}{' ...' if len(others) > 10 else ''}")
    h = hashlib.sha256()
    for name, data in files:
        h.update(f"{name}\0{len(data)}\0".encode())
        h.update(data)
    return Submission(where, "", h.hexdigest(), tuple(notes), tuple(files), student or _student_of(path))


def load_submission(path: Path, folder: tuple[str, ...] | None = None, student: str = "",
                    links_within: Path | None = None) -> Submission:
    """``folder``: the files of a lesson whose submission is a folder (None: a code file).

    A code file given as a symbolic link is refused unread, unless ``links_within`` (a
    class folder) holds what it leads to: a link named on the command line could lead
    anywhere the grader may read (a reference solution, the secret), and its text would
    be graded and quoted back."""
    if folder is not None:
        return load_folder(path, folder, student)
    where = str(path)
    if path.is_dir():
        raise InputError(where, "is a folder; give the exercise file (.py or .ipynb)")
    linked = path.is_symlink()
    if linked and (links_within is None or Path(links_within).resolve() not in path.resolve().parents):
        raise InputError(where, "is a symbolic link: not read; hand in the file itself"
                         + ("" if links_within is None else " (it leads outside the class folder)"))
    try:
        # A huge file is refused unread; a link is followed only where it was allowed above.
        raw = read_regular(path, MAX_BYTES, single_name=True, follow_links=linked)
    except FileNotFoundError:
        raise InputError(where, "no such submission file") from None
    except Unreadable as e:
        raise InputError(where, f"cannot read the submission: {e.strerror}" if e.strerror
                         else str(e)) from None
    if len(raw) > MAX_BYTES:
        # A notebook's saved outputs (a plot, a long printout) count: the fix is to clear them.
        outputs = ("; a notebook's saved outputs count: clear them (Jupyter: Edit > Clear Outputs "
                   "of All Cells), save, and hand it in again") if code_suffix(path) == ".ipynb" else ""
        raise InputError(where, f"submission is larger than {MAX_BYTES} bytes, the limit{outputs}")
    if b"\x00" in raw:
        raise InputError(where, "is a binary file, not Python source or a notebook")
    try:
        # utf-8-sig: an editor's byte-order mark is not part of the text (Python ignores it
        # in a .py file; a notebook's JSON would not parse with it).
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        bom = 3 if raw.startswith(codecs.BOM_UTF8) else 0      # the decoder counts after it
        raise InputError(where, f"is not UTF-8 text (byte {e.start + bom})") from None
    digest = hashlib.sha256(raw).hexdigest()
    kind = code_suffix(path)
    if kind == ".ipynb":
        source, notes, cells = _notebook_source(text, where)
        return Submission(where, source, digest, notes, student=student, cells=cells)
    if kind is None:
        raise InputError(where, "a submission is a .py file or a .ipynb notebook")
    if not text.strip():
        raise InputError(where, "the submission is empty")
    return Submission(where, text, digest, student=student)


def _notebook_source(text: str, where: str) -> tuple[str, tuple[str, ...], tuple[tuple[int, int], ...]]:
    """Code cells in order; IPython magics and shell escapes dropped, with a note each; and
    where each cell's code starts in that source (Submission.cells)."""
    try:
        nb = json.loads(text)
    except json.JSONDecodeError as e:       # a truncated or hand-edited file: say where it breaks
        raise InputError(where, f"not a readable Jupyter notebook: its JSON breaks at line {e.lineno}, "
                                f"column {e.colno} ({e.msg})") from None
    except (ValueError, RecursionError):    # RecursionError: nested too deep
        raise InputError(where, "cells: not a readable Jupyter notebook") from None
    cells = nb.get("cells") if isinstance(nb, dict) else None
    if not isinstance(cells, list):
        raise InputError(where, "cells: not a readable Jupyter notebook")
    parts, notes, starts = [], [], []
    header = 1                           # the line the next part's header is on
    for n, cell in enumerate(cells):
        if not isinstance(cell, dict) or cell.get("cell_type") != "code":
            continue
        src = cell.get("source", "")
        if isinstance(src, list) and all(isinstance(s, str) for s in src):
            src = "".join(src)
        if not isinstance(src, str):
            raise InputError(where, f"cells[{n}].source: expected text or a list of strings, "
                                    f"got {type(src).__name__}")
        lines = src.splitlines()
        kept, code = [], _Statements()
        first = next((line for line in lines if line.strip()), "")
        magic = _CELL_MAGIC.match(first.lstrip())
        if magic and magic.group(1) not in PYTHON_BODY:
            notes.append(f"cell {n + 1}: dropped the whole cell, {first.strip()[:60]!r}: a cell magic's "
                         f"body is not run as the notebook's Python")
            kept, lines = [""] * len(lines), []      # the cell's line numbers stay as they were
        for line in lines:
            # Only where a statement starts: '%' or '!' opening a bracket's continuation line
            # or a line of a triple-quoted string is Python, as IPython reads it too.
            what = _ipython(line) if code.at_start() else ""
            if what:
                notes.append(f"cell {n + 1}: dropped {line.strip()[:60]!r} ({what})")
                kept.append("")          # keep line numbers stable within the cell
            else:
                code.read(line)
                kept.append(line)
        parts.append(f"# --- cell {n + 1} ---\n" + "\n".join(kept))
        starts.append((header + 1, n + 1))
        header += parts[-1].count("\n") + 2     # its lines, then the blank line between parts
    if not parts:
        raise InputError(where, "cells: the notebook has no code cells")
    return "\n\n".join(parts) + "\n", tuple(notes), tuple(starts)


def _ipython(line: str) -> str:
    """What IPython syntax a line that starts a statement is, in the note's words; "" for Python."""
    if _MAGIC.match(line):
        return "IPython magic or shell escape"
    return "IPython help" if _HELP.match(line) else ""


class _Statements:
    """Where a cell's lines stand, read one line at a time: inside brackets, a triple-quoted
    string or after a backslash, a line continues a statement instead of starting one. A
    scan, not a parse: a cell that does not parse fails to load later, with Python's own
    message; this only has to find the lines a magic may be on."""

    def __init__(self):
        self.depth = 0          # open brackets
        self.quote = ""         # the open triple quote, if any
        self.joined = False     # the last line ended with a backslash

    def at_start(self) -> bool:
        return not (self.depth or self.quote or self.joined)

    def read(self, line: str) -> None:
        i, n = 0, len(line)
        self.joined = False
        while i < n:
            if self.quote:
                end = _close(line, i, self.quote)
                if end < 0:
                    return
                self.quote, i = "", end
                continue
            c = line[i]
            if c == "#":
                return
            if c in "([{":
                self.depth += 1
            elif c in ")]}":
                self.depth = max(0, self.depth - 1)
            elif c in "'\"":
                if line.startswith(c * 3, i):
                    self.quote, i = c * 3, i + 3
                    continue
                end = _close(line, i + 1, c)
                if end < 0:          # unclosed on its line: continued only by a backslash
                    self.joined = line.endswith("\\")
                    return
                i = end
                continue
            elif c == "\\" and i == n - 1:
                self.joined = True
            i += 1


def _close(line: str, i: int, quote: str) -> int:
    """The index just past ``quote`` closing a string in ``line`` from ``i``, or -1."""
    n = len(line)
    while i < n:
        if line[i] == "\\":
            i += 2
        elif line.startswith(quote, i):
            return i + len(quote)
        else:
            i += 1
    return -1
