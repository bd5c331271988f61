"""What a run leaves behind: violations as they happen, and at the end the records, the
step log and the time series (reference.records).
"""
from __future__ import annotations

import numpy as np

from reference.records import SERIES, Run, Series, StepLog, Violation
from reference.shapes import RequestRecord
from reference.worker.sequence import Sequence


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
        ends = np.asarray(self.step_end, dtype=np.float64)
        records = tuple(self._record(live, ends) for live in self.lives)
        rows = list(zip(*self.step_rows)) or [()] * 7
        steps = StepLog(np.asarray(rows[0], np.float64), np.asarray(rows[1], np.float64),
                        np.asarray(rows[2], np.int64), np.asarray(rows[3], np.int64),
                        tuple(rows[4]), tuple(rows[5]), np.asarray(rows[6], np.int64))
        cols = list(zip(*self.series_rows)) or [()] * len(SERIES)
        series = Series({name: np.asarray(col, np.float64 if name == "time_s" else np.int64)
                         for name, col in zip(SERIES, cols)})
        return Run(records, steps, series, tuple(self.violations), self.pool.total,
                   self.now, self.aborted, tuple(unfinished))

    def _record(self, live: Sequence, ends: np.ndarray) -> RequestRecord:
        times: list[float] = []
        for seg in live.segments:
            if isinstance(seg, tuple):
                times.extend(ends[seg[0]:seg[1]].tolist())
            else:
                times.append(seg)
        r = live.req
        return RequestRecord(id=r.id, scope=r.scope, cls=r.cls, slo=r.slo, arrival_s=r.arrival_s,
                             outcome=live.outcome, prompt_tokens=r.prompt_tokens,
                             max_new_tokens=r.max_new_tokens, tokens_out=len(times),
                             token_times=tuple(times), admitted_s=live.admitted_s,
                             first_token_s=live.first_token_s,
                             finish_s=live.finish_s if live.outcome == "completed" else None,
                             cancel_s=live.cancel_s, fence_s=live.fence_s,
                             released_s=live.released_s, preemptions=live.preemptions,
                             pages_held=live.max_pages, reason=live.reason)

    def _violate(self, kind: str, *lives: Sequence, pages: tuple = (), step: int | None = None,
                 detail: str = "") -> None:
        self.violations.append(Violation(kind, self.now, tuple(l.req.id for l in lives),
                                         tuple(pages), step, detail))

    def _flag(self, live: Sequence, kind: str, detail: str) -> None:
        """A violation counted once per request (a retry repeats it, it is not a new one)."""
        if kind not in live.flagged:
            live.flagged.add(kind)
            self._violate(kind, live, detail=detail)

