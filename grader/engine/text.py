"""Learner text on its way into what the grader writes: one helper per kind of output.

A student's name (a file or folder name of the class), an exception message, a returned
string, a key of a design sheet: any of it can hold characters that a terminal, a page or
a spreadsheet acts on instead of showing. An escape sequence clears an instructor's
screen and writes a forged line; a carriage return or a newline starts one; a
bidirectional override (U+202E) shows the rest of a line backwards; a tag character
hides text. ``printable`` keeps what a reader sees and replaces the rest with U+FFFD, so
the reader sees that something was there. Letters, marks and spaces of every script
stay, and so do the zero-width joiners some scripts spell names with.

The outputs: ``terminal`` (reports, summaries, error lines), ``html_text`` (the class
report, HTML feedback); the CSV export, the Markdown feedback and file names use
``printable`` with their own escaping (grader.instructor.exports). ``as_text`` names a
file whose name is not UTF-8 by its bytes (\\xNN), for a class folder and a Gradescope
upload alike. ``plural`` is the grader's own words: a count and its noun.
"""
from __future__ import annotations

import html
import unicodedata
from typing import Iterable, Sequence

REPLACEMENT = "\ufffd"
# Format characters (category Cf) that spell words in Persian and Indic names and in
# emoji: they join or part letters, and can neither move nor hide a line.
_JOINERS = frozenset("\u200c\u200d")


def _shown(ch: str) -> bool:
    return ch.isprintable() or ch in _JOINERS or unicodedata.category(ch) == "Zs"


def printable(text: str, keep: str = "") -> str:
    """``text`` with every character a reader would not see as itself replaced by U+FFFD:
    control characters (escape, carriage return, newline, tab, backspace, NUL), format
    characters (bidirectional overrides, isolates and LRM/RLM, tags, BOM), line and paragraph
    separators, surrogates, private-use and unassigned code points. ``keep``: control
    characters the caller lays out itself (a captured print's newlines and tabs)."""
    text = str(text)
    if text.isprintable():               # the common case: nothing to do
        return text
    return "".join(ch if _shown(ch) or ch in keep else REPLACEMENT for ch in text)


def as_text(name: str) -> str:
    """A file name as text the gradebook, a page and a terminal can hold: a byte that is not
    UTF-8 (a name from an archive made with another encoding, which Python reads as a lone
    surrogate and no database or file will store) is shown as \\xNN."""
    return name.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")


def one_line(text: str, limit: int | None = None) -> str:
    """Learner text for one line of feedback: runs of whitespace (newlines included) as
    one space, then ``printable``, then at most ``limit`` characters."""
    text = printable(" ".join(str(text).split()))
    return text if limit is None or len(text) <= limit else text[:limit - 3] + "..."


def terminal(lines: Iterable[str]) -> str:
    """Lines for a terminal, joined: each line ``printable``, so no line holds a newline,
    a carriage return or an escape of its own and only the grader's own breaks remain."""
    return "\n".join(printable(line) for line in lines)


def html_text(text: str) -> str:
    """Text for an HTML page (element content or a quoted attribute): ``printable``, then
    escaped (& < > " '), so it is shown, never parsed as markup."""
    return html.escape(printable(text), quote=True)


def plural(n: int, word: str) -> str:
    """'1 student', '2 students': a count in the grader's own words (a plain -s plural)."""
    return f"{n} {word}{'' if n == 1 else 's'}"


def first_few(names: Sequence[str], n: int = 5) -> str:
    """'a, b, c' of a list a person reads in one line: its first n, then ' ...' for the rest."""
    return ", ".join(names[:n]) + (" ..." if len(names) > n else "")
