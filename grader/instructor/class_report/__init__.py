"""`grader report LESSON --out report/`: a class's results as a page an instructor looks at.

After `grader grade` of a class, the report reads the gradebook through its API
(``numbers``), draws the score histogram and the criteria's pass rates (``plots``) and
writes one self-contained HTML page showing them with the tables (``page``):
report/index.html, report/scores.png, report/criteria.png. ``--json`` prints the same
numbers.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from grader.engine.text import plural, terminal
from grader.instructor.class_report.numbers import ClassNumbers, class_numbers
from grader.instructor.outputs import (FIGURE, FIGURE_BESIDE_REPORT, REPORT_PAGE, cannot_write, is_earlier,
                                       refuse_to_replace, write_whole)

PAGE = "index.html"
FIGURES = {"scores": "scores.png", "criteria": "criteria.png"}


@dataclass(frozen=True)
class Written:
    numbers: ClassNumbers
    page: Path
    figures: tuple[Path, ...]

    def render(self) -> str:
        n = self.numbers
        d = n.distribution
        lines = [f"{n.lesson}: {n.title}: {n.graded} of {plural(n.students, 'student')} graded"
                 + (f", mean {d['mean']:g} / {n.max_score:g}, median {d['median']:g}, "
                    f"{n.full_marks} at full marks" if n.scores else "")]
        mixed = n.mixed()
        if mixed:
            lines.append(f"  warning: {mixed}")
        width = max((len(c.id) for c in n.criteria), default=9)
        lines += [f"  {c.id:<{width}}  passed {c.passed:>4} of {c.graded:<4} ({100 * c.pass_rate:3.0f}%)  "
                  f"mean {c.mean_score:g} / {c.max_score:g}" for c in n.criteria]
        if n.problems:
            lines.append(f"  {plural(len(n.problems), 'student')} to look at: "
                         + ", ".join(f"{p.student} ({p.kind})" for p in n.problems[:8])
                         + (" ..." if len(n.problems) > 8 else ""))
        lines.append(f"wrote {self.page} and {len(self.figures)} figures")
        return terminal(lines)        # students are named by their files: the learner's text


def write_report(book, lesson: str, out: Path) -> Written:
    from grader.instructor.class_report import page, plots
    numbers = class_numbers(book, lesson)
    out = Path(out)
    refuse_to_replace(out / PAGE, REPORT_PAGE)
    figure = FIGURE_BESIDE_REPORT if is_earlier(out / PAGE, REPORT_PAGE) else FIGURE
    for name in FIGURES.values():
        refuse_to_replace(out / name, figure)
    try:
        out.mkdir(parents=True, exist_ok=True)
        figures = (plots.scores_png(numbers, out / FIGURES["scores"]),
                   plots.criteria_png(numbers, out / FIGURES["criteria"]))
        text = page.render(numbers, gradebook=book.shown_url, figures=FIGURES)
        write_whole(out / PAGE, text.encode("utf-8"))
    except OSError as e:
        raise cannot_write(out, "the report", e, folder=True) from None
    return Written(numbers, out / PAGE, figures)
