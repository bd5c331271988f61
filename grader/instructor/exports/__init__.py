"""Exports of the gradebook: CSV, nbgrader's gradebook, feedback files.

Each exporter reads the gradebook through its API (grader.instructor.gradebook) and writes one format;
``export`` picks one by name. Gradescope is not an export: it cannot import results files,
it grades in its own container, with the autograder `grader gradescope` builds
(grader.instructor.gradescope).
"""
from __future__ import annotations

import hashlib
import re

from grader.engine.text import REPLACEMENT, printable

FORMATS = ("csv", "nbgrader")

NAME_BYTES = 120                 # of a page's name before its suffix, well within a disk's 255
_UNSAFE = re.compile(r"[\\/\x00-\x1f:*?\"<>|]")
# The names Windows keeps for its devices, whatever suffix follows: no file "con.md" or
# "aux.html" can be made there, so a feedback folder unpacked on Windows stopped at such a
# student (a login "con" or "aux" is a name like any other elsewhere).
_DEVICES = re.compile(r"(con|prn|aux|nul|com[1-9]|lpt[1-9])(\..*)?", re.IGNORECASE)


def safe_name(name: str, hashed: bool = False) -> str:
    """A student id as one file or folder name: no separators, no dot-names, no name Windows
    keeps for a device, nothing a listing would not show as itself (an escape, an override
    that reverses how the name reads). An id that had to change (or ``hashed``) gets a short
    hash so two ids never land on one file."""
    clean = _UNSAFE.sub("_", printable(name).replace(REPLACEMENT, "_")).strip(" ")
    if (hashed or clean != name or not clean or clean.startswith(".") or _DEVICES.fullmatch(clean)
            or len(clean.encode()) > NAME_BYTES):
        # Cut in bytes, not characters: a disk holds 255 bytes of a name, and a student's own
        # file name may take them all (84 CJK characters), leaving none for ".html".
        kept = clean.lstrip(".").encode()[:NAME_BYTES - 9].decode(errors="ignore")
        if _DEVICES.fullmatch(kept):          # "nul.x-1a2b3c4d" is still the device to Windows
            kept = kept.replace(".", "_", 1)
        clean = (kept or "student") + "-" + hashlib.sha256(name.encode()).hexdigest()[:8]
    return clean


def file_names(students) -> dict[str, str]:
    """Each student's file name (``safe_name``), distinct even where the disk ignores case
    (macOS's, Windows'): there "Alice" and "alice" are one file, and one student's page
    would be written over by, and sent as, the other's. Such names get the hash, until no
    two are one file: a student whose own name is another's hashed one ("alice-2bd806c9",
    alice's once "Alice" is in the class too) shared alice's page."""
    names = {s: safe_name(s) for s in students}
    while True:
        seen: dict[str, int] = {}
        for name in names.values():
            seen[name.casefold()] = seen.get(name.casefold(), 0) + 1
        # Each student is hashed at most once, so this ends; two hashed names are one file
        # only if their names' hashes agree as well.
        clash = [s for s, n in names.items() if seen[n.casefold()] > 1 and n != safe_name(s, hashed=True)]
        if not clash:
            return names
        for s in clash:
            names[s] = safe_name(s, hashed=True)


def export(book, fmt: str, *, lesson: str | None = None, out: str | None = None,
           progress: bool = False) -> str:
    """Write ``fmt`` and return where it went (a path, or "-" for stdout). ``progress``: a
    long export's count on stderr (nbgrader's; a CSV takes no time)."""
    if fmt == "csv":
        from grader.instructor.exports.csv import export_csv
        return export_csv(book, out, lesson=lesson)
    if fmt == "nbgrader":
        from grader.instructor.exports.nbgrader import export_nbgrader
        # Not gradebook.db: that is the grader's own gradebook, which must never be mixed
        # with nbgrader's tables.
        return export_nbgrader(book, out or "nbgrader/gradebook.db", lesson=lesson, progress=progress)
    raise ValueError(f"unknown export format {fmt!r} (one of {', '.join(FORMATS)})")
