"""Plots as data, drawn with matplotlib: what the experiments and ``grader sheet run --plot`` show.

A plot is a title and panels. A panel holds lines against the plot's shared x axis, marks
on that axis (a word at each x, one row per label: the release decision at each rate), or
grouped bars over categories of their own (violations per variant). The data is what the
tests assert; ``save_plot`` draws it, importing matplotlib only then, so nothing else in
the grader pays for it. Warnings (a truncated run, a variant left out) are drawn in red
under the title: a picture that hides them would mislead.
"""
from __future__ import annotations

import os
import textwrap
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping

from grader.engine.errors import InputError
from grader.engine.report import COST_MODEL_NOTE

# What a mark's word means, in colour: the release decisions.
MARK_COLOURS = {"ship": "forestgreen", "rollback": "crimson", "inconclusive": "dimgray"}

# How the reference's series are named beside a learner's ("reference: budget"); the plot
# draws such a series in its learner twin's colour and marker, hollow and dashed, so the
# two stay apart even where they coincide (a correct solution lies exactly on them).
REFERENCE_PREFIX = "reference: "
# matplotlib's default cycle without its red: red is the thresholds' (budgets, targets,
# rollback rules) and the rollback decision's, and a series in it would read as one.
PALETTE = ("#1f77b4", "#ff7f0e", "#2ca02c", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f",
           "#bcbd22", "#17becf")
# A marker (lines) or a hatch (bars, by the series' place in its panel) per series besides
# its colour: the plots are printed in greyscale and read by colour-blind learners, and
# colour alone would not tell the series apart.
MARKERS = ("o", "s", "^", "D", "v", "P", "X", "<", ">")
HATCHES = ("", "//", "..", "xx", "\\\\", "++", "oo", "--", "**")
THRESHOLD = {"color": "crimson", "linestyle": "--", "linewidth": 1.2}
# PNG text chunks name the matplotlib version by default: without them the same plot is the
# same bytes on every machine (matplotlib writes no date into a PNG).
PNG_METADATA = {"Software": None}


@dataclass(frozen=True)
class Style:
    """How one series is drawn, in every panel of a plot."""
    colour: str
    marker: str
    reference: bool        # the reference's twin of a learner's series: hollow, dashed


def family(label: str) -> str:
    """A series' name without the reference's prefix: a learner's and the reference's share it."""
    return label.replace(REFERENCE_PREFIX, "", 1)


def styles(labels) -> dict[str, Style]:
    """One style per label; labels of one family share colour and marker."""
    place = {name: i for i, name in enumerate(dict.fromkeys(family(label) for label in labels))}

    def style(label: str) -> Style:
        i = place[family(label)]
        return Style(PALETTE[i % len(PALETTE)], MARKERS[i % len(MARKERS)], REFERENCE_PREFIX in label)
    return {label: style(label) for label in labels}


def write_png(fig, path: Path, dpi: int = 110, software: str | None = None) -> None:
    """Every PNG the grader draws is written here: the same figure is the same bytes.
    ``software``: the PNG's Software text, by which a command knows its own figure again
    (grader.instructor.outputs.FIGURE)."""
    fig.savefig(path, dpi=dpi, metadata={**PNG_METADATA, "Software": software})


@dataclass(frozen=True)
class Line:
    label: str
    x: tuple[float, ...]
    y: tuple[float, ...]
    style: str = "line"    # line (joined markers) | points (markers only) | dashed (a threshold)
    band: tuple[tuple[float, ...], tuple[float, ...]] = ()   # (low, high) per x: a shaded band


@dataclass(frozen=True)
class Mark:
    """A word at a point of the shared x axis, in the row of its label."""
    x: float
    row: str
    text: str


@dataclass(frozen=True)
class Bars:
    """Grouped bars: a group per category, a bar per series; each bar labelled with its value."""
    categories: tuple[str, ...]
    series: tuple[tuple[str, tuple[float, ...]], ...]   # (label, one value per category)
    horizontal: bool = False
    log: bool = False          # a log value axis; a zero draws no bar, only its label "0"
    fmt: str = "g"             # how the value labels are written
    pack: bool = False         # draw only the non-zero bars of a group; an all-zero group says so
    empty: tuple[str, ...] = ()  # what an all-zero group says, per category (default "none")
    least: float = 1.0         # the value axis reaches at least this (100 for a percentage)
    # A threshold per category (None: none there), drawn across that category's group and
    # named once in the legend: the rollback rule of a release ("rollback below: ...").
    limits: tuple[float | None, ...] = ()
    limits_label: str = ""

    def drawn(self) -> list[tuple[int, int, float]]:
        """(category, series, value) of every bar drawn, in drawing order."""
        return [(c, k, vs[c]) for c in range(len(self.categories))
                for k, (_, vs) in enumerate(self.series) if vs[c] or not self.pack]


@dataclass(frozen=True)
class Panel:
    ylabel: str
    lines: tuple[Line, ...] = ()
    hlines: tuple[tuple[float, str], ...] = ()   # (y, label): a budget, a target
    ylog: bool = False
    bars: Bars | None = None
    marks: tuple[Mark, ...] = ()
    xlabel: str = ""                             # a bars panel's own value or category axis
    notes: tuple[str, ...] = ()                  # lines written in the panel's corner
    notes_low: bool = False                      # that corner is the lower left, not the upper left
    ylim: tuple[float, ...] = ()                 # (low, high): a percentage's whole 0 to 100


@dataclass(frozen=True)
class Plot:
    title: str
    xlabel: str                                  # the axis the line and mark panels share
    panels: tuple[Panel, ...]
    xlog: bool = False
    xticks: tuple[float, ...] = ()               # shown as plain numbers (chunk sizes)
    warnings: tuple[str, ...] = ()               # in red under the title
    captions: tuple[str, ...] = ()               # in grey under the warnings: the reasons for a decision


def plot_path(path: str | Path, inputs: Mapping[str, str | Path | None] | None = None) -> Path:
    """Where a plot may be written; checked before anything runs, not after. Nothing is
    overwritten but the file named: not what a symbolic link points to (`--plot link.png`
    wrote the PNG over the sheet it pointed to), nor a file the command reads (``inputs``, by
    what each is: `grader sheet run a.png --plot a.png` replaced the sheet with its picture)."""
    path = Path(path)
    if path.suffix.lower() != ".png":
        raise InputError(str(path), "the plot is written as PNG: give a file name ending in .png")
    if path.is_symlink():
        raise InputError(str(path), f"is a symbolic link (to {os.readlink(path)}): the plot would be "
                                    "written over what it points to; name a file of its own")
    if not path.parent.is_dir():
        raise InputError(str(path), f"no such folder: {path.parent}")
    read = None
    if path.exists():
        read = next((what for what, i in (inputs or {}).items()
                     if i is not None and Path(i).exists() and os.path.samefile(path, i)), None)
    if read is not None:
        raise InputError(str(path), f"is {read} this command reads: name another file for the plot")
    if path.is_dir() or (path.exists() and not os.access(path, os.W_OK)) \
            or not os.access(path.parent, os.W_OK):
        raise InputError(str(path), "cannot write the plot there (a folder, or no permission)")
    return path


def _height(panel: Panel) -> float:
    if panel.bars is not None:
        return 0.3 * len(_slots(panel.bars)) + 1.4 if panel.bars.horizontal else 3.0
    if panel.marks and not panel.lines:
        return 0.42 * len({m.row for m in panel.marks}) + 1.0
    return 2.9


def save_plot(plot: Plot, path: str | Path) -> Path:
    """Draw ``plot`` into a PNG file; the cost-model note goes at the bottom."""
    path = plot_path(path)
    import matplotlib                      # here only: `grader check` never pays for it
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    # One style per label across panels: "rule budget" is the same colour and marker everywhere.
    style = styles(list(dict.fromkeys([line.label for p in plot.panels for line in p.lines]
                                      + [s for p in plot.panels if p.bars for s, _ in p.bars.series])))
    heights = [_height(p) for p in plot.panels]
    texts = [(line, tint, weight) for items, tint, weight in ((plot.warnings, "crimson", "bold"),
                                                              (plot.captions, "dimgray", "normal"))
             for item in items for line in textwrap.wrap(item, 110)]
    # Measured in inches from the top, not as a share of the figure: a tall figure (five
    # panels) would otherwise push its title down onto the first warning. tight_layout keeps
    # room for the title itself; the texts under it need room of their own.
    title_top = 0.08
    below = title_top + 0.08 + 0.19 * (plot.title.count("\n") + 1)   # to the first text
    top = 0.2 * len(texts) + (0.06 if texts else 0.0)
    height = sum(heights) + top + 0.3 + 0.19 * (plot.title.count("\n") + 1)
    # A line panel's legend stands right of its axes, where it covers neither a line nor the
    # panel's notes; the figure is widened by that column so the plotting area keeps its size.
    width = 8.0 + (LEGEND_WIDTH if any(p.bars is None and (p.lines or p.hlines) for p in plot.panels) else 0.0)
    fig, axes = plt.subplots(len(plot.panels), 1, squeeze=False, figsize=(width, height),
                             gridspec_kw={"height_ratios": heights})
    # Line and mark panels share the plot's x axis, unless a panel names an axis of its own.
    shared = [ax for ax, p in zip(axes[:, 0], plot.panels) if p.bars is None and not p.xlabel]
    for ax in shared[1:]:
        ax.sharex(shared[0])
    for ax, panel in zip(axes[:, 0], plot.panels):
        if panel.bars is not None:
            _bars(ax, panel, style)
        else:
            _lines(ax, panel, style)
            if panel.xlabel:
                ax.set_xlabel(panel.xlabel)
        if panel.notes:
            ax.text(0.01, 0.03 if panel.notes_low else 0.97, "\n".join(panel.notes), transform=ax.transAxes,
                    va="bottom" if panel.notes_low else "top", ha="left",
                    fontsize=7.5, bbox={"boxstyle": "round", "facecolor": "white", "alpha": 0.85,
                                        "edgecolor": "lightgray"})
    for ax in shared[:-1]:
        ax.tick_params(labelbottom=False)
    if shared:
        _shared_x(shared[-1], plot)
    fig.suptitle(plot.title, fontsize=11, y=1 - title_top / height, va="top")
    for i, (text, tint, weight) in enumerate(texts):
        fig.text(0.5, 1 - (below + 0.2 * i) / height, text,
                 ha="center", va="top", fontsize=8, color=tint, weight=weight)
    fig.text(0.5, 0.008, COST_MODEL_NOTE, ha="center", fontsize=7, style="italic")
    fig.tight_layout(rect=(0, 0.02, 1, 1 - (top + 0.08) / height))
    try:
        write_png(fig, path)
    except OSError as e:               # the disk filled, or the folder changed meanwhile
        raise InputError(str(path), f"cannot write the plot: {e.strerror or e}") from None
    finally:
        plt.close(fig)
    return path


def _lines(ax, panel: Panel, style: dict[str, Style]) -> None:
    from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter
    for line in panel.lines:
        st = style[line.label]
        if line.style == "dashed":
            ax.plot(line.x, line.y, label=line.label, **THRESHOLD)
        else:
            ax.plot(line.x, line.y, label=line.label, color=st.colour,
                    linestyle="none" if line.style == "points" else "--" if st.reference else "-",
                    **_marker(st, 7 if line.style == "points" else 4.5))
        if line.band:
            ax.fill_between(line.x, *line.band, color=st.colour, alpha=0.15, linewidth=0)
    for y, label in panel.hlines:
        ax.axhline(y, label=label, **THRESHOLD)
    if panel.marks:
        rows = list(dict.fromkeys(m.row for m in panel.marks))
        for m in panel.marks:
            ax.text(m.x, rows.index(m.row), m.text, ha="center", va="center", fontsize=8, weight="bold",
                    color=MARK_COLOURS.get(m.text, "black"))
        ax.set_yticks(range(len(rows)))
        ax.set_yticklabels(rows)
        ax.set_ylim(len(rows) - 0.5, -0.5)
        xs = [m.x for m in panel.marks]
        pad = (max(xs) - min(xs)) * 0.1 or 0.5
        ax.set_xlim(min(xs) - pad, max(xs) + pad)
    ax.set_ylabel(panel.ylabel)
    if panel.ylog:
        plain = FuncFormatter(lambda v, _: f"{v:g}")
        ax.set_yscale("log")
        ax.yaxis.set_major_locator(LogLocator(base=10, subs=(1.0, 2.0, 5.0)))
        ax.yaxis.set_major_formatter(plain)
        ax.yaxis.set_minor_formatter(NullFormatter())
    if panel.ylim:
        ax.set_ylim(*panel.ylim)
    ax.grid(True, alpha=0.3)
    if panel.lines or panel.hlines:
        handles, labels = ax.get_legend_handles_labels()
        ax.legend(handles, [textwrap.fill(label, 30) for label in labels], fontsize=7.5, loc="upper left",
                  bbox_to_anchor=(1.01, 1.0), borderaxespad=0.0)


LEGEND_WIDTH = 2.2     # inches of the column the line panels' legends stand in


def _marker(st: Style, size: float) -> dict:
    """A learner's (or the only) series: filled markers on top. The reference's twin: the
    same marker larger and hollow, underneath, so a learner's point on it shows inside it."""
    if st.reference:
        return {"marker": st.marker, "markersize": size * 1.7, "markerfacecolor": "none",
                "markeredgewidth": 1.3, "zorder": 2}
    return {"marker": st.marker, "markersize": size, "zorder": 3}


def _shared_x(ax, plot: Plot) -> None:
    if plot.xlog:
        ax.set_xscale("log", base=2)
    if plot.xticks:
        ax.set_xticks(plot.xticks)
        ax.set_xticklabels([f"{t:g}" for t in plot.xticks])
    ax.set_xlabel(plot.xlabel)


def _slots(b: Bars) -> list[tuple[int, int | None, float]]:
    """(category, series or None for "none", value) per bar position, packed or not."""
    out = []
    for c in range(len(b.categories)):
        mine = [(c, k, v) for cc, k, v in b.drawn() if cc == c]
        out += mine or [(c, None, 0.0)]
    return out


NO_BARS = "no row has figures to draw (the notes above say why)"


def _bars(ax, panel: Panel, style: dict[str, Style]) -> None:
    b = panel.bars
    if not b.categories:
        # Every row missing (a stub away from the recorded defaults): words, not empty axes
        # that matplotlib cannot even scale.
        ax.text(0.5, 0.5, NO_BARS, transform=ax.transAxes, ha="center", va="center",
                fontsize=9, color="dimgray")
        ax.set_xticks([])
        ax.set_yticks([])
        ax.set_title(panel.ylabel, fontsize=9, loc="left")
        return
    floor = 0.8 if b.log else 0.0
    values = [v for _, vs in b.series for v in vs]
    if b.pack or b.horizontal:
        # One bar per row, its group's rows together; the category label at their middle.
        slots = _slots(b) if b.pack else [(c, k, vs[c]) for c in range(len(b.categories))
                                          for k, (_, vs) in enumerate(b.series)]
        rows, centres, seen = {}, {}, set()
        for i, (c, k, v) in enumerate(slots):
            rows.setdefault(c, []).append(i)
        for c, at in rows.items():
            centres[c] = sum(at) / len(at)
        for i, (c, k, v) in enumerate(slots):
            if k is None:
                _bar_text(ax, b, i, floor, b.empty[c] if b.empty else "none", "dimgray")
                continue
            label = b.series[k][0]
            kw = {"label": label} if label not in seen else {}
            seen.add(label)
            length = (v - floor) if b.log else v
            if b.horizontal:
                ax.barh(i, max(length, 0.0), left=floor, height=0.8, **_fill(style[label], k), **kw)
            else:
                ax.bar(i, max(length, 0.0), bottom=floor, width=0.8, **_fill(style[label], k), **kw)
            # A packed bar is the one series of its row: its label names the series, so the
            # row reads without the legend's colours ("16 use-after-free").
            _bar_text(ax, b, i, max(v, floor), f"{v:{b.fmt}} {label}" if b.pack else format(v, b.fmt),
                      "black")
        ticks = [centres[c] for c in range(len(b.categories))]
        for c, at in rows.items():          # a faint line between groups
            if c:
                (ax.axhline if b.horizontal else ax.axvline)(at[0] - 0.5, color="lightgray", linewidth=0.8)
        extent = len(slots)
    else:
        n = max(1, len(b.series))
        width = 0.8 / n
        for k, (label, vs) in enumerate(b.series):
            at = [c - 0.4 + width * (k + 0.5) for c in range(len(b.categories))]
            ax.bar(at, [max(v, 0.0) for v in vs], width=width * 0.9, label=label, **_fill(style[label], k))
            for pos, v in zip(at, vs):
                _bar_text(ax, b, pos, v, format(v, b.fmt), "black")
        ticks = list(range(len(b.categories)))
        extent = len(b.categories)
    top = max(values + [b.least])
    if b.horizontal:
        ax.set_yticks(ticks)
        ax.set_yticklabels(b.categories, fontsize=8)
        ax.set_ylim(extent - 0.5, -0.5)
        if b.log:
            ax.set_xscale("log")
            # Room right of the longest bar for its label (with its series' name when packed).
            ax.set_xlim(floor, top * (15 if b.pack else 6))
        else:
            ax.set_xlim(0, top * 1.2)
        ax.set_xlabel(panel.xlabel or panel.ylabel)
        ax.set_title(panel.ylabel, fontsize=9, loc="left")
        ax.grid(True, axis="x", alpha=0.3)
    else:
        ax.set_xticks(ticks)
        # Wrapped to the room each category has, so labels of neighbours never run together
        # (a learner's rows beside the reference's: "reference: key without scope").
        room = max(12, 96 // max(1, len(b.categories)))
        ax.set_xticklabels([textwrap.fill(c, room) for c in b.categories], fontsize=8)
        # Headroom above the bars for the legend and the notes.
        if b.log:
            ax.set_yscale("log")
            ax.set_ylim(floor, top * 60)
        else:
            ax.set_ylim(0, top * 1.75)
            if b.least == 100.0 and top <= 100.0:
                ax.set_yticks(range(0, 101, 20))     # a percentage: no ticks past 100
        ax.set_ylabel(panel.ylabel)
        if panel.xlabel:
            ax.set_xlabel(panel.xlabel)
        ax.grid(True, axis="y", alpha=0.3)
    for y, label in panel.hlines:
        (ax.axvline if b.horizontal else ax.axhline)(y, label=label, **THRESHOLD)
    named = False
    for c, y in enumerate(b.limits):
        if y is not None and not b.horizontal:
            ax.hlines(y, c - 0.45, c + 0.45, colors=THRESHOLD["color"], linestyles=THRESHOLD["linestyle"],
                      linewidth=1.6, label=None if named else b.limits_label)
            named = True
    # A packed bar's label names its series: no legend to look up.
    if not b.pack and (len(b.series) > 1 or panel.hlines or any(y is not None for y in b.limits)):
        if b.horizontal:
            ax.legend(fontsize=7.5, loc="lower right")
        else:
            # Above the axes, right-aligned: inside, it met the notes in the upper left
            # corner and the tallest bars' labels.
            ax.legend(fontsize=7.5, loc="lower right", bbox_to_anchor=(1.0, 1.0), borderaxespad=0.2,
                      ncol=min(3, len(ax.get_legend_handles_labels()[0])), frameon=False)


def _fill(st: Style, k: int) -> dict:
    """The bar of a panel's k-th series: its colour, and a hatch that tells it apart without colour."""
    hatch = HATCHES[k % len(HATCHES)]
    return {"color": st.colour, "hatch": hatch, "edgecolor": "white" if hatch else st.colour, "linewidth": 0.0}


def _bar_text(ax, b: Bars, at: float, end: float, text: str, colour: str) -> None:
    if b.horizontal:
        ax.text(end * (1.06 if b.log else 1.0), at, f" {text}", va="center", fontsize=7, color=colour)
    else:
        ax.text(at, end * (1.06 if b.log else 1.0), text, ha="center", va="bottom", fontsize=7, color=colour)
