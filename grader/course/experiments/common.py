"""What every experiment shares: knobs set with --set, a table (terminal and JSON), a PNG plot,
and the measures read off a worker run (token gaps, TTFT).

An experiment describes its plot as data (panels of lines, points and reference lines);
``save_plot`` draws it with matplotlib, imported only here and only when a plot is asked
for, so nothing else in the grader pays for it.
"""
from __future__ import annotations

import math
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping, Sequence

import numpy as np

from grader.engine.errors import InputError
from grader.engine.report import COST_MODEL_NOTE
from reference.records import Run

# ---- knobs ------------------------------------------------------------------------------------
KINDS = ("float", "int", "ints", "words")


@dataclass(frozen=True)
class Knob:
    """One constraint an experiment lets the user change: ``--set name=value``."""
    name: str
    default: Any
    help: str
    kind: str = "float"                  # float | int | ints (comma list) | words (comma list)
    minimum: float | None = None         # numbers (and each item of ints) must be >= this
    choices: tuple[str, ...] = ()        # words must be among these

    def parse(self, text: str, where: str) -> Any:
        items = [t.strip() for t in text.split(",")] if self.kind in ("ints", "words") else [text.strip()]
        if not all(items):
            raise InputError(where, f"{self.name}: expected {self._expects()}, got {text!r}")
        try:
            if self.kind == "float":
                values = [float(items[0])]
                if not math.isfinite(values[0]):
                    raise ValueError
            elif self.kind in ("int", "ints"):
                values = [int(t) for t in items]
            else:
                values = items
        except ValueError:
            raise InputError(where, f"{self.name}: expected {self._expects()}, got {text!r}") from None
        for v in values:
            if self.minimum is not None and v < self.minimum:
                raise InputError(where, f"{self.name}: must be >= {self.minimum:g}, got {v}")
            if self.choices and v not in self.choices:
                raise InputError(where, f"{self.name}: {v!r} is not one of {', '.join(self.choices)}")
        return tuple(values) if self.kind in ("ints", "words") else values[0]

    def _expects(self) -> str:
        return {"float": "a number", "int": "an integer", "ints": "integers separated by commas",
                "words": f"names separated by commas ({', '.join(self.choices)})"}[self.kind]


def parse_settings(experiment: str, knobs: Sequence[Knob], assignments: Sequence[str]) -> dict:
    """Every knob's value: its default, unless an assignment ``key=value`` changes it."""
    table = {k.name: k for k in knobs}
    settings = {k.name: k.default for k in knobs}
    for text in assignments:
        key, sep, value = text.partition("=")
        key = key.strip()
        where = f"--set {text}"
        if not sep:
            raise InputError(where, "expected key=value")
        if key not in table:
            raise InputError(where, f"{experiment} has no setting {key!r} "
                                    f"(settings: {', '.join(sorted(table))})")
        settings[key] = table[key].parse(value, where)
    return settings


# ---- tables -----------------------------------------------------------------------------------
@dataclass(frozen=True)
class Column:
    key: str
    title: str
    fmt: str = ""          # format spec for numbers ("" = str())


@dataclass(frozen=True)
class Table:
    columns: tuple[Column, ...]
    rows: tuple[Mapping[str, Any], ...]

    def render(self) -> str:
        cells = [[c.title for c in self.columns]]
        for row in self.rows:
            cells.append([_cell(row.get(c.key), c.fmt) for c in self.columns])
        widths = [max(len(r[i]) for r in cells) for i in range(len(self.columns))]
        lines = []
        for n, r in enumerate(cells):
            first = r[0].ljust(widths[0])
            rest = [v.rjust(w) for v, w in zip(r[1:], widths[1:])]
            lines.append("  " + "  ".join([first, *rest]).rstrip())
            if n == 0:
                lines.append("  " + "  ".join("-" * w for w in widths))
        return "\n".join(lines)


def _cell(value: Any, fmt: str) -> str:
    if value is None:
        return "-"
    if isinstance(value, float) and not math.isfinite(value):
        return "-"
    return format(value, fmt) if fmt and isinstance(value, (int, float)) else str(value)


def _plain(value: Any) -> Any:
    if isinstance(value, (np.integer, np.floating)):
        value = value.item()
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, (tuple, list)):
        return [_plain(v) for v in value]
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    return value


# ---- plots ------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Line:
    label: str
    x: tuple[float, ...]
    y: tuple[float, ...]
    style: str = "line"    # line (joined markers) | points (markers only)
    band: tuple[tuple[float, ...], tuple[float, ...]] = ()   # (low, high) per x: a shaded noise band


@dataclass(frozen=True)
class Panel:
    ylabel: str
    lines: tuple[Line, ...]
    hlines: tuple[tuple[float, str], ...] = ()   # (y, label): a budget, a target
    ylog: bool = False


@dataclass(frozen=True)
class Plot:
    title: str
    xlabel: str
    panels: tuple[Panel, ...]
    xlog: bool = False
    xticks: tuple[float, ...] = ()               # shown as plain numbers (chunk sizes)


def plot_path(path: str | Path) -> Path:
    """Where a plot may be written; checked before an experiment runs, not after."""
    path = Path(path)
    if path.suffix.lower() != ".png":
        raise InputError(str(path), "the plot is written as PNG: give a file name ending in .png")
    if not path.parent.is_dir():
        raise InputError(str(path), f"no such folder: {path.parent}")
    if path.is_dir() or (path.exists() and not os.access(path, os.W_OK)) \
            or not os.access(path.parent, os.W_OK):
        raise InputError(str(path), "cannot write the plot there (a folder, or no permission)")
    return path


def save_plot(plot: Plot, path: str | Path) -> Path:
    """Draw ``plot`` into a PNG file; the cost-model note goes at the bottom."""
    path = plot_path(path)
    import matplotlib                      # here only: `grader check` never pays for it
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter

    plain = FuncFormatter(lambda v, _: f"{v:g}")
    # One colour per label across panels: "rule budget" is the same marker everywhere.
    labels = list(dict.fromkeys(line.label for panel in plot.panels for line in panel.lines))
    palette = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    colour = {label: palette[i % len(palette)] for i, label in enumerate(labels)}
    fig, axes = plt.subplots(len(plot.panels), 1, sharex=True, squeeze=False,
                             figsize=(7.5, 2.9 * len(plot.panels) + 0.8))
    for ax, panel in zip(axes[:, 0], plot.panels):
        for line in panel.lines:
            if line.style == "points":
                ax.plot(line.x, line.y, linestyle="none", marker="D", markersize=7, label=line.label,
                        color=colour[line.label])
            else:
                ax.plot(line.x, line.y, marker="o", markersize=4, label=line.label,
                        color=colour[line.label])
            if line.band:
                ax.fill_between(line.x, *line.band, color=colour[line.label], alpha=0.18, linewidth=0)
        for y, label in panel.hlines:
            ax.axhline(y, color="crimson", linestyle="--", linewidth=1.2, label=label)
        ax.set_ylabel(panel.ylabel)
        if panel.ylog:
            ax.set_yscale("log")
            ax.yaxis.set_major_locator(LogLocator(base=10, subs=(1.0, 2.0, 5.0)))
            ax.yaxis.set_major_formatter(plain)
            ax.yaxis.set_minor_formatter(NullFormatter())
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=8, loc="best")
    bottom = axes[-1, 0]
    if plot.xlog:
        bottom.set_xscale("log", base=2)
    if plot.xticks:
        bottom.set_xticks(plot.xticks)
        bottom.set_xticklabels([f"{t:g}" for t in plot.xticks])
    bottom.set_xlabel(plot.xlabel)
    fig.suptitle(plot.title)
    fig.text(0.5, 0.01, COST_MODEL_NOTE, ha="center", fontsize=7, style="italic")
    fig.tight_layout(rect=(0, 0.03, 1, 1))
    try:
        fig.savefig(path, dpi=110)
    except OSError as e:               # the disk filled, or the folder changed meanwhile
        raise InputError(str(path), f"cannot write the plot: {e.strerror or e}") from None
    finally:
        plt.close(fig)
    return path


# ---- an experiment's result -------------------------------------------------------------------
@dataclass(frozen=True)
class Outcome:
    experiment: str
    title: str
    settings: Mapping[str, Any]
    table: Table
    plot: Plot | None = None
    notes: tuple[str, ...] = field(default_factory=tuple)

    def render(self) -> str:
        changed = ", ".join(f"{k}={_show(v)}" for k, v in self.settings.items())
        lines = [f"{self.experiment}: {self.title}", f"  settings: {changed}", "", self.table.render(), ""]
        lines += [f"  note: {n}" for n in self.notes]
        lines.append(f"  {COST_MODEL_NOTE}")
        return "\n".join(lines)

    def to_dict(self) -> dict:
        return {"experiment": self.experiment, "title": self.title,
                "settings": _plain(dict(self.settings)),
                "columns": [{"key": c.key, "title": c.title} for c in self.table.columns],
                "rows": [_plain(dict(r)) for r in self.table.rows],
                "notes": list(self.notes), "cost_model": COST_MODEL_NOTE}


def _show(value: Any) -> str:
    return ",".join(map(str, value)) if isinstance(value, tuple) else f"{value:g}" if isinstance(
        value, float) else str(value)


# ---- measures of a run ------------------------------------------------------------------------
def token_gaps(run: Run, start_s: float = -math.inf, end_s: float = math.inf) -> np.ndarray:
    """Every gap between consecutive tokens of completed requests, optionally only those whose
    later token came in [start_s, end_s]."""
    gaps = []
    for r in run.requests:
        if r.outcome == "completed" and len(r.token_times) > 1:
            times = np.asarray(r.token_times)
            keep = (times[1:] >= start_s) & (times[1:] <= end_s)
            gaps.append(np.diff(times)[keep])
    return np.concatenate(gaps) if gaps else np.zeros(0)


def ttfts(run: Run, ids: set[str] | None = None) -> np.ndarray:
    """Time to first token of every request that got one (of ``ids`` when given)."""
    return np.asarray([r.first_token_s - r.arrival_s for r in run.requests
                       if r.first_token_s is not None and (ids is None or r.id in ids)])


def percentile(values: np.ndarray, q: float) -> float:
    return float(np.percentile(values, q)) if len(values) else math.nan
