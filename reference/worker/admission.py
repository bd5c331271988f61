"""Arrival, the FCFS queue, admission and preemption: how a request gets, and loses, its pages.

The contract is asked at arrival; the head of the queue is retried at every step
completion and whenever pages come back, only while fewer than ``max_running`` run, and a
head told to wait only once what it would be shown has changed.

A running request that needs a page beyond its promise when no unpromised page is free
suffers a broken promise. The worker then preempts by priority, not by who asked: under
FCFS the lowest-priority running request is the one admitted last (a re-admission counts
as an admission), so it goes first, then the next latest, until the page comes free or the
one asking is itself the latest left. A victim returns its pages and its promise, goes
back to the head of the queue and, once re-admitted, recomputes: its prompt and the tokens
it had emitted are prefilled again, in chunks the chunk rule sizes and the cost model
prices like any prefill (its emitted tokens stay on record). The earliest-admitted running
request is never preempted for another, so it always progresses: over-admission costs the
victims (their wait and recompute show in their token gaps), never the run. Preempting the
one that asked instead lets it take its pages straight back at the next admission, before
the others get the pages they need, and requests at page boundaries can then preempt one
another forever.
"""
from __future__ import annotations

from itertools import chain
from operator import attrgetter

from reference.shapes import DECISIONS, Admission, AdmissionRequest, LedgerView, Verdict
from reference.sizing import pages_for
from reference.worker.decisions import is_count, shown
from reference.worker.sequence import Sequence

_ADMIT_ORDER = attrgetter("admit_order")   # the priority order: admitted later, preempted first


class AdmissionQueue:
    def _arrive(self, live: Sequence) -> None:
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

    def _admit(self, live: Sequence) -> bool:
        """True when the head leaves the queue (admitted or rejected)."""
        r, pt, pool = live.req, self.pt, self.pool
        if live.waited == self._shown():
            # Told to wait, and nothing it would be shown has changed since (its ledger and
            # its prefix hits are the pool's, the promises' and the running count's): the
            # same question gets the same answer, and its own hits were touched last, so
            # the lookup's touch would change no order either.
            return False
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
        if adm is None or adm.decision not in DECISIONS or not is_count(adm.reserve_pages):
            self._violate("invalid_decision", live, detail=f"admit returned {shown(adm)}" if adm else
                          f"admit gave no usable decision for {r.id}")
            adm = None
        if adm is None:
            self._end(live, "rejected", "the admission policy gave no usable decision")
            return True
        if adm.decision == "reject":
            self._end(live, "rejected", adm.reason or "rejected at admission")
            return True
        if adm.decision == "wait":
            live.waited = self._shown()
            return False
        for p in hits:
            pool.ref(p)
        if self.trace is not None:
            self.trace.extend(("ref", self.now, r.id, p) for p in hits)
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
        # The most pages a request held counts from here: an attempt given back (its prefix
        # hits unref'd because the rest found no room) held nothing a record should show.
        live.max_pages = max(live.max_pages, len(live.pages))
        if self.trace is not None:
            self.trace.append(("admit", self.now, r.id))
        self.prefilling[r.index] = live
        self.running += 1
        self.prefix_hits += len(hits)
        if live.admitted_s is None:
            live.admitted_s = self.now
        live.admit_order = self.admissions
        self.admissions += 1
        self._fire(live, "admit", False)
        return True

    def _shown(self) -> tuple:
        """What a head's admission is shown, besides its own request: equal only when the
        pool, the promises and the running count are all as they were."""
        return self.pool.version, self.outstanding, self.running

    def _grow(self, live: Sequence) -> bool:
        """One more page for a running request, now; on a broken promise, preempt by priority.

        True when ``live`` got its page, False when it was preempted itself. The broken
        promise is recorded once, for ``live`` (its promise is the one that broke), naming
        after it the other requests preempted to make room."""
        if self._allocate(live):
            return True
        detail = self._shortfall(live)
        others = []
        while True:
            victim = max(chain(self.prefilling.values(), self.decoding.values()), key=_ADMIT_ORDER)
            self._preempt(victim)
            if victim is live:
                break
            others.append(victim)
            if self._allocate(live):
                break
        me, ids = live.req.id, " then ".join(v.req.id for v in others)
        if not others:
            detail += f"; {me} was the running request admitted last, so it was preempted itself"
        elif live.phase == "queued":
            detail += f"; preempted {ids} (admitted after {me}), still no page: {me} was preempted itself"
        else:
            detail += f"; preempted {ids}, admitted last; {me} got its page"
        self._violate("broken_promise", live, *others, detail=detail)
        return live.phase != "queued"

    def _preempt(self, live: Sequence) -> None:
        """Give back everything and recompute from the queue's head."""
        if live.phase == "decode":
            live.emitted = self._emitted(live)
            self._leave_decode(live)
        else:
            del self.prefilling[live.req.index]
        live.phase, live.state = "queued", "waiting"
        if self.trace is not None:
            self.trace.append(("requeue", self.now, live.req.id))
        self._drop_pages(live)
        self._return_promise(live)
        self.running -= 1
        live.preemptions += 1
        # Its pages are gone, so none of its blocks is published any more: a recompute
        # offers them all again (those still cached come back as hits at re-admission).
        live.published, live.tokens, live.offer_from = set(), None, 0
        self.waiting.appendleft(live)
        self.queued += 1
        self.retry = True
