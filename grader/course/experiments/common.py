"""What every experiment shares: knobs set with --set, a table (terminal and JSON), a PNG plot,
and the measures read off a worker run (token gaps, TTFT).

An experiment describes its plot as data (grader.course.plots: panels of lines, marks and
bars); ``save_plot`` draws it with matplotlib, imported only when a plot is asked for. A
table wider than the terminal's 100 columns is wrapped: the first column, then as many
of the others as fit, again for the rest.
"""
from __future__ import annotations

import math
import textwrap
from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

import numpy as np

from grader.course.plots import Bars, Line, Mark, Panel, Plot, plot_path, save_plot  # noqa: F401
from grader.course.trials import TRUNCATED
from grader.engine.errors import InputError
from grader.engine.report import COST_MODEL_NOTE
from reference.records import Run, columns, token_times_of, within_request

WIDTH = 100            # a table wider than this is wrapped

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
    # ... and <= this: a size that would run for hours, or a share past its whole, is a typo
    # to refuse, not a run to start (the settings multiply; docs/experiments.md).
    maximum: float | None = None
    choices: tuple[str, ...] = ()        # words must be among these
    # ints: at most this many items. Each item is a row, a worker run or more: bounding only
    # each item's size let chunks=1,2,...,5000 start a run of half an hour, silently.
    max_items: int | None = None

    def parse(self, text: str, where: str) -> Any:
        items = [t.strip() for t in text.split(",")] if self.kind in ("ints", "words") else [text.strip()]
        # Python's int() and float() read any script's digits ("１２", "٣"): a value the
        # settings line then shows as another text than the one typed. ASCII only, as the
        # design sheet's YAML reads numbers.
        if not all(items) or not text.isascii():
            raise InputError(where, f"{self.name}: expected {self._expects()}, got {text!r}")
        if self.max_items is not None and len(items) > self.max_items:
            raise InputError(where, f"{self.name}: at most {self.max_items} items, got {len(items)}")
        try:
            if self.kind == "float":
                values = [float(items[0]) + 0.0]         # + 0.0: -0 is 0, not a "-0" in the title
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
                raise InputError(where, f"{self.name}: must be >= {_number(self.minimum)}, got {v}")
            if self.maximum is not None and v > self.maximum:
                raise InputError(where, f"{self.name}: must be <= {_number(self.maximum)}, got {v}")
            if self.choices and v not in self.choices:
                raise InputError(where, f"{self.name}: {v!r} is not one of {', '.join(self.choices)}")
        # One item twice in a list: a row run twice, or (goodput's candidates) quietly run
        # once while the settings line shows it twice; as with a key set twice, refused.
        twice = next((v for i, v in enumerate(values) if v in values[:i]), None)
        if twice is not None:
            raise InputError(where, f"{self.name}: {twice} is listed twice; give each once")
        return tuple(values) if self.kind in ("ints", "words") else values[0]

    def bounded(self) -> bool:
        """Has this knob both bounds, or is it no number (words are bounded by their choices)?"""
        return self.kind == "words" or (self.minimum is not None and self.maximum is not None
                                        and (self.kind != "ints" or self.max_items is not None))

    def shown_default(self) -> str:
        """The default as --set takes it: 0.1, 8192, 64,128,256, budget,fixed."""
        return _show(self.default)

    def bounds(self) -> str:
        """What a value must be, beyond its kind: '' when anything of the kind goes."""
        if self.choices:
            return f"; one or more of {', '.join(self.choices)}"
        each = "each " if self.kind == "ints" else ""
        if self.max_items is not None:
            each = f"at most {self.max_items}, {each}"
        low, high = (None if x is None else _number(x) for x in (self.minimum, self.maximum))
        if low is not None and high is not None:
            return f"; {each}{low} to {high}"
        if low is not None:
            return f"; {each}at least {low}"
        if high is not None:
            return f"; {each}at most {high}"
        return ""

    def _expects(self) -> str:
        return {"float": "a number", "int": "an integer", "ints": "integers separated by commas",
                "words": f"names separated by commas ({', '.join(self.choices)})"}[self.kind]


def _number(x: float) -> str:
    """A bound as a person writes it: 1048576, not 1.04858e+06; 1e-06 and 0.01 as they are."""
    return str(int(x)) if float(x).is_integer() and abs(x) < 1e15 else f"{x:g}"


def parse_settings(experiment: str, knobs: Sequence[Knob], assignments: Sequence[str]) -> dict:
    """Every knob's value: its default, unless an assignment ``key=value`` changes it."""
    table = {k.name: k for k in knobs}
    settings = {k.name: k.default for k in knobs}
    given: dict[str, str] = {}
    for text in assignments:
        key, sep, value = text.partition("=")
        key = key.strip()
        where = f"--set {text}"
        if not sep:
            raise InputError(where, "expected key=value")
        if key not in table:
            raise InputError(where, f"{experiment} has no setting {key!r} "
                                    f"(settings: {', '.join(sorted(table))})")
        if key in given:
            # Two values for one setting: which was meant is not for the grader to pick.
            raise InputError(where, f"{key} is set twice (--set {given[key]} before); give it once")
        given[key] = text
        settings[key] = table[key].parse(value, where)
    return settings


# ---- tables -----------------------------------------------------------------------------------
@dataclass(frozen=True)
class Column:
    key: str
    title: str             # "\n" splits it over two header lines
    fmt: str = ""          # format spec for numbers ("" = str())


@dataclass(frozen=True)
class Table:
    columns: tuple[Column, ...]
    rows: tuple[Mapping[str, Any], ...]
    keys: int = 1          # leading columns that name a row: every wrapped block repeats them

    def render(self, width: int = WIDTH) -> str:
        """The table as text, wrapped into blocks no wider than ``width`` when it must be:
        each block repeats the key columns."""
        heads = [c.title.split("\n") for c in self.columns]
        cells = [[_cell(row.get(c.key), c.fmt) for c in self.columns] for row in self.rows]
        widths = [max([len(t) for t in heads[i]] + [len(r[i]) for r in cells])
                  for i in range(len(self.columns))]
        keys = list(range(min(self.keys, len(self.columns))))
        blocks, block = [], list(keys)
        for i in range(len(keys), len(self.columns)):
            if len(block) > len(keys) and 2 + sum(widths[j] + 2 for j in block) + widths[i] > width:
                blocks.append(block)
                block = list(keys)
            block.append(i)
        blocks.append(block)
        out = []
        for block in blocks:
            depth = max(len(heads[i]) for i in block)
            top = [[""] * (depth - len(heads[i])) + heads[i] for i in block]
            lines = [_row([h[k] for h in top], [widths[i] for i in block]) for k in range(depth)]
            lines.append("  " + "  ".join("-" * widths[i] for i in block))
            lines += [_row([r[i] for i in block], [widths[i] for i in block]) for r in cells]
            out.append("\n".join(lines))
        return "\n\n".join(out)


def _row(values: list[str], widths: list[int]) -> str:
    first = values[0].ljust(widths[0])
    rest = [v.rjust(w) for v, w in zip(values[1:], widths[1:])]
    return ("  " + "  ".join([first, *rest])).rstrip()


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
        lines = [f"{self.experiment}: {self.title}",
                 textwrap.fill(changed, WIDTH, initial_indent="  settings: ", subsequent_indent="    "),
                 "", self.table.render(), ""]
        lines += [textwrap.fill(n, WIDTH, initial_indent="  note: ", subsequent_indent="        ",
                                break_on_hyphens=False) for n in self.notes]
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


# The notes a plot must carry too: without them the picture misleads. A truncated run, a
# learner's functions that are not implemented or gave no usable answer (only the
# reference's series are drawn) or that failed on calls (the worker's fallback drew those
# series) or that are only partly written (a baseline drew the rest: lesson 4's "release at
# cancel" strawman on the baseline's on_event shows no use-after-free) are warnings; that
# the reference's series are missing (the learner edition, at other settings) is a caption.
# The notes are written with these very phrases (trials.truncation, plugged.Sides), so a
# reworded note cannot drop its warning from the plot.
NOT_IMPLEMENTED = ": not implemented: "
CALLS_FAILED = "your functions failed on some calls"
NO_USABLE_ANSWER = "gave no usable answer on any call"
NO_REFERENCE_ROWS = "the reference's rows are not available"
REFUSED = "the worker could not use"
PARTLY_BASELINE = "your rows are partly the course baseline's: "
WARN = (TRUNCATED, NOT_IMPLEMENTED, CALLS_FAILED, NO_USABLE_ANSWER, REFUSED, PARTLY_BASELINE)
TELL = (NO_REFERENCE_ROWS,)


def plot_notes(notes: Sequence[str]) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """(warnings, captions) of a plot: the notes of ``notes`` its reader must not miss."""
    return (tuple(n for n in notes if any(w in n for w in WARN)),
            tuple(n for n in notes if any(t in n for t in TELL)))


def refused(runs: Sequence[tuple[str, Run]], functions: Sequence[str]) -> list[str]:
    """A note when the worker refused answers of ``functions`` in ``runs`` ((label, run)
    pairs). An answer of the right type can still be one the worker cannot use (a chunk of a
    billion tokens, a state the machine does not have): the sandbox's checks pass it, the
    worker records an invalid decision and takes its safe fallback, and the row's figures,
    the fallback's, read as the learner's rule. Every answer refused, the rows showed 64-token
    chunks that never missed the budget, with no note at all. A call that failed outright
    (the worker shows its answer as None) is the call log's to count (CALLS_FAILED)."""
    per, first = {}, ""
    for label, run in runs:
        mine = [v.detail for v in run.violations
                if v.kind == "invalid_decision" and v.detail.startswith(tuple(functions))
                and not _failed_call(v.detail)]
        if mine:
            per[label] = per.get(label, 0) + len(mine)
            first = first or mine[0]
    if not per:
        return []
    where = ", ".join(f"{label}: {n}" for label, n in per.items())
    return [f"{REFUSED} some of your answers and took its safe fallback there, so those figures are "
            f"partly the fallback's: {sum(per.values())} invalid decisions recorded, once a request"
            f"{' and once a run for each on_event entry' if 'on_event' in functions else ''} ({where}); "
            f"first: {first}"]


def _failed_call(detail: str) -> bool:
    """The worker's words for a decision it could not obtain at all (reference/worker: the
    answer is shown as None; a learner's value is shown by its repr, a str in quotes)."""
    return "returned None" in detail or detail.endswith("usable key: None")


# ---- measures of a run ------------------------------------------------------------------------
def token_gaps(run: Run, start_s: float = -math.inf, end_s: float = math.inf) -> np.ndarray:
    """Every gap between consecutive tokens of completed requests, optionally only those whose
    later token came in [start_s, end_s]."""
    times, counts = token_times_of(run.requests, "completed")
    later = times[1:]
    return np.diff(times)[within_request(counts) & (later >= start_s) & (later <= end_s)]


def ttfts(run: Run, ids: set[str] | None = None) -> np.ndarray:
    """Time to first token of every request that got one (of ``ids`` when given)."""
    first, arrival, named = columns(run.requests, "first_token_s", "arrival_s", "id")
    return np.asarray([f - a for f, a, i in zip(first, arrival, named)
                       if f is not None and (ids is None or i in ids)])


def percentile(values: np.ndarray, q: float) -> float:
    return float(np.percentile(values, q)) if len(values) else math.nan
