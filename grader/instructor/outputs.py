"""What an instructor's command may write over: an earlier output of its own kind, nothing else.

`export --out`, `gradescope --out`, `feedback --out` and `report --out` name what the
command writes. A slip of the shell (`--out gra<TAB>` completing to gradebook.db rather
than grades.csv) or of the hand (`--out course.secret`) would replace the gradebook or the
secret in silence, and neither can be made again. So a file already there is replaced only
when its first bytes say the same command wrote it before (an empty file holds nothing to
lose); anything else is refused, named, and left as it was.
"""
from __future__ import annotations

import io
import os
import tempfile
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterable

from grader.engine.errors import InputError
from grader.engine.files import Unreadable, read_regular

HEAD = 4096


@dataclass(frozen=True)
class Kind:
    """An output's kind: its name in a refusal, and how its first bytes are known."""
    name: str
    looks_ours: Callable[[bytes], bool]
    read: int = HEAD              # how many bytes the test needs (a zip's list is at its end)


def _autograder_zip(data: bytes) -> bool:
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as z:
            return {"autograder.json", "run_autograder"} <= set(z.namelist())
    except (zipfile.BadZipFile, ValueError, OSError):
        return False


CSV_EXPORT = Kind("CSV export", lambda head: head.startswith('\ufeff"student"'.encode()))
AUTOGRADER = Kind("autograder zip", _autograder_zip, read=64 << 20)
FEEDBACK_MD = Kind("feedback file", lambda head: head.startswith(b"# Feedback for "))
FEEDBACK_HTML = Kind("feedback file", lambda head: b"<title>Feedback for " in head)
REPORT_PAGE = Kind("class report", lambda head: b": class report</title>" in head)
PNG = b"\x89PNG\r\n\x1a\n"
# A class report's figure names its maker in the PNG's Software text, ahead of the image
# data: told by "a PNG" alone, an instructor's own scores.png in the folder given to
# `report --out` was replaced in silence.
FIGURE_SOFTWARE = "grader class report"
FIGURE = Kind("figure", lambda head: head.startswith(PNG)
              and b"tEXtSoftware\x00" + FIGURE_SOFTWARE.encode() in head)
# A figure beside an earlier class report's page: the report's own, drawn before figures
# carried their maker's name.
FIGURE_BESIDE_REPORT = Kind("figure", lambda head: head.startswith(PNG))


def refuse_to_replace(path: Path, kind: Kind) -> None:
    """Return when ``path`` may be written: it is not there, is empty, or is an earlier
    ``kind``. Otherwise one line naming it, and nothing is written."""
    if not os.path.lexists(path):       # nor is it when a parent is a file: the writer says so
        return
    try:
        head = read_regular(path, kind.read)
    except FileNotFoundError:
        return
    except Unreadable as e:
        raise InputError(str(path), f"{e}; not replaced by the {kind.name}") from None
    if head and not kind.looks_ours(head):
        raise InputError(str(path), f"exists and is not an earlier {kind.name}, so it is left as "
                                    f"it was: give another --out, or remove the file first")


def is_earlier(path: Path, kind: Kind) -> bool:
    """Whether ``path`` holds an earlier output of ``kind`` (not when absent or unreadable)."""
    try:
        return kind.looks_ours(read_regular(path, kind.read))
    except (OSError, Unreadable):
        return False


def instructor_output(path: Path, also: tuple[Kind, ...] = ()) -> str:
    """What an instructor's command wrote ``path`` as, told by its bytes whatever its name
    (an autograder zip, a gradebook or any SQLite database, a CSV export, a feedback page, a
    class report's page; and the kinds ``also`` names), or "" for anything else (and for what
    cannot be read). The file's head is read once for every kind told by its head."""
    from grader.instructor.gradebook import SQLITE_MAGIC
    try:
        head = read_regular(path, HEAD)
    except (OSError, Unreadable):
        return ""
    if head.startswith(SQLITE_MAGIC):
        return "gradebook or other SQLite database"
    if head.startswith(b"PK") and is_earlier(path, AUTOGRADER):
        return AUTOGRADER.name
    return next((k.name for k in (CSV_EXPORT, FEEDBACK_MD, FEEDBACK_HTML, REPORT_PAGE, FIGURE, *also)
                 if k.looks_ours(head)), "")


def _answer_head(head: bytes) -> bool:
    from grader.course.bundle import ANSWER_HEADS        # the lesson 6 machinery, only when asked
    return head.startswith(tuple(h.encode() for h in ANSWER_HEADS))


# What `grader incident --answer` wrote. Not one of instructor_output's kinds: a class folder
# does not pass an answer key over (a reference answer graded as a submission is a test),
# but the course's own folders must not hold one (course_outputs).
ANSWER_KEY = Kind("an incident's answer key", _answer_head)


def course_outputs(files: Iterable[tuple[str, Path]]) -> list[str]:
    """Of the course's own files, (the name to show, the file), those an instructor's command
    wrote, as "name: kind": instructor_output's kinds and an incident's answer key. Whatever
    copies the course's folders to learners or to a grading platform refuses them."""
    return [f"{name}: {kind}" for name, path in files
            for kind in [instructor_output(path, also=(ANSWER_KEY,))] if kind]


def instructor_folder(path: Path) -> bool:
    """Whether the folder ``path`` holds only what instructor's commands wrote, and
    something: a class report (its page and figures: `grader report --out submitted/report/`),
    a folder of feedback pages, an export. Names starting with a dot are passed over, as a
    class folder passes them over; a subfolder, a link or any other file makes it not one."""
    try:
        with os.scandir(path) as it:
            entries = [e for e in it if not e.name.startswith(".")]
    except OSError:
        return False
    if not entries or not all(e.is_file(follow_symlinks=False) for e in entries):
        return False
    kinds = {Path(e.path): instructor_output(Path(e.path)) for e in entries}
    beside_report = REPORT_PAGE.name in kinds.values()
    return all(kind or (beside_report and is_earlier(p, FIGURE_BESIDE_REPORT)) for p, kind in kinds.items())


def write_whole(path: Path, data: bytes, mode: int | None = None) -> None:
    """Write ``data`` as ``path`` all at once: into a new file beside it, then renamed over
    it. A write stopped half way (Ctrl-C, a full disk) leaves the earlier output as it was
    and no part-written file. ``mode``: the new file's permissions (default: what the
    umask gives a new file, or the earlier output's own). A link is written through to the
    file it names, as opening it would. OSError says why it could not be written."""
    path = Path(os.path.realpath(path))
    if mode is None:
        try:
            mode = os.stat(path).st_mode & 0o7777
        except FileNotFoundError:
            umask = os.umask(0o022)
            os.umask(umask)
            mode = 0o666 & ~umask
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".part", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as f:       # mkstemp's file is the owner's only until then
            f.write(data)
        os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def cannot_write(out: str | Path, what: str, error: OSError, *, folder: bool = False) -> InputError:
    """One line for an output that could not be written: a file standing where a folder
    must be (``--out`` itself for a ``folder`` output, else a parent of it) is named, since
    the system's words for it ("File exists", "Not a directory") say neither what nor where."""
    path = Path(out)
    where = (path, *path.parents) if folder else path.parents
    blocker = next((p for p in where if os.path.lexists(p)), None)
    why = (f"{blocker} is a file, not a folder" if blocker is not None and not blocker.is_dir()
           else error.strerror or str(error))
    return InputError(str(out), f"cannot write {what}: {why}")
