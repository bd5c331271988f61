"""What a run leaves behind: violations as they happen, and at the end the records, the
step log and the time series (reference.records).
"""
from __future__ import annotations

import numpy as np

from array import array

from reference.records import SERIES, Labels, Records, Run, Series, StepLog, Violation
from reference.shapes import CHUNK_VERDICTS
from reference.worker.sequence import Sequence

# Rows kept as tuples before they move into columns: a row tuple costs about 200 bytes, a
# column entry 4 or 8, so a run's steps (millions at 100k requests) stay compact.
SPILL_ROWS = 4096
# The typecodes of a step row (steps.py: StepLog's columns, then the series' after time_s).
# "d" is float64. "i" is an integer column held as int32 until a value needs more, when the
# column widens to int64: exact either way, and half the memory for the counts of every run
# whose policy promises fewer than 2**31 pages. chunk_request is the request's index + 1
# (0: no chunk) and chunk_verdict a code into VERDICTS ("b", int8); Labels reads them as
# strings.
_ROW = "ddiiibiiiiiii"
_WIDER = {"b": "i", "i": "q"}
_DTYPE = {"d": np.float64, "b": np.int8, "i": np.int32, "q": np.int64}
VERDICTS = ("",) + CHUNK_VERDICTS + ("invalid",)
VERDICT_CODE = {v: i for i, v in enumerate(VERDICTS)}
_CHUNK_REQUEST, _CHUNK_VERDICT = 4, 5


def _column(values: array) -> np.ndarray:
    """An array.array as a numpy column, without a copy."""
    dtype = _DTYPE[values.typecode]
    return np.frombuffer(values, dtype=dtype) if len(values) else np.zeros(0, dtype)


class StepColumns:
    """The step log and the series as columns, filled from rows in batches."""

    def __init__(self):
        self.cols = [array(code) for code in _ROW]

    def spill(self, rows: list) -> None:
        if rows:
            for i, values in enumerate(zip(*rows)):
                col = self.cols[i]
                size = len(col)
                try:
                    col.extend(values)
                except OverflowError:
                    # extend() keeps the values before the one that did not fit: drop them,
                    # widen the column and add them all again.
                    del col[size:]
                    while True:
                        col = self.cols[i] = array(_WIDER[col.typecode], col)
                        try:
                            col.extend(values)
                            break
                        except OverflowError:
                            del col[size:]
            rows.clear()

    def columns(self, request_ids: tuple[str, ...]) -> list:
        """The columns as numpy arrays and, for the two string columns, Labels over
        ``request_ids`` (indexed by a request's index + 1; "" first)."""
        out = [_column(col) for col in self.cols]
        out[_CHUNK_REQUEST] = Labels(out[_CHUNK_REQUEST], request_ids)
        out[_CHUNK_VERDICT] = Labels(out[_CHUNK_VERDICT], VERDICTS)
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
            if not live.outcome:
                # Only a request stopped for good is left without one here: its state machine
                # stopped it on an event that was neither its cancel nor its finish, so it
                # will never complete, and no later event of its own comes.
                live.outcome = "failed"
                live.reason = "stopped by its state machine without a cancel or a finish"
            # An ended request holds nothing: completed, cancelled, or stopped for good (what
            # it holds then, nothing will release). A run stopped under it is not its doing.
            ended = live.phase == "stopped" or live.outcome in ("completed", "cancelled_by_client")
            if live.pages and ended:
                self._violate("leak", live, pages=tuple(live.pages), detail=(
                    f"{live.req.id} ({live.outcome}) still holds {len(live.pages)} pages at the "
                    f"end of the run, e.g. {live.pages[:4]}"))
        self.step_columns.spill(self.step_rows)
        ids = [""] * (max((l.req.index for l in self.lives), default=-1) + 2)
        for live in self.lives:
            ids[live.req.index + 1] = live.req.id
        cols = self.step_columns.columns(tuple(ids))
        # A record's token times are step ends: launch + duration, added when it is read.
        records = Records(tuple(self._row(live) for live in self.lives), cols[0], cols[1])
        # The series' time is the step's launch: one column serves both.
        steps = StepLog(*cols[:7])
        series = Series(dict(zip(SERIES, cols[:1] + cols[7:])))
        return Run(records, steps, series, tuple(self.violations), self.pool.total,
                   self.now, self.aborted, tuple(unfinished))

    def _row(self, live: Sequence) -> tuple:
        """A request's record without its token times (Records builds them on access)."""
        r = live.req
        segments, steps = tuple(live.segments), range(self.completed)
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

