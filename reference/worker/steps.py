"""One step at a time: its launch (pages for decoders crossing a boundary, the prefill
chunk), its completion (tokens, first tokens, publishing, finishes) and decode bookkeeping;
and the stretches of steps that only decode, run in one loop (``_decode_steps``) with the
same rows, books and trace as one at a time.

Decoding is contiguous: every decoding request is in every step until it leaves, so its
context before step s is base_ctx + (s - join_step) and its token times are a range of
step end times.
"""
from __future__ import annotations

from reference.shapes import CHUNK_VERDICTS, ChunkContext, ChunkPlan
from reference.worker.decisions import is_count, shown
from reference.worker.recorder import SPILL_ROWS, VERDICT_CODE
from reference.worker.sequence import Sequence


class Steps:
    def _launch(self) -> None:
        index = self.completed
        self._grow_due(index)
        chunk_live, chunk, verdict = self._plan_chunk() if self.prefilling else (None, 0, "")
        decoding = len(self.decoding)
        if not decoding and chunk_live is None:
            return
        now, pool, rows = self.now, self.pool, self.step_rows
        # One row per step: the step log's columns, then the series' (its time is the launch).
        # The chunk's request and verdict are codes (recorder.py: _ROW).
        if chunk_live is None:
            duration = self.cost.decode_step_time(decoding, self.context_sum)
            rows.append((now, duration, decoding) + self._decode_books())
        else:
            duration = self.cost.step_time_of(decoding, self.context_sum, chunk, chunk_live.done)
            rows.append((now, duration, decoding, chunk, chunk_live.req.index + 1,
                         VERDICT_CODE[verdict], self.decode_pages + len(chunk_live.pages),
                         len(pool.free), len(pool.evictable), self.outstanding, self.running,
                         self.queued, self.prefix_hits))
        if len(rows) >= SPILL_ROWS:
            self.step_columns.spill(rows)
        end = now + duration
        self.inflight = (index, end, chunk_live, chunk)
        if self.trace is not None:
            ids = tuple(l.req.id for l in self.decoding.values())
            self.trace.append(("launch", now, index, ids if chunk_live is None else
                               ids + (chunk_live.req.id,)))
        if chunk_live is not None:
            chunk_live.last_step = index
            self._fire(chunk_live, "step_launched", True)
        if not self.quiet_launch:
            for live in list(self.decoding.values()):
                self._fire(live, "step_launched", True)

    def _plan_chunk(self):
        """The oldest prefilling request's chunk, sized by the chunk rule."""
        if not self.prefilling:
            return None, 0, ""
        live = next(iter(self.prefilling.values()))
        remaining = live.target - live.done
        index = self.completed
        contexts = tuple(l.base_ctx + index - l.join_step for l in self.decoding.values())
        ctx = ChunkContext(gap_budget_s=self.policy.gap_budget_s, cost=self.cost,
                           decode_contexts=contexts, prefill_done=live.done,
                           prefill_remaining=remaining, page_tokens=self.pt,
                           min_chunk_tokens=self.policy.min_chunk_tokens)
        plan = self._decide("choose_chunk", ChunkPlan, ctx)
        valid = (plan is not None and plan.verdict in CHUNK_VERDICTS and is_count(plan.tokens)
                 and plan.tokens <= remaining)
        if not valid:
            self._flag(live, "invalid_decision", f"choose_chunk returned {shown(plan)}")
        if valid and plan.verdict == "ok" and plan.tokens > 0:
            chunk = plan.tokens
        else:
            # The scheduler's floor: the prompt keeps moving at the minimum pace, and the
            # step may then miss the gap budget (the verdict is on record).
            chunk = min(max(self.policy.min_chunk_tokens, self.pt), remaining)
        if live.done + chunk == live.target:
            # The last chunk emits the first token, whose slot it writes too.
            while len(live.pages) * self.pt < live.target + 1:
                if not self._grow(live):
                    return self._plan_chunk()
        return live, chunk, plan.verdict if valid else "invalid"

    def _complete(self) -> None:
        index, end, chunk_live, chunk = self.inflight
        self.completed += 1
        self.inflight = None
        if self.trace is not None:
            self.trace.append(("complete", self.now, index))
        if self.orphans:
            self.orphans.clear()
        if self.freed_pinned:
            self.freed_pinned.clear()
        if self.decoding:
            self.progress_step = index + 1          # every decoder emitted a token
        self.context_sum += len(self.decoding)
        if chunk_live is not None and chunk_live.released_pages is None:
            chunk_live.done += chunk
            chunk_live.written = chunk_live.done
            self._publish(chunk_live)
            if chunk_live.phase == "prefill" and chunk_live.done == chunk_live.target:
                self._first_token(chunk_live, index)
        self._step_ends(index)

    def _grow_due(self, index: int) -> None:
        """A page for each decoder whose next token crosses into a new page at this step."""
        due = self.page_due.pop(index, None)
        if due:
            for live in due:
                if live.phase == "decode" and self._page_step(live) == index and self._grow(live):
                    self._schedule_page(live)

    def _decode_books(self) -> tuple:
        """A decode-only step's row after its time, duration and decoders (recorder.py: _ROW)."""
        pool = self.pool
        return (0, 0, 0, self.decode_pages, len(pool.free), len(pool.evictable), self.outstanding,
                self.running, self.queued, self.prefix_hits)

    def _decode_steps(self, next_at: float) -> None:
        """Steps that only decode, launched and completed in one loop, as run() would one
        by one: the same rows, books and trace, without the event loop's round per step.

        Most of a run's steps are these: between two client events, with nothing prefilling,
        nothing cancelling and no queue head to ask again, what can happen at a step is a
        decoder's new page (which can preempt) or its last token (which ends it). Between
        two endings the steps form a stretch in which only the time, the decoders' context
        and, at a new page, the page counts move, so its rows share everything else. The
        loop stops where run() must take over: at a step ending after the next client event
        (run() launches it and takes the event while it flies), at a page that preempts or
        lets a queue head ask again, after an ending, and one step before the step cap
        (run() says why it stops)."""
        decoding, rows, trace = self.decoding, self.step_rows, self.trace
        step_time = self.cost.decode_step_time
        page_due, finish_due, last = self.page_due, self.finish_due, self.max_steps - 1
        while decoding and not self.prefilling and not self.cancelling and self._head_waits():
            index = self.completed
            if index >= last:
                return
            first, n, context, now = index, len(decoding), self.context_sum, self.now
            books = self._decode_books()
            if self.check:
                self._assert_books()     # a stretch changes no page, promise or queue
            ids = tuple(l.req.id for l in decoding.values()) if trace is not None else ()
            while index < last:
                if index in page_due:
                    # Decoders' new pages, at this step's launch, on the books as they stand.
                    self.now, self.context_sum, self.completed = now, context, index
                    if index > first:
                        self.progress_step = index
                    self._grow_due(index)
                    if self.queued:
                        # A preemption, or a queue head that the new pages let ask again at
                        # this step's completion: run() launches it.
                        return
                    books = self._decode_books()
                    if self.check:
                        self._assert_books()
                duration = step_time(n, context)
                end = now + duration
                if end > next_at:
                    break
                rows.append((now, duration, n) + books)
                if len(rows) >= SPILL_ROWS:
                    self.step_columns.spill(rows)
                if trace is not None:
                    trace += (("launch", now, index, ids), ("complete", end, index))
                now, context, index = end, context + n, index + 1
                if index - 1 in finish_due:
                    break
            if index == first:
                return
            self.now, self.context_sum, self.completed = now, context, index
            # No step was in flight when the stretch began (the last completion cleared the
            # pages pinned by it) and none flies in it, so no page was freed under one.
            self.progress_step = index          # every decoder emitted a token at every step
            if index - 1 in finish_due:
                self._step_ends(index - 1)
            # run() retries the queue's head after every completion.
            self.retry = False
            if self.waiting:
                self._admit_waiting()

    def _head_waits(self) -> bool:
        """Would retrying the queue's head at a completion change nothing, as long as no page,
        promise or running count changes? (admission.py: the head is asked again only once
        what it would be shown has changed.) Requests stopped while queued leave the head
        first, as a retry would take them."""
        waiting = self.waiting
        while waiting and waiting[0].phase != "queued":
            waiting.popleft()
        return (not waiting or self.running >= self.spec.max_running
                or waiting[0].waited == self._shown())

    def _step_ends(self, index: int) -> None:
        """What a completed step ends: its decoders' last tokens, and the state machine told."""
        for live in self.finish_due.pop(index, ()):
            if live.phase == "decode" and self._finish_step(live) == index:
                self._end(live, "completed")
        if not self.quiet_complete:
            for live in list(self.decoding.values()):
                self._fire(live, "step_completed", False)
        for key in sorted(self.cancelling) if self.cancelling else ():
            live = self.cancelling.get(key)
            if live is not None:
                self._fire(live, "step_completed", False)

    def _first_token(self, live: Sequence, index: int) -> None:
        del self.prefilling[live.req.index]
        live.segments.append(self.now)
        live.emitted += 1
        self.progress_step = index + 1
        if live.first_token_s is None:
            live.first_token_s = self.now
        if live.emitted >= live.req.output_tokens:
            return self._end(live, "completed")
        live.phase = "decode"
        live.join_step, live.base_ctx = index + 1, live.target + 1
        self.decoding[live.req.index] = live
        self.context_sum += live.base_ctx
        self.decode_pages += len(live.pages)
        self._schedule_page(live)
        self.finish_due.setdefault(self._finish_step(live), []).append(live)

    def _emitted(self, live: Sequence) -> int:
        return live.emitted + self.completed - live.join_step

    def _page_step(self, live: Sequence) -> int:
        return live.join_step + len(live.pages) * self.pt - live.base_ctx

    def _finish_step(self, live: Sequence) -> int:
        return live.join_step + live.req.output_tokens - live.emitted - 1

    def _schedule_page(self, live: Sequence) -> None:
        self.page_due.setdefault(self._page_step(live), []).append(live)

    def _leave_decode(self, live: Sequence) -> None:
        del self.decoding[live.req.index]
        steps = self.completed
        flying = self.inflight is not None and live.join_step <= self.inflight[0]
        live.last_step = self.inflight[0] if flying else steps - 1
        live.segments.append((live.join_step, steps))
        self.context_sum -= live.base_ctx + steps - live.join_step
        self.decode_pages -= len(live.pages)

