"""Pages and promises: allocation within a reservation or from unpromised capacity, and
the release of pages, with the use-after-free a release under an in-flight step causes.
"""
from __future__ import annotations

from array import array

from reference.worker.sequence import NONE, Sequence


class PageBooks:
    def _allocate(self, live: Sequence) -> bool:
        """One new page for ``live``, from its reservation or from unpromised capacity.

        False when neither has a page: the caller records the broken promise (admission
        flags it once per request; a running request's is handled by ``_grow``)."""
        pool = self.pool
        within = live.promise_left > 0
        if within or pool.capacity - self.outstanding >= 1:
            page = pool.take()
        else:
            page = None
        if page is None:
            return False
        if within:
            live.promise_left -= 1
            self.outstanding -= 1
        if self.trace is not None:
            self.trace.append(("take", self.now, live.req.id, page))
        if page in self.freed_pinned:
            self._use_after_free(page, live)
        live.pages.append(page)
        if live.phase != "queued":      # pages of an admission still being tried count once it holds
            live.max_pages = max(live.max_pages, len(live.pages))
        if live.phase == "decode":
            self.decode_pages += 1
        return True

    def _allocate_prompt(self, live: Sequence, need: int) -> bool:
        """``need`` pages at admission. When the reservation and the pool cover them all, no
        promise can break: take them in order, checking each, and keep the books once."""
        pool = self.pool
        if need > live.promise_left or need > pool.capacity:
            if all(self._allocate(live) for _ in range(need)):
                return True
            # Admission retries the same allocation until it fits: one broken promise.
            self._flag(live, "broken_promise", self._shortfall(live))
            return False
        taken, pinned = pool.take_many(need), self.freed_pinned
        if pinned:
            for page in taken:
                if page in pinned:
                    self._use_after_free(page, live)
        live.pages.extend(taken)
        if self.trace is not None:
            self.trace.extend(("take", self.now, live.req.id, p) for p in taken)
        live.promise_left -= need
        self.outstanding -= need
        return True

    def _shortfall(self, live: Sequence) -> str:
        """Why ``live`` got no page: the sentence a broken promise starts with."""
        pool = self.pool
        return (f"{live.req.id} needed page {len(live.pages) + 1} with {live.promise_left} reserved "
                f"pages left; {pool.capacity} free, {self.outstanding - live.promise_left} promised "
                f"to other requests")

    def _use_after_free(self, page: int, taker: Sequence) -> None:
        owner, released_s = self.freed_pinned.pop(page)
        owner_id = owner.req.id
        index, end_s = self.inflight[0], self.inflight[1]
        cancel = (f"cancel of {owner_id} at {owner.cancel_s:.3f} s during step {index} "
                  f"(ends {end_s:.3f} s); " if owner.cancel_s is not None else "")
        self._violate("use_after_free", owner, taker, pages=(page,), step=index, detail=(
            f"{cancel}page {page} released at {released_s:.3f} s, given to {taker.req.id} "
            f"at {self.now:.3f} s, overwritten by step {index}"))

    def _drop_pages(self, live: Sequence) -> None:
        """Unreference every page of ``live``; note pages freed under the in-flight step."""
        pinned = self._in_flight(live)
        if self.trace is not None:
            self.trace.extend(("unref", self.now, live.req.id, p) for p in reversed(live.pages))
        # Tail first: a released prefix is evicted from its end.
        if not pinned and not self.orphans:
            self.pool.unref_all(reversed(live.pages))   # no page can be one a step pins
        else:
            for p in reversed(live.pages):
                if self.pool.unref(p) and (pinned or p in self.orphans):
                    self.freed_pinned[p] = (live, self.now)
        if pinned:
            self.orphans.update(live.pages)
        live.pages = []

    def _return_promise(self, live: Sequence) -> None:
        self.outstanding -= live.promise_left
        live.promise_left = 0

    def _release(self, live: Sequence) -> None:
        if live.released_pages is not None:
            self._violate("double_release", live, pages=tuple(live.released_pages),
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
        live.released_pages = array("i", live.pages)   # page ids < 2**31: 4 bytes each
        live.released_s = self.now
        self._drop_pages(live)
        # It publishes and looks up no more: its keys and published pages would only fill
        # memory (about 6 KB a request with the cache on).
        live.keys, live.published, live.tokens = [], NONE, None
        self.retry = True

