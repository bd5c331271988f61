"""What a run leaves behind: violations as they happen, and at the end the records, the
step log and the time series (reference.records).
"""
from __future__ import annotations

import numpy as np

from array import array

from reference.records import SERIES, Records, Run, Series, StepLog, Violation
from reference.worker.sequence import Sequence

# Rows kept as tuples before they move into columns: a row tuple costs about 200 bytes, a
# column entry 8, so a run's steps (millions at 100k requests) stay compact.
SPILL_ROWS = 4096
# The typecodes of a step row (steps.py: StepLog's columns, then the series' after time_s);
# "s" holds strings in a list.
_ROW = "ddqqssqqqqqqq"


def _column(values: array, dtype) -> np.ndarray:
    """An array.array as a numpy column, without a copy."""
    return np.frombuffer(values, dtype=dtype) if len(values) else np.zeros(0, dtype)


class StepColumns:
    """The step log and the series as columns, filled from rows in batches."""

    def __init__(self):
        self.cols = [[] if code == "s" else array(code) for code in _ROW]

    def spill(self, rows: list) -> None:
        if rows:
            for col, values in zip(self.cols, zip(*rows)):
                col.extend(values)
            rows.clear()

    def columns(self) -> list:
        out = []
        for i, code in enumerate(_ROW):
            if code == "s":
                out.append(tuple(self.cols[i]))
                self.cols[i] = []     # one list and its tuple alive at a time, not every one
            else:
                out.append(_column(self.cols[i], np.float64 if code == "d" else np.int64))
        return out


class Recorder:
    def _finish_run(self) -> Run:
        unfinished = []
        for live in self.lives:
            if live.phase == "decode":
                self._leave_decode(live)   # an aborted run: the tokens it emitted stay on record
            if live.phase in ("new", "queued", "prefill", "decode") and not live.outcome:
                live.outcome = "failed"
                if self.aborted:
                    # Not the request's doing: the run stopped under it (before it even
                    # arrived, for "new"). It counts as failed, and the run lists it, so no
                    # summary can pass the truncation off as done.
                    unfinished.append(live.req.id)
                    where = "not arrived" if live.phase == "new" else live.phase
                    live.reason = f"unfinished ({where} when the run stopped): {self.aborted}"
                else:
                    live.reason = ("never admitted: waited until the end of the run"
                                   if live.phase == "queued" else "did not finish")
            if live.pages and live.outcome in ("completed", "cancelled_by_client"):
                self._violate("leak", live, pages=tuple(live.pages), detail=(
                    f"{live.req.id} ({live.outcome}) still holds {len(live.pages)} pages at the "
                    f"end of the run, e.g. {live.pages[:4]}"))
        ends = _column(self.step_end, np.float64)
        records = Records(tuple(self._row(live) for live in self.lives), ends)
        self.step_columns.spill(self.step_rows)
        cols = self.step_columns.columns()
        # The series' time is the step's launch: one column serves both.
        steps = StepLog(*cols[:7])
        series = Series(dict(zip(SERIES, cols[:1] + cols[7:])))
        return Run(records, steps, series, tuple(self.violations), self.pool.total,
                   self.now, self.aborted, tuple(unfinished))

    def _row(self, live: Sequence) -> tuple:
        """A request's record without its token times (Records builds them on access)."""
        r = live.req
        segments, steps = tuple(live.segments), range(len(self.step_end))
        tokens_out = sum(len(steps[seg[0]:seg[1]]) if isinstance(seg, tuple) else 1
                         for seg in segments)
        return ((r.id, r.scope, r.cls, r.slo, r.arrival_s, live.outcome, r.prompt_tokens,
                 r.max_new_tokens, tokens_out, None, live.admitted_s, live.first_token_s,
                 live.finish_s if live.outcome == "completed" else None, live.cancel_s,
                 live.fence_s, live.released_s, live.preemptions, live.max_pages, live.reason),
                segments)

    def _violate(self, kind: str, *lives: Sequence, pages: tuple = (), step: int | None = None,
                 detail: str = "") -> None:
        self.violations.append(Violation(kind, self.now, tuple(l.req.id for l in lives),
                                         tuple(pages), step, detail))

    def _flag(self, live: Sequence, kind: str, detail: str) -> None:
        """A violation counted once per request (a retry repeats it, it is not a new one)."""
        if kind not in live.flagged:
            if not live.flagged:
                live.flagged = set()
            live.flagged.add(kind)
            self._violate(kind, live, detail=detail)

