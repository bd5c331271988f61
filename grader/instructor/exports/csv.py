"""CSV: one row per student; per lesson, its total and one column per criterion.

Written with Python's csv module (RFC 4180 quoting, CRLF rows) in UTF-8 with a byte-order
mark, so a spreadsheet reads accented names right and Python reads it back with
``encoding="utf-8-sig"``.

A grade sheet must never execute a student's name. The text cells (a student is named by
their file, and the notes quote errors naming it) are made safe three ways:

- a cell that a spreadsheet would run as a formula (it starts with = + - @, a tab or a
  carriage return) gets a leading apostrophe; number cells are the grader's own and are
  left as they are, so a negative score stays a number;
- every cell is quoted, so a name like ``x;=1+2`` stays one cell in a spreadsheet that
  splits rows on semicolons (the list separator of many locales) and not only on commas;
  a spreadsheet still reads a quoted number as a number;
- characters that are not shown (escapes, line breaks, bidirectional overrides) become
  U+FFFD (grader.engine.text.printable): the CSV may be printed to a terminal.
"""
from __future__ import annotations

import csv
import io
import sys
from pathlib import Path

from grader.engine.text import printable
from grader.instructor.outputs import CSV_EXPORT, cannot_write, refuse_to_replace, write_whole

_FORMULA_START = ("=", "+", "-", "@", "\t", "\r")


def _text(value: str) -> str:
    """A text cell: shown as it reads, never run as a formula."""
    value = printable(value)
    return "'" + value if value.startswith(_FORMULA_START) else value


def _number(x: float) -> str:
    return f"{round(x, 4):g}"


def table(book, lesson: str | None = None) -> tuple[list[str], list[list[str]]]:
    """The header and the rows (strings), as the CSV holds them."""
    lessons = [info for info in book.lessons() if lesson is None or info.id == lesson]
    if lesson is not None and not lessons:
        book.lesson(lesson)           # raises the "no results for this lesson" error
    header = ["student"]
    for info in lessons:
        header.append(f"{info.id} total")
        header += [f"{info.id}/{c.id}" for c in info.criteria]
    header.append("notes")
    by_student: dict[str, dict] = {}
    latest: dict[str, tuple] = {}          # lesson -> (graded_at, cases) of its latest graded result
    for r in book.results(lesson):
        by_student.setdefault(r.student, {})[r.lesson] = r
        if r.status == "graded":
            latest[r.lesson] = max(latest.get(r.lesson, (r.graded_at, r.cases_digest)),
                                   (r.graded_at, r.cases_digest))
    rows = []
    for student in sorted(by_student):
        row, notes = [_text(student)], []
        for info in lessons:
            r = by_student[student].get(info.id)
            crit = {s.criterion: s.score for s in r.scores} if r else {}
            row.append(_number(r.score) if r else "")
            row += [_number(crit[c.id]) if c.id in crit else "" for c in info.criteria]
            if r is not None and r.status != "graded":
                notes.append(f"{info.id}: {r.error}")
            elif r is not None and r.rubric_version != info.rubric_version:
                # A regrade under a new rubric not finished (the student's file was gone, or the
                # run stopped): the row's points are out of the old rubric's, under the new header.
                notes.append(f"{info.id}: graded under rubric version {r.rubric_version}, not "
                             f"{info.rubric_version}: grade the class again")
            if r is not None and r.status == "graded" and r.cases_digest != latest[info.id][1]:
                # A regrade on a new secret stopped part way (or a file graded with another
                # secret): the row's points are on other hidden cases than the class's latest,
                # which the class report warns of too; the sheet sent on said nothing.
                notes.append(f"{info.id}: graded on other hidden cases ({r.cases_digest[:12]}) than "
                             f"the class's latest results ({latest[info.id][1][:12]}): another secret, "
                             f"or a regrade not finished; grade the class again with one secret")
        row.append(_text("; ".join(notes)))
        rows.append(row)
    return header, rows


def export_csv(book, out: str | None, *, lesson: str | None = None) -> str:
    header, rows = table(book, lesson)
    buf = io.StringIO(newline="")
    writer = csv.writer(buf, quoting=csv.QUOTE_ALL)
    writer.writerow(header)
    writer.writerows(rows)
    if out in (None, "-"):
        sys.stdout.write(buf.getvalue())
        return "-"
    refuse_to_replace(Path(out), CSV_EXPORT)
    try:
        write_whole(Path(out), buf.getvalue().encode("utf-8-sig"))
    except OSError as e:
        raise cannot_write(out, "the CSV", e) from None
    return out
