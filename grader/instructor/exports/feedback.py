"""Feedback files: one readable page per student (Markdown or HTML) from the gradebook.

Per lesson: the total, a table of criteria with points, and for each criterion that lost
points its feedback line (which case, expected vs got). ``public_only``, for pages sent
before grades are published, gives each criterion's public feedback instead (every
criterion, whatever its visibility): measured on the public cases alone by a sandbox
child that never received a hidden input (grader.engine.pipeline.run_criteria), so no
hidden input can appear in it; the points stay. Learner-derived text is escaped for the
format (Markdown or HTML): it is quoted, never rendered. A submission the grader itself
failed on says so, without the failure's detail (gradebook.student_error): that names the
instructor's machine, and the summary and the gradebook keep it for them.
"""
from __future__ import annotations

import re
from pathlib import Path

from grader.engine.errors import InputError
from grader.instructor.exports import file_names
from grader.instructor.gradebook import student_error
from grader.engine.pipeline import HIDDEN_LATER
from grader.engine.report import COST_MODEL_NOTE
from grader.engine.text import html_text, printable
from grader.instructor.outputs import (FEEDBACK_HTML, FEEDBACK_MD, cannot_write, is_earlier, refuse_to_replace,
                                       write_whole)

FORMATS = ("md", "html")


def _g(x: float) -> str:
    return f"{round(x, 4):g}"


def _sections(results, infos, public_only: bool):
    """(heading, facts, rows, fixes) per lesson: the page's content, format-free."""
    for r in results:
        info = infos[r.lesson]
        heading = f"{r.lesson}: {info.title}: {_g(r.score)} / {_g(r.max_score)}"
        if r.status != "graded":
            yield heading, [f"Not graded: {student_error(r.error)}"], [], []
            continue
        facts = [f"Graded {r.graded_at:%Y-%m-%d %H:%M} UTC; submission {Path(r.submission_path).name} "
                 f"(sha256 {r.submission_digest[:16]}); rubric version {r.rubric_version}."]
        crit = {c.id: c for c in info.criteria}
        public = {c.get("id"): c.get("public_feedback") for c in r.report.get("criteria", ())
                  if isinstance(c, dict)} if public_only else {}
        rows, fixes = [], []
        for s in r.scores:
            c = crit.get(s.criterion)
            title = c.title if c else ""
            mark = "pass" if s.passed else ("part" if s.score > 0 else "fail")
            rows.append((s.criterion, title, f"{_g(s.score)} / {_g(s.max_score)}", mark))
            if not s.passed:
                # A report stored before public feedback existed hands back nothing early.
                told = public.get(s.criterion) or HIDDEN_LATER if public_only else s.feedback
                fixes.append((s.criterion, told))
        yield heading, facts, rows, fixes


def _md_cell(text: str) -> str:
    return text.replace("\\", "\\\\").replace("|", "\\|").replace("\n", " ")


# "@" too, and the ":" of "://" and the dot of "www.": GitHub's Markdown (and most renderers
# after it) turns a bare https://..., www.... or name@host into a link of its own, with no
# brackets to escape (a submission's exception message, or its file's name, was a link in
# its page).
_MD_SPECIAL = re.compile(r"([\\`*_{}\[\]()<>#+!|~&@-])")
_BARE_LINK = re.compile(r"(?<=www)\.|:(?=/)", re.IGNORECASE)


def _md_text(text: str) -> str:
    """Learner-derived text as literal Markdown: no link (bracketed or bare), image, emphasis,
    entity or HTML of its own, and nothing a reader would not see (grader.engine.text.printable)."""
    return _BARE_LINK.sub(r"\\\g<0>", _MD_SPECIAL.sub(r"\\\1", printable(" ".join(text.split()))))


def markdown(student: str, sections) -> str:
    # The student's name and the facts (a file's name, an error quoting it) come from what
    # was handed in: literal text, like the feedback lines.
    out = [f"# Feedback for {_md_text(student)}", ""]
    for heading, facts, rows, fixes in sections:
        out += [f"## {heading}", ""] + [_md_text(f) for f in facts] + [""]
        if rows:
            out += ["| criterion | | points | result |", "|---|---|---:|---|"]
            out += [f"| {_md_cell(a)} | {_md_cell(b)} | {c} | {d} |" for a, b, c, d in rows]
            out.append("")
        if fixes:
            out += ["What to work on:", ""]
            out += [f"- **{_md_cell(cid)}**: {_md_text(text)}" for cid, text in fixes]
            out.append("")
    out += [f"_{COST_MODEL_NOTE}_", ""]
    return "\n".join(out)


def html_page(student: str, sections) -> str:
    e = html_text
    out = ["<!DOCTYPE html>", '<html lang="en"><head><meta charset="utf-8">',
           f"<title>Feedback for {e(student)}</title>",
           "<style>body{font-family:sans-serif;max-width:52em;margin:2em auto;padding:0 1em}"
           "table{border-collapse:collapse}td,th{border:1px solid #ccc;padding:.3em .6em}"
           ".fail{color:#a00}.part{color:#a60}.pass{color:#070}</style></head><body>",
           f"<h1>Feedback for {e(student)}</h1>"]
    for heading, facts, rows, fixes in sections:
        out.append(f"<h2>{e(heading)}</h2>")
        out += [f"<p>{e(f)}</p>" for f in facts]
        if rows:
            out.append("<table><tr><th>criterion</th><th></th><th>points</th><th>result</th></tr>")
            out += [f'<tr><td>{e(a)}</td><td>{e(b)}</td><td>{e(c)}</td><td class="{d}">{d}</td></tr>'
                    for a, b, c, d in rows]
            out.append("</table>")
        if fixes:
            out.append("<p>What to work on:</p><ul>")
            out += [f"<li><b>{e(cid)}</b>: {e(text)}</li>" for cid, text in fixes]
            out.append("</ul>")
    out += [f"<p><i>{e(COST_MODEL_NOTE)}</i></p>", "</body></html>", ""]
    return "\n".join(out)


def write_feedback(book, out: str, *, lesson: str | None = None, fmt: str = "md",
                   public_only: bool = False) -> list[Path]:
    if fmt not in FORMATS:
        raise InputError("--format", f"feedback is written as {' or '.join(FORMATS)}")
    if lesson is not None:
        book.lesson(lesson)
    infos = {i.id: i for i in book.lessons()}
    by_student: dict[str, list] = {}
    for r in book.results(lesson):
        by_student.setdefault(r.student, []).append(r)
    folder = Path(out)
    paths = {student: folder / f"{name}.{fmt}" for student, name in file_names(sorted(by_student)).items()}
    for path in paths.values():        # every one before the first is written
        refuse_to_replace(path, FEEDBACK_MD if fmt == "md" else FEEDBACK_HTML)
    written = []
    try:
        folder.mkdir(parents=True, exist_ok=True)
        for student, path in paths.items():
            sections = list(_sections(by_student[student], infos, public_only))
            text = markdown(student, sections) if fmt == "md" else html_page(student, sections)
            # Whole or not at all: a page cut off by a full disk or Ctrl-C read as the
            # student's whole feedback.
            write_whole(path, text.encode("utf-8"))
            written.append(path)
    except OSError as e:
        raise cannot_write(out, "feedback files", e, folder=True) from None
    return written


def left_over(out: str, written: list[Path]) -> list[Path]:
    """Earlier feedback pages in ``out`` that this run did not write (a student with no
    result of this run's --lesson): a folder of public-only pages that still holds one of
    full feedback would send a hidden case's feedback with them."""
    folder = Path(out)
    kinds = {".md": FEEDBACK_MD, ".html": FEEDBACK_HTML}
    fresh = set(written)
    return sorted(p for p in folder.iterdir() if p.suffix in kinds and p not in fresh
                  and is_earlier(p, kinds[p.suffix]))
