"""The class report's two figures, drawn with matplotlib into PNG files.

- scores.png: how many students got each score (ten equal bins below full marks, then
  full marks), the mean and median marked as lines on the same score axis, each bar's
  count above it and clear of them.
- criteria.png: per criterion, the share of graded students who passed it and the mean
  score as a share of its points, side by side, in the rubric's order.

With no graded student, each figure says so in words instead of drawing empty axes.
"""
from __future__ import annotations

from pathlib import Path

from grader.course.plots import write_png
from grader.instructor.outputs import FIGURE_SOFTWARE

INK, PASS, MEAN, FULL = "#30343f", "#3b7d5a", "#5a7bb5", "#2f6a4b"
DPI = 110
BAR_WIDTH = 0.8
NOBODY = "no graded student yet: nothing to plot\n(the page lists the students to look at)"


def _pyplot():
    import matplotlib                    # here only: nothing else in the grader pays for it
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    plt.rcParams.update({"font.size": 10, "axes.edgecolor": "#9aa0a6", "axes.labelcolor": INK,
                         "xtick.color": INK, "ytick.color": INK, "axes.spines.top": False,
                         "axes.spines.right": False})
    return plt


def _nobody(fig, ax) -> None:
    """A figure of a class with no graded student: a sentence, not blank axes."""
    ax.set_axis_off()
    ax.text(0.5, 0.5, NOBODY, ha="center", va="center", fontsize=11, color=INK, transform=ax.transAxes)


def _save(plt, fig, path: Path) -> Path:
    fig.tight_layout()
    write_png(fig, path, DPI, software=FIGURE_SOFTWARE)
    plt.close(fig)
    return path


def score_at(score: float, max_score: float, bins: int) -> float:
    """Where a score falls on the histogram's bar axis: bar i spans its bin's scores
    [i * width, (i + 1) * width), centred on i; full marks are the last bar."""
    if score >= max_score or max_score <= 0:
        return float(bins - 1)
    return score / (max_score / (bins - 1)) - 0.5


def scores_png(numbers, path: Path) -> Path:
    plt = _pyplot()
    bins = numbers.distribution["bins"]
    fig, ax = plt.subplots(figsize=(8.0, 3.6))
    fig.suptitle(f"{numbers.lesson}: scores of the graded students", fontsize=11, color=INK)
    if not numbers.scores:
        _nobody(fig, ax)
        return _save(plt, fig, path)
    counts = [b["count"] for b in bins]
    colours = [PASS] * (len(bins) - 1) + [FULL]
    bars = ax.bar(range(len(bins)), counts, color=colours, width=BAR_WIDTH)
    labels = [ax.annotate(str(n), (bar.get_x() + bar.get_width() / 2, n), ha="center", va="bottom",
                          fontsize=9, color=INK, xytext=(0, 2), textcoords="offset points")
              for bar, n in zip(bars, counts) if n]
    d = numbers.distribution
    # The mean and the median on the score axis, told apart by line style (not colour).
    lines = []
    for value, name, style in ((d["mean"], "mean", "--"), (d["median"], "median", ":")):
        lines.append(score_at(value, numbers.max_score, len(bins)))
        ax.axvline(lines[-1], color=INK, linestyle=style, linewidth=1.4, label=f"{name} {value:g}")
    ax.set_xticks(range(len(bins)))
    ax.set_xticklabels([b["label"].replace(" (full)", "\nfull") for b in bins], fontsize=8)
    ax.set_xlabel(f"score out of {numbers.max_score:g}")
    ax.set_ylabel("students")
    ax.set_ylim(0, max(counts + [1]) * 1.18)
    ax.yaxis.get_major_locator().set_params(integer=True)
    ax.legend(loc="lower center", bbox_to_anchor=(0.5, 1.0), ncol=3, frameon=False, fontsize=9,
              title=f"{numbers.graded} graded, {numbers.full_marks} at full marks", title_fontsize=9)
    fig.tight_layout()          # the axes' final size: a count's width in score units depends on it
    _clear_of_lines(ax, labels, lines)
    return _save(plt, fig, path)


def _clear_of_lines(ax, labels, lines: list[float], pad_pt: float = 2.0) -> None:
    """Move each bar's count sideways, as little as it takes, so that no mean or median line
    runs through its text: a line through the middle of a bar (a median of 5.5 out of 10)
    struck out its count. It stays above its bar: a count is a few characters, a bar much
    wider, and there are only two lines."""
    renderer = ax.figure.canvas.get_renderer()
    to_data = ax.transData.inverted()
    (x0, _), (x1, _) = to_data.transform([(0, 0), (pad_pt * ax.figure.dpi / 72, 0)])
    pad = x1 - x0
    for label in labels:
        box = label.get_window_extent(renderer)
        (left, _), (right, _) = to_data.transform([(box.x0, 0), (box.x1, 0)])
        centre, half = label.xy[0], (right - left) / 2 + pad

        def clear(c: float) -> bool:
            return all(abs(c - x) >= half - 1e-9 for x in lines)    # x + half, rounded
        options = [centre] + [x + side * half for x in lines for side in (-1, 1)]
        best = min((c for c in options if clear(c)), key=lambda c: abs(c - centre))
        label.xy = (best, label.xy[1])


def criteria_png(numbers, path: Path) -> Path:
    plt = _pyplot()
    crits = list(numbers.criteria)
    fig, ax = plt.subplots(figsize=(8.0, 0.55 * max(1, len(crits)) + 1.6))
    fig.suptitle(f"{numbers.lesson}: each criterion, passed and mean score", fontsize=11, color=INK)
    if not numbers.graded or not crits:
        _nobody(fig, ax)
        return _save(plt, fig, path)
    rows = range(len(crits))
    passed = [100 * c.pass_rate for c in crits]
    means = [100 * c.mean_score / c.max_score if c.max_score else 0.0 for c in crits]
    h = 0.38
    ax.barh([r - h / 2 for r in rows], passed, height=h, color=PASS, label="passed (% of students)")
    # Hatched: in greyscale the two colours are the same grey, and the bars would not part.
    ax.barh([r + h / 2 for r in rows], means, height=h, color=MEAN, hatch="//", edgecolor="white",
            linewidth=0, label="mean score (% of points)")
    for r, p, m in zip(rows, passed, means):
        ax.annotate(f"{p:.0f}%", (p, r - h / 2), va="center", fontsize=8, xytext=(3, 0),
                    textcoords="offset points", color=INK)
        ax.annotate(f"{m:.0f}%", (m, r + h / 2), va="center", fontsize=8, xytext=(3, 0),
                    textcoords="offset points", color=INK)
    ax.set_yticks(list(rows))
    ax.set_yticklabels([c.id for c in crits])
    ax.invert_yaxis()                   # the rubric's first criterion on top
    ax.set_xlim(0, 112)
    ax.set_xticks([0, 25, 50, 75, 100])
    ax.set_xlabel("% of graded students passing / % of the criterion's points, on average")
    ax.legend(loc="lower center", bbox_to_anchor=(0.5, 1.0), ncol=2, frameon=False, fontsize=9)
    return _save(plt, fig, path)
