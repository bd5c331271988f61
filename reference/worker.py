"""The course's one worker: a discrete-event simulation of a paged-KV serving worker.

Read top to bottom: ``simulate`` pops events (step completion, client cancel, arrival),
and each handler below does what worker.md says of that event. One step is in flight at
a time; admissions (and their prompt-page allocations) happen while it runs, which is
what makes early reclamation dangerous. Policies decide; the worker keeps the books and
records every violation it can see, with the request and page ids involved.

Decoding is contiguous: every decoding request is in every step until it leaves (the
decode batch is capped at admission by max_running), so a request's token times are a
range of step end times, and per-step work is O(requests that need something now).
"""
from __future__ import annotations

import gc
import heapq
from collections import deque
from functools import lru_cache

import numpy as np

from reference.policy import Policy
from reference.pool import PagePool
from reference.records import SERIES, Run, Series, StepLog, Violation
from reference.request import Request
from reference.shapes import (ACTIONS, CHUNK_VERDICTS, DECISIONS, EVENTS, STATES, Admission,
                              AdmissionRequest, ChunkContext, ChunkPlan, LedgerView, ModelSpec,
                              PageInfo, RequestRecord, Transition, Verdict, WorkerSpec)
from reference.solutions.lesson1 import pages_for, pool_pages

_COMPLETE, _CANCEL, _ARRIVAL = 0, 1, 2     # tie order at equal times: free pages first
_STOP, _NOTIFY, _RELEASE = ACTIONS


class PolicyError(Exception):
    """Raised by a policy wrapper when a decision could not be obtained (timeout, bad value)."""


class _Live:
    """A request's mutable state during a run."""
    __slots__ = ("req", "state", "phase", "pages", "promise_left", "target", "done", "written",
                 "emitted", "join_step", "base_ctx", "segments", "admitted_s", "first_token_s",
                 "finish_s", "cancel_s", "fence_s", "released_s", "outcome", "reason",
                 "preemptions", "max_pages", "released_pages", "stopped", "published", "keys",
                 "flagged", "last_step", "offer_from", "flagged_pages")

    def __init__(self, req: Request):
        self.req = req
        self.state = "waiting"       # the state machine's state (lesson 4)
        self.phase = "new"           # the worker's view: new, queued, prefill, decode, stopped, done
        self.pages: list[int] = []   # context order
        self.promise_left = 0        # reserved pages not yet allocated
        self.target = self.done = self.written = self.emitted = 0
        self.join_step = self.base_ctx = 0
        self.segments: list = []     # token times: floats, or (first, end) step ranges
        self.admitted_s = self.first_token_s = self.finish_s = None
        self.cancel_s = self.fence_s = self.released_s = None
        self.outcome = self.reason = ""
        self.preemptions = self.max_pages = 0
        self.released_pages: tuple[int, ...] | None = None
        self.stopped = False
        self.published: set[int] = set()
        self.keys: list[str] = []    # prefix keys of the prompt's full blocks, as computed
        self.flagged: set[str] = set()
        self.last_step = -1          # the last step it took part in, once it left the batch
        self.offer_from = 0          # pages below this are published: no need to offer them
        self.flagged_pages: set[int] = set()   # pages it tried to publish unwritten or partial


def simulate(model: ModelSpec, worker: WorkerSpec, policy: Policy, requests, *,
             max_steps: int | None = None, check_invariants: bool = False) -> Run:
    """Run a workload to the end and return its evidence. Deterministic: no hidden state."""
    # A run allocates millions of short-lived objects and makes no reference cycles; the
    # cyclic collector's full passes over the growing heap cost about a third of it.
    enabled = gc.isenabled()
    gc.disable()
    try:
        return _Sim(model, worker, policy, tuple(requests), max_steps, check_invariants).run()
    finally:
        if enabled:
            gc.enable()


class _Sim:
    def __init__(self, model, worker, policy, requests, max_steps, check_invariants):
        self.model, self.spec, self.policy, self.cost = model, worker, policy, worker.cost
        self.pt = worker.page_tokens
        self.pool = PagePool(pool_pages(model, worker))
        self.lives = [_Live(r) for r in requests]
        self.check = check_invariants
        self.max_steps = max_steps if max_steps is not None else 50 * (len(requests) + sum(
            r.max_new_tokens + r.prompt_tokens // self.pt for r in requests)) + 1000
        self.now = 0.0
        self.events: list = []
        # FCFS queue. A request stopped while queued is left in place and skipped when it
        # reaches the head (removing it would cost O(queue) per cancel under overload), so
        # `queued` counts the entries still waiting.
        self.waiting: deque[_Live] = deque()
        self.queued = 0
        self.prefilling: dict[int, _Live] = {}   # admission order: the oldest gets the chunk
        self.decoding: dict[int, _Live] = {}
        self.cancelling: dict[int, _Live] = {}
        self.page_due: dict[int, list] = {}      # step -> decoders that need a page at its launch
        self.finish_due: dict[int, list] = {}    # step -> decoders whose last token it emits
        self.outstanding = 0                     # sum of promise_left over requests
        self.running = 0
        self.context_sum = 0                     # summed context of decoders, before the next step
        self.decode_pages = 0
        self.step_end: list[float] = []
        self.inflight = None                     # (index, end_s, chunk live, chunk tokens)
        self.orphans: set[int] = set()           # pages the in-flight step pins but nobody holds
        self.freed_pinned: dict[int, tuple] = {} # page -> (request id, released at) while pinned
        self.origin: dict[int, tuple] = {}       # published page -> (scope, live, block index)
        self.prefix_hits = 0
        self.retry = False
        self.violations: list[Violation] = []
        self.step_rows: list[tuple] = []
        self.series_rows: list[tuple] = []
        self.table = self._read_table()
        # Transitions a sane machine ignores are skipped per request, keeping steps O(changes).
        self.quiet_launch = self._noop("running", "step_launched", True)
        self.quiet_complete = self._noop("running", "step_completed", False)
        self.aborted = ""

    # ---- the loop -------------------------------------------------------------------
    def run(self) -> Run:
        # Client events (arrivals, cancels) are known up front: one heapify. The one step in
        # flight stays out of the heap: it completes first when its end is due (at equal
        # times completions come first, as _COMPLETE < _CANCEL < _ARRIVAL did).
        events, lives = self.events, self.lives
        for live in lives:
            r = live.req
            events.append((r.arrival_s, _ARRIVAL, r.index))
            if r.cancel_at_s is not None:
                events.append((r.cancel_at_s, _CANCEL, r.index))
        heapq.heapify(events)
        pop = heapq.heappop
        while events or self.inflight is not None:
            if self.inflight is not None and (not events or self.inflight[1] <= events[0][0]):
                self.now = self.inflight[1]
                self._complete()
                self.retry = True
            else:
                self.now, kind, index = pop(events)
                if kind == _CANCEL:
                    self._cancel(lives[index])
                else:
                    self._arrive(lives[index])
            if self.retry:
                self.retry = False
                self._admit_waiting()
            if self.inflight is None and len(self.step_end) < self.max_steps:
                self._launch()
            if self.check:
                self._assert_books()
            if len(self.step_end) >= self.max_steps:
                self.aborted = f"stopped after {self.max_steps} steps without finishing the workload"
                break
        return self._finish_run()

    # ---- ARRIVAL: the contract, then admission ---------------------------------------
    def _arrive(self, live: _Live) -> None:
        verdict = self._decide("check_contract", Verdict, live.req.view(), self.model, self.spec)
        if verdict is None:
            self._violate("invalid_decision", live,
                          detail=f"check_contract gave no usable verdict for {live.req.id}")
        if verdict is None or not verdict.ok:
            reason = verdict.reason if verdict else "the contract check gave no usable verdict"
            return self._end(live, "rejected", reason or "contract")
        live.phase = "queued"
        self.waiting.append(live)
        self.queued += 1
        if self.queued == 1:
            self._admit_waiting()
        if live.req.cancel_at_s is not None and live.req.cancel_at_s <= self.now:
            self._cancel(live)   # its cancel event came first (ties put cancels before arrivals)

    def _admit_waiting(self) -> None:
        """FCFS: retry the head; stop at the first request that must wait."""
        while self.waiting:
            live = self.waiting[0]
            if live.phase != "queued":
                self.waiting.popleft()
                continue
            if self.running >= self.spec.max_running or not self._admit(live):
                return
            self.waiting.popleft()
            self.queued -= 1

    def _admit(self, live: _Live) -> bool:
        """True when the head leaves the queue (admitted or rejected)."""
        r, pt, pool = live.req, self.pt, self.pool
        if live.cancel_s is not None:
            self._flag(live, "scheduled_after_cancel", f"{r.id} was admitted after its cancel")
        hits = self._lookup(live)
        context = r.prompt_tokens + live.emitted   # a preempted request recomputes what it emitted
        ask = AdmissionRequest(id=r.id, scope=r.scope, prompt_tokens=context,
                               max_new_tokens=r.max_new_tokens - live.emitted, page_tokens=pt,
                               prefix_hit_pages=len(hits),
                               prefix_hit_active=sum(1 for p in hits if pool.refcount[p] > 0))
        ledger = LedgerView(total_pages=pool.total, unallocated_pages=len(pool.free),
                            evictable_pages=len(pool.evictable), reserved_pages=self.outstanding,
                            running=self.running)
        adm = self._decide("admit", Admission, ask, ledger)
        if adm is None or adm.decision not in DECISIONS or not _is_count(adm.reserve_pages):
            self._violate("invalid_decision", live, detail=f"admit returned {adm!r}" if adm else
                          f"admit gave no usable decision for {r.id}")
            adm = None
        if adm is None:
            self._end(live, "rejected", "the admission policy gave no usable decision")
            return True
        if adm.decision == "reject":
            self._end(live, "rejected", adm.reason or "rejected at admission")
            return True
        if adm.decision == "wait":
            return False
        for p in hits:
            pool.ref(p)
        live.pages = list(hits)
        live.published = set(range(len(hits)))
        live.promise_left = adm.reserve_pages
        self.outstanding += adm.reserve_pages
        if self.outstanding > pool.capacity:
            self._flag(live, "over_commit", (
                f"admitting {r.id} with {adm.reserve_pages} reserved pages made outstanding "
                f"promises {self.outstanding} exceed free capacity {pool.capacity}"))
        if not self._allocate_prompt(live, pages_for(context, pt) - len(hits)):
            self._drop_pages(live)
            self._return_promise(live)
            return False
        for block, p in enumerate(hits):
            self._verify_hit(live, block, p)   # once per use, not at every retry while waiting
        live.target, live.done = context, len(hits) * pt
        live.written = live.done
        live.phase = "prefill"
        self.prefilling[r.index] = live
        self.running += 1
        self.prefix_hits += len(hits)
        if live.admitted_s is None:
            live.admitted_s = self.now
        self._fire(live, "admit", False)
        return True

    # ---- the prefix cache -------------------------------------------------------------
    def _key(self, live: _Live, block: int) -> str | None:
        """The policy's prefix key of a full prompt block, chained through its parent."""
        keys = live.keys
        if block < len(keys):
            return keys[block]
        pt, scope = self.pt, live.req.scope
        # One conversion for every block still unkeyed up to ``block``, not a slice per block.
        blocks = live.req.prompt[len(keys) * pt:(block + 1) * pt].reshape(-1, pt).tolist()
        for tokens in blocks:
            key = self._decide("prefix_key", str, scope, keys[-1] if keys else "", tuple(tokens))
            if key is None or not key or len(key) > 512:
                self._flag(live, "invalid_decision", f"prefix_key gave no usable key: {key!r}")
                return None
            keys.append(key)
        return keys[block]

    def _lookup(self, live: _Live) -> list[int]:
        """Walk the prompt's full blocks, stopping at the first miss; one token stays to prefill."""
        if not self.policy.prefix_cache:
            return []
        hits: list[int] = []
        for block in range((live.req.prompt_tokens - 1) // self.pt):
            key = self._key(live, block)
            page = self.pool.lookup(key) if key is not None else None
            if page is None:
                break
            hits.append(page)
        # Touch the chain tail first so its head stays most recent: eviction then trims a
        # cached prefix from its end, and what remains can still be hit.
        self.pool.touch(reversed(hits))
        return hits

    def _verify_hit(self, live: _Live, block: int, page: int) -> None:
        scope, owner, owner_block = self.origin[page]
        if scope != live.req.scope:
            self._violate("cross_scope_hit", live, owner, pages=(page,), detail=(
                f"{live.req.id} (scope {live.req.scope!r}) hit page {page} published by "
                f"{owner.req.id} under scope {scope!r}"))
            return
        end = (block + 1) * self.pt
        if owner_block != block or not np.array_equal(owner.req.prompt[:end], live.req.prompt[:end]):
            self._violate("wrong_prefix_hit", live, owner, pages=(page,), detail=(
                f"{live.req.id} block {block} hit page {page}, which holds block {owner_block} "
                f"of {owner.req.id}: other tokens"))

    def _publish(self, live: _Live) -> None:
        """Offer the publish policy the unpublished prompt pages written so far, and the
        first page not yet written (a policy that ignores the write shows on that one)."""
        if not self.policy.prefix_cache or live.released_pages is not None:
            return
        pt, prompt = self.pt, live.req.prompt_tokens
        offered = {}
        end = min(len(live.pages), pages_for(prompt, pt), live.written // pt + 1)
        while live.offer_from < end and live.offer_from in live.published:
            live.offer_from += 1   # published pages are never offered again
        for i in range(live.offer_from, end):
            if i not in live.published and i not in live.flagged_pages:
                start = i * pt
                offered[i] = _page_info(i, min(pt, prompt - start), pt,
                                        max(0, min(pt, live.written - start)))
        if not offered:
            return
        chosen = self._decide("publishable", tuple, tuple(offered.values()))
        if chosen is None or not all(type(i) is int and i in offered for i in chosen):
            self._flag(live, "invalid_decision", f"publishable returned {chosen!r}")
            return
        for i in sorted(set(chosen)):
            info, page = offered[i], live.pages[i]
            if info.prompt_tokens < pt or info.written_tokens < pt:
                live.flagged_pages.add(i)   # refused once, counted once, not offered again
                self._violate("poisoned_publish", live, pages=(page,), detail=(
                    f"{live.req.id} published page {page} (block {i}) with {info.written_tokens} "
                    f"of {pt} slots written and {info.prompt_tokens} prompt tokens"))
                continue
            key = self._key(live, i)
            if key is not None and self.pool.publish(page, key):
                self.origin[page] = (live.req.scope, live, i)
                live.published.add(i)

    # ---- pages and promises -------------------------------------------------------------
    def _allocate(self, live: _Live) -> bool:
        """One new page for ``live``, from its reservation or from unpromised capacity."""
        pool = self.pool
        within = live.promise_left > 0
        if within or pool.capacity - self.outstanding >= 1:
            page = pool.take()
        else:
            page = None
        if page is None:
            detail = (f"{live.req.id} needed page {len(live.pages) + 1} with {live.promise_left} reserved pages "
                      f"left; {pool.capacity} free, {self.outstanding - live.promise_left} promised "
                      f"to other requests")
            if live.phase == "queued":
                # Admission retries the same allocation until it fits: one broken promise.
                self._flag(live, "broken_promise", detail)
            else:
                self._violate("broken_promise", live, detail=detail)
            return False
        if within:
            live.promise_left -= 1
            self.outstanding -= 1
        if page in self.freed_pinned:
            self._use_after_free(page, live)
        live.pages.append(page)
        live.max_pages = max(live.max_pages, len(live.pages))
        if live.phase == "decode":
            self.decode_pages += 1
        return True

    def _allocate_prompt(self, live: _Live, need: int) -> bool:
        """``need`` pages at admission. When the reservation and the pool cover them all, no
        promise can break: take them in order, checking each, and keep the books once."""
        pool = self.pool
        if need > live.promise_left or need > pool.capacity:
            return all(self._allocate(live) for _ in range(need))
        take, pages, pinned = pool.take, live.pages, self.freed_pinned
        for _ in range(need):
            page = take()
            if pinned and page in pinned:
                self._use_after_free(page, live)
            pages.append(page)
        live.promise_left -= need
        self.outstanding -= need
        live.max_pages = max(live.max_pages, len(pages))
        return True

    def _use_after_free(self, page: int, taker: _Live) -> None:
        owner, released_s = self.freed_pinned.pop(page)
        owner_id = owner.req.id
        index, end_s = self.inflight[0], self.inflight[1]
        cancel = (f"cancel of {owner_id} at {owner.cancel_s:.3f} s during step {index} "
                  f"(ends {end_s:.3f} s); " if owner.cancel_s is not None else "")
        self._violate("use_after_free", owner, taker, pages=(page,), step=index, detail=(
            f"{cancel}page {page} released at {released_s:.3f} s, given to {taker.req.id} "
            f"at {self.now:.3f} s, overwritten by step {index}"))

    def _drop_pages(self, live: _Live) -> None:
        """Unreference every page of ``live``; note pages freed under the in-flight step."""
        pinned = self._in_flight(live)
        for p in reversed(live.pages):   # tail first: a released prefix is evicted from its end
            if self.pool.unref(p) and (pinned or p in self.orphans):
                self.freed_pinned[p] = (live, self.now)
        if pinned:
            self.orphans.update(live.pages)
        live.pages = []

    def _return_promise(self, live: _Live) -> None:
        self.outstanding -= live.promise_left
        live.promise_left = 0

    def _release(self, live: _Live) -> None:
        if live.released_pages is not None:
            self._violate("double_release", live, pages=live.released_pages,
                          detail=f"{live.req.id}'s pages released a second time at {self.now:.3f} s")
            held = tuple(p for p in live.released_pages if self.pool.refcount[p] > 0)
            if held:
                self._violate("release_of_referenced", live, pages=held, detail=(
                    f"the second release of {live.req.id} would drop pages {list(held)[:8]} "
                    f"that other requests reference"))
            return
        if not live.stopped:
            # Its pages are gone, so it cannot run: the worker ends it.
            self._stop(live)
            if not live.outcome:
                live.outcome, live.reason = "failed", "its pages were released while it was running"
        live.released_pages = tuple(live.pages)
        live.released_s = self.now
        self._drop_pages(live)
        live.keys = []   # it publishes and looks up no more: its keys would only fill memory
        self.retry = True

    # ---- the state machine ---------------------------------------------------------------
    def _read_table(self) -> dict:
        """The policy's transitions, read once for every (state, event, in-flight)."""
        table = {}
        for s in STATES:
            for e in EVENTS:
                for f in (False, True):
                    tr = self._decide("on_event", Transition, s, e, f)
                    ok = (tr is not None and tr.next_state in STATES and isinstance(tr.actions, tuple)
                          and all(a in ACTIONS for a in tr.actions))
                    if not ok:
                        self.violations.append(Violation("invalid_decision", 0.0, (), detail=(
                            f"on_event({s!r}, {e!r}, {f}) returned {tr!r}; treated as no change")))
                        tr = Transition(s)
                    table[s, e, f] = tr
        return table

    def _fire(self, live: _Live, event: str, in_flight: bool) -> None:
        tr = self.table[live.state, event, in_flight]
        live.state = tr.next_state
        if tr.next_state == "cancelling":
            self.cancelling[live.req.index] = live
        else:
            self.cancelling.pop(live.req.index, None)
        for action in tr.actions:
            if action == _STOP:
                self._stop(live)
            elif action == _RELEASE:
                self._release(live)

    def _noop(self, state: str, event: str, in_flight: bool) -> bool:
        tr = self.table[state, event, in_flight]
        return tr.next_state == state and not tr.actions

    # ---- CANCEL ----------------------------------------------------------------------------
    def _cancel(self, live: _Live) -> None:
        if live.outcome or live.cancel_s is not None or live.phase == "new":
            return
        live.cancel_s = self.now
        in_flight = self._in_flight(live)
        live.fence_s = self.inflight[1] if in_flight else self.now
        live.outcome = "cancelled_by_client"
        self._fire(live, "cancel", in_flight)
        if not live.stopped:
            self._flag(live, "scheduled_after_cancel",
                       f"{live.req.id} kept being scheduled after its cancel")

    def _stop(self, live: _Live) -> None:
        """Stop scheduling: the request leaves the queue or the batch and returns its promise."""
        if live.stopped:
            return
        live.stopped = True
        if live.phase == "queued":
            self.queued -= 1            # it leaves the queue now (skipped at the head later)
            self.retry = True           # and the head may have changed, on an idle worker too
        if live.phase == "decode":
            live.emitted = self._emitted(live)
            self._leave_decode(live)
        elif live.phase == "prefill":
            self.prefilling.pop(live.req.index, None)
        if live.phase in ("prefill", "decode"):
            self.running -= 1
        self._return_promise(live)
        live.phase = "stopped"

    # ---- a step -----------------------------------------------------------------------------
    def _launch(self) -> None:
        index = len(self.step_end)
        due = self.page_due.pop(index, None)
        if due:
            for live in due:
                if live.phase == "decode" and self._page_step(live) == index:
                    if self._allocate(live):
                        self._schedule_page(live)
                    else:
                        self._preempt(live)
        chunk_live, chunk, verdict = self._plan_chunk() if self.prefilling else (None, 0, "")
        decoding = len(self.decoding)
        if not decoding and chunk_live is None:
            return
        now, pool = self.now, self.pool
        if chunk_live is None:
            duration = self.cost.step_time_of(decoding, self.context_sum)
            self.step_rows.append((now, duration, decoding, 0, "", "", self.decode_pages))
        else:
            duration = self.cost.step_time_of(decoding, self.context_sum, chunk, chunk_live.done)
            self.step_rows.append((now, duration, decoding, chunk, chunk_live.req.id, verdict,
                                   self.decode_pages + len(chunk_live.pages)))
        self.series_rows.append((now, len(pool.free), len(pool.evictable), self.outstanding,
                                 self.running, self.queued, self.prefix_hits))
        end = now + duration
        self.inflight = (index, end, chunk_live, chunk)
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
        index = len(self.step_end)
        contexts = tuple(l.base_ctx + index - l.join_step for l in self.decoding.values())
        ctx = ChunkContext(gap_budget_s=self.policy.gap_budget_s, cost=self.cost,
                           decode_contexts=contexts, prefill_done=live.done,
                           prefill_remaining=remaining, page_tokens=self.pt,
                           min_chunk_tokens=self.policy.min_chunk_tokens)
        plan = self._decide("choose_chunk", ChunkPlan, ctx)
        valid = (plan is not None and plan.verdict in CHUNK_VERDICTS and _is_count(plan.tokens)
                 and plan.tokens <= remaining)
        if not valid:
            self._flag(live, "invalid_decision", f"choose_chunk returned {plan!r}")
        if valid and plan.verdict == "ok" and plan.tokens > 0:
            chunk = plan.tokens
        else:
            # The scheduler's floor: the prompt keeps moving at the minimum pace, and the
            # step may then miss the gap budget (the verdict is on record).
            chunk = min(max(self.policy.min_chunk_tokens, self.pt), remaining)
        if live.done + chunk == live.target:
            # The last chunk emits the first token, whose slot it writes too.
            while len(live.pages) * self.pt < live.target + 1:
                if not self._allocate(live):
                    self._preempt(live)
                    return self._plan_chunk()
        return live, chunk, plan.verdict if valid else "invalid"

    def _complete(self) -> None:
        index, end, chunk_live, chunk = self.inflight
        self.step_end.append(end)
        self.inflight = None
        if self.orphans:
            self.orphans.clear()
        if self.freed_pinned:
            self.freed_pinned.clear()
        self.context_sum += len(self.decoding)
        if chunk_live is not None and chunk_live.released_pages is None:
            chunk_live.done += chunk
            chunk_live.written = chunk_live.done
            self._publish(chunk_live)
            if chunk_live.phase == "prefill" and chunk_live.done == chunk_live.target:
                self._first_token(chunk_live, index)
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

    def _first_token(self, live: _Live, index: int) -> None:
        del self.prefilling[live.req.index]
        live.segments.append(self.now)
        live.emitted += 1
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

    # Decode bookkeeping: context before step s is base_ctx + (s - join_step).
    def _emitted(self, live: _Live) -> int:
        return live.emitted + len(self.step_end) - live.join_step

    def _page_step(self, live: _Live) -> int:
        return live.join_step + len(live.pages) * self.pt - live.base_ctx

    def _finish_step(self, live: _Live) -> int:
        return live.join_step + live.req.output_tokens - live.emitted - 1

    def _schedule_page(self, live: _Live) -> None:
        self.page_due.setdefault(self._page_step(live), []).append(live)

    def _leave_decode(self, live: _Live) -> None:
        del self.decoding[live.req.index]
        steps = len(self.step_end)
        flying = self.inflight is not None and live.join_step <= self.inflight[0]
        live.last_step = self.inflight[0] if flying else steps - 1
        live.segments.append((live.join_step, steps))
        self.context_sum -= live.base_ctx + steps - live.join_step
        self.decode_pages -= len(live.pages)

    def _preempt(self, live: _Live) -> None:
        """A broken promise: give back everything and recompute from the queue's head."""
        if live.phase == "decode":
            live.emitted = self._emitted(live)
            self._leave_decode(live)
        else:
            del self.prefilling[live.req.index]
        live.phase, live.state = "queued", "waiting"
        self._drop_pages(live)
        self._return_promise(live)
        self.running -= 1
        live.preemptions += 1
        live.published = set()
        self.waiting.appendleft(live)
        self.queued += 1
        self.retry = True

    # ---- the end ---------------------------------------------------------------------------
    def _end(self, live: _Live, outcome: str, reason: str = "") -> None:
        """A terminal fact: the request completed, or was rejected."""
        live.finish_s = self.now
        if not live.outcome:
            live.outcome, live.reason = outcome, reason
        if outcome == "rejected":
            live.stopped, live.phase, live.state = True, "done", "done"
            return
        self._stop(live)
        self._fire(live, "finished", False)

    def _finish_run(self) -> Run:
        for live in self.lives:
            if live.phase == "decode":
                self._leave_decode(live)   # an aborted run: the tokens it emitted stay on record
            if live.phase in ("queued", "prefill", "decode") and not live.outcome:
                live.outcome = "failed"
                live.reason = ("never admitted: waited until the end of the run"
                               if live.phase == "queued" else self.aborted or "did not finish")
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
                   self.now, self.aborted)

    def _record(self, live: _Live, ends: np.ndarray) -> RequestRecord:
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

    # ---- helpers ---------------------------------------------------------------------------
    def _in_flight(self, live: _Live) -> bool:
        """Does the launched, not yet completed step reference this request?"""
        if self.inflight is None:
            return False
        index = self.inflight[0]
        return live.last_step == index or (live.phase == "decode" and live.join_step <= index)

    def _decide(self, name: str, kind: type, *args):
        """Ask the policy; None when it could not answer or answered with the wrong type."""
        try:
            value = getattr(self.policy, name)(*args)
        except PolicyError:
            return None
        if kind is tuple:
            return value if isinstance(value, tuple) else None
        return value if type(value) is kind else None

    def _violate(self, kind: str, *lives: _Live, pages: tuple = (), step: int | None = None,
                 detail: str = "") -> None:
        self.violations.append(Violation(kind, self.now, tuple(l.req.id for l in lives),
                                         tuple(pages), step, detail))

    def _flag(self, live: _Live, kind: str, detail: str) -> None:
        """A violation counted once per request (a retry repeats it, it is not a new one)."""
        if kind not in live.flagged:
            live.flagged.add(kind)
            self._violate(kind, live, detail=detail)

    def _assert_books(self) -> None:
        pool = self.pool
        assert pool.conserved(), "pages not conserved"
        assert self.outstanding == sum(l.promise_left for l in self.lives), "promises drifted"
        held: dict[int, int] = {}
        for l in self.lives:
            for p in l.pages:
                held[p] = held.get(p, 0) + 1
        assert all(pool.refcount[p] == c for p, c in held.items()), "refcount != holders"
        assert all(c == 0 or p in held for p, c in enumerate(pool.refcount)), "unowned page"
        queued = [l for l in self.waiting if l.phase == "queued"]
        assert self.queued == len(queued) == len(set(map(id, queued))), "queue count drifted"


@lru_cache(maxsize=65536)
def _page_info(index: int, prompt_tokens: int, page_tokens: int, written: int) -> PageInfo:
    # Frozen values repeat across requests; sharing them keeps publishing cheap.
    return PageInfo(index, prompt_tokens, page_tokens, written, False)


def _is_count(value) -> bool:
    return type(value) is int and 0 <= value < 1 << 40
