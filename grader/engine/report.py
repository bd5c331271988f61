"""A grading report: the numbers, the feedback, and what was graded under which isolation.

``to_dict`` is the --json form; ``render`` is the terminal table. Timing lives only in
``duration_s`` so two runs of one secret compare equal with that field set aside.
"""
from __future__ import annotations

import re
import shutil
import textwrap
from dataclasses import asdict, dataclass

from grader.engine.text import terminal

COST_MODEL_NOTE = ("The service-cost model is synthetic: a teaching model, not a measurement "
                   "of any engine or GPU.")


@dataclass(frozen=True)
class CriterionResult:
    id: str
    title: str
    score: float
    max_score: float
    passed: bool
    feedback: str
    visibility: str
    evidence: tuple[str, ...] = ()
    checked: bool = True      # False: this edition cannot check it; in neither total
    # What may be handed back before grades are published (`grader feedback --public-only`):
    # computed from the public cases alone, by a sandbox child that never received a hidden
    # input, so nothing in it can quote one.
    public_feedback: str = ""


@dataclass(frozen=True)
class Report:
    lesson: str
    title: str
    mode: str                        # check (public cases) | grade (public and hidden)
    submission: str
    submission_digest: str
    rubric_version: int
    criteria: tuple[CriterionResult, ...]
    cases: tuple[dict, ...]
    isolation: str
    grader_version: str
    duration_s: float
    notes: tuple[str, ...] = ()

    @property
    def score(self) -> float:
        return round(sum(c.score for c in self.criteria if c.checked), 4)

    @property
    def max_score(self) -> float:
        return round(sum(c.max_score for c in self.criteria if c.checked), 4)

    def to_dict(self) -> dict:
        d = asdict(self)
        d["score"], d["max_score"] = self.score, self.max_score
        d["cost_model"] = COST_MODEL_NOTE
        return d


FEEDBACK_MIN = 24       # columns of feedback text per line, however narrow the terminal


def _fmt(x: float) -> str:
    return f"{x:g}"


# What the terminal keeps of a parenthesised part of the isolation: what the child lacks,
# or why bubblewrap was not used. The rest says how each layer is set up, five lines of it
# after every check: the report's --json form keeps it whole.
_KEPT_ASIDES = ("lacks ", "no bwrap")
_ASIDE = re.compile(r"(\s*)\(([^()]*)\)")


def isolation_in_brief(isolation: str) -> str:
    """The isolation named by its layers, without how each is set up."""
    text = isolation
    while True:     # innermost asides first, so a kept one can hold a dropped one
        brief = _ASIDE.sub(lambda m: f"{m[1]}\0{m[2]}\1" if m[2].startswith(_KEPT_ASIDES) else "", text)
        if brief == text:
            return brief.replace("\0", "(").replace("\1", ")")
        text = brief


def render(report: Report, width: int | None = None) -> str:
    width = width or min(100, shutil.get_terminal_size((100, 20)).columns)
    name_w = max(len("criterion"), *(len(c.id) for c in report.criteria))
    lines = [f"{report.lesson}: {report.title}  ({report.mode}, {report.submission})", ""]
    lines.append(f"  {'criterion':<{name_w}}  {'points':>11}  result")
    # Titles and feedback take the columns beside the id, points and result; where those
    # leave fewer than FEEDBACK_MIN (a narrow pane, a long id), they go under the row with
    # a short indent instead of in a strip at its far right.
    row_w = name_w + 23
    beside = width - row_w >= FEEDBACK_MIN
    arrow = f"  {'':<{name_w}}    -> " if width - name_w - 9 >= FEEDBACK_MIN else "    -> "
    for c in report.criteria:
        mark = "pass" if c.passed else ("part" if c.score > 0 else "FAIL")
        pts = f"{_fmt(c.score)}/{_fmt(c.max_score)}"
        if not c.checked:
            mark, pts = "n/a ", f"-/{_fmt(c.max_score)}"
        row = f"  {c.id:<{name_w}}  {pts:>11}  {mark}"
        title = textwrap.wrap(c.title, width - row_w if beside else max(FEEDBACK_MIN, width - 4)) or [""]
        if beside:
            lines.append(f"{row}  {title[0]}")
            lines += [" " * row_w + part for part in title[1:]]
        else:
            lines.append(row)
            lines += ["    " + part for part in title]
        if not c.passed:
            for part in textwrap.wrap(c.feedback, max(FEEDBACK_MIN, width - len(arrow))) or [""]:
                lines.append(arrow + part)
    # A total over the checked criteria alone reads as full marks when one is n/a: say how
    # many of the lesson's points it leaves out.
    unchecked = round(sum(c.max_score for c in report.criteria if not c.checked), 4)
    left_out = (f"{_fmt(unchecked)} of {_fmt(round(report.max_score + unchecked, 4))} points not "
                f"checked here; " if unchecked else "")
    brief = isolation_in_brief(report.isolation)
    isolation = brief if brief == report.isolation else f"{brief}; in full with --json"
    lines += ["", *textwrap.wrap(f"  total {_fmt(report.score)} / {_fmt(report.max_score)}   "
                                 f"({left_out}{len(report.cases)} cases; isolation: {isolation})",
                                 max(FEEDBACK_MIN, width), subsequent_indent="    ")]
    for n in report.notes:
        lines += textwrap.wrap(f"  note: {n}", max(FEEDBACK_MIN, width), subsequent_indent="        ")
    lines += textwrap.wrap(f"  {COST_MODEL_NOTE}", max(FEEDBACK_MIN, width), subsequent_indent="  ")
    return terminal(lines)        # the submission's name and its feedback are the learner's
