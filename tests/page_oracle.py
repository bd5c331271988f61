"""An independent bookkeeper of the worker's pages, fed by the worker's event trace alone.

The worker can report what it does to its pages (``simulate(..., trace=[...])``): every page
taken for new content, every prefix hit referenced, every reference dropped, every page
published, and every step's launch (with the requests in it) and completion. From that list
alone this module rebuilds, event by event, every page's holders, its refcount, whether it
is free, cached or referenced, and which pages the step in flight pins. It knows nothing of
scheduling, admission or the state machine; it only keeps the books the worker's semantics
define, and then holds the worker's own records against them:

- a page is handed out only at refcount 0, and a cached page is evicted only when no free
  page is left (the pool's contract);
- a request releases only pages it holds, and a prefix hit is a page in the cache;
- the pages a step pins are those its requests hold at its launch; a page of that set
  handed out again before the step completes is a use-after-free, with that step, page and
  taker, and the worker must have recorded exactly those;
- each step's pages_pinned, the free and evictable counts sampled at each launch, each
  request's most pages held and the pages each leak names agree with these books.
"""
from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field

from reference.records import Run

ENDED = ("completed", "cancelled_by_client")     # a request that ends so must hold no page


class BooksError(AssertionError):
    """The trace breaks the page semantics, or the worker's records disagree with it."""


@dataclass
class Books:
    total: int
    refcount: list[int] = field(init=False)
    held: dict[str, list[int]] = field(default_factory=lambda: defaultdict(list))
    cached: set[int] = field(default_factory=set)        # published and not evicted
    most: dict[str, int] = field(default_factory=lambda: defaultdict(int))   # while admitted
    admitted: set[str] = field(default_factory=set)
    pinned: set[int] | None = None                       # pages the step in flight pins
    step: int | None = None
    pinned_pages: list[int] = field(default_factory=list)      # per step, summed over its requests
    sampled: list[tuple[int, int]] = field(default_factory=list)   # (free, evictable) at launches
    use_after_free: list[tuple[int, int, str]] = field(default_factory=list)   # (step, page, taker)
    freed_under_step: list[tuple[int, int, str]] = field(default_factory=list)  # (step, page, releaser)
    events: int = 0

    def __post_init__(self):
        self.refcount = [0] * self.total

    # ---- what the pool holds
    def free_pages(self) -> int:
        return sum(1 for p, c in enumerate(self.refcount) if c == 0 and p not in self.cached)

    def evictable_pages(self) -> int:
        return sum(1 for p in self.cached if self.refcount[p] == 0)

    def _fail(self, what: str, event) -> None:
        raise BooksError(f"event {self.events} {event}: {what}")

    # ---- the events
    def take(self, event, rid: str, page: int) -> None:
        if not 0 <= page < self.total:
            self._fail("no such page", event)
        if self.refcount[page]:
            self._fail(f"page {page} handed out while {self.refcount[page]} requests reference it", event)
        if page in self.cached:
            if self.free_pages():
                self._fail(f"cached page {page} evicted while {self.free_pages()} pages are free", event)
            self.cached.discard(page)
        if self.pinned is not None and page in self.pinned:
            self.use_after_free.append((self.step, page, rid))
        self._hold(event, rid, page)

    def ref(self, event, rid: str, page: int) -> None:
        if page not in self.cached:
            self._fail(f"a prefix hit on page {page}, which is not in the cache", event)
        self._hold(event, rid, page)

    def _hold(self, event, rid: str, page: int) -> None:
        if page in self.held[rid]:
            self._fail(f"{rid} holds page {page} twice", event)
        self.held[rid].append(page)
        self.refcount[page] += 1
        if rid in self.admitted:
            self.most[rid] = max(self.most[rid], len(self.held[rid]))

    def admit(self, event, rid: str) -> None:
        """From here until it is requeued, what ``rid`` holds is what its record shows."""
        self.admitted.add(rid)
        self.most[rid] = max(self.most[rid], len(self.held[rid]))

    def requeue(self, event, rid: str) -> None:
        self.admitted.discard(rid)

    def unref(self, event, rid: str, page: int) -> None:
        if page not in self.held[rid]:
            self._fail(f"{rid} released page {page}, which it does not hold", event)
        self.held[rid].remove(page)
        self.refcount[page] -= 1
        if self.refcount[page] == 0 and self.pinned is not None and page in self.pinned:
            self.freed_under_step.append((self.step, page, rid))

    def publish(self, event, rid: str, page: int) -> None:
        if page not in self.held[rid] or page in self.cached:
            self._fail(f"{rid} published page {page}, not its own or already cached", event)
        self.cached.add(page)

    def launch(self, event, step: int, rids: tuple[str, ...]) -> None:
        if self.pinned is not None:
            self._fail(f"step {step} launched while step {self.step} is in flight", event)
        if step != len(self.pinned_pages):
            self._fail(f"step {step} launched after {len(self.pinned_pages)} steps", event)
        self.step = step
        self.pinned = {p for rid in rids for p in self.held[rid]}
        self.pinned_pages.append(sum(len(self.held[rid]) for rid in rids))
        self.sampled.append((self.free_pages(), self.evictable_pages()))

    def complete(self, event, step: int) -> None:
        if self.pinned is None or step != self.step:
            self._fail(f"step {step} completed, but step {self.step} is the one in flight", event)
        self.pinned = self.step = None


def replay(trace, total: int) -> Books:
    """The books after every event of a worker's trace."""
    books = Books(total)
    for event in trace:
        books.events += 1
        kind, args = event[0], event[2:]
        getattr(books, kind)(event, *args)
    return books


def check_run(run: Run, trace, *, fence: bool = False) -> Books:
    """Replay the trace and hold the worker's records against the books it gives. With
    ``fence`` (a policy that releases a cancelled request's pages only at its fence), no
    page a step pins may even be freed before that step completes."""
    books = replay(trace, run.total_pages)
    steps = run.steps
    _same("pages pinned per step", steps.pages_pinned.tolist(), books.pinned_pages)
    _same("free pages at each launch", run.series["free"].tolist(), [f for f, _ in books.sampled])
    _same("evictable pages at each launch", run.series["evictable"].tolist(),
          [e for _, e in books.sampled])
    recorded = [(v.step, v.pages[0], v.requests[1]) for v in run.violations if v.kind == "use_after_free"]
    _same("use-after-free (step, page, taker)", recorded, books.use_after_free)
    for rec in run.requests:
        _same(f"{rec.id}: most pages held", rec.pages_held, books.most.get(rec.id, 0))
    leaks = {v.requests[0]: sorted(v.pages) for v in run.violations if v.kind == "leak"}
    held_at_end = {r.id: sorted(books.held[r.id]) for r in run.requests
                   if r.outcome in ENDED and books.held.get(r.id)}
    _same("leaks (request: pages still held at the end)", leaks, held_at_end)
    if fence:
        _same("pages freed under the step that pins them", books.freed_under_step, [])
    return books


def _same(what: str, worker, books) -> None:
    if worker != books:
        raise BooksError(f"{what}: the worker says {worker}, its own trace says {books}")
