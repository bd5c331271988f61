"""The course's one worker: a discrete-event simulation of a paged-KV serving worker.

Read top to bottom: ``simulate`` takes events (step completion, client cancel, arrival), and
each handler does what the worker's semantics (docs/worker.md) say of that event. One step
is in flight at a time; admissions (and their prompt-page allocations) happen while it runs,
which is what makes early reclamation dangerous. Policies decide; the worker keeps the books
and records every violation it can see, with the request and page ids involved.

The worker is one class assembled from one module per concept, each a mixin over the same
books (the attributes set in ``Worker.__init__``):

    admission.py     arrival, the FCFS queue, admission, preemption
    prefix_cache.py  keys, lookups, publishing, hit verification
    pages.py         allocation within promises, release, use-after-free
    lifecycle.py     the state machine's table, cancel, stop, end
    steps.py         launch and completion of a step, decode bookkeeping, decode stretches
    recorder.py      violations, and the run's evidence at the end
    decisions.py     asking the policy, and PolicyError
    sequence.py      one request's mutable state
"""
from __future__ import annotations

import gc
import math
from collections import deque

from reference.policy import Policy
from reference.pool import PagePool
from reference.records import Run, Violation
from reference.shapes import ModelSpec, WorkerSpec
from reference.sizing import Geometry, pool_too_large
from reference.specs import SpecError
from reference.worker.admission import AdmissionQueue
from reference.worker.decisions import Decisions
from reference.worker.lifecycle import Lifecycle
from reference.worker.pages import PageBooks
from reference.worker import prefix_cache
from reference.worker.prefix_cache import PrefixCache
from reference.worker.recorder import Recorder, StepColumns
from reference.worker.sequence import Sequence
from reference.worker.steps import Steps

_COMPLETE, _CANCEL, _ARRIVAL = 0, 1, 2     # tie order at equal times: free pages first


def simulate(model: ModelSpec, worker: WorkerSpec, policy: Policy, requests, *,
             max_steps: int | None = None, check_invariants: bool = False,
             trace: list | None = None) -> Run:
    """Run a workload to the end and return its evidence. Deterministic: no hidden state.

    ``trace``, a list, receives what the worker did to its pages, in order, for a
    bookkeeper outside the worker to check (tests/page_oracle.py):
        ("take", t, request id, page)      a page for new content (evicting a cached one if need be)
        ("ref", t, request id, page)       a prefix-cache hit referenced at admission
        ("unref", t, request id, page)     a reference dropped
        ("publish", t, request id, page)   a page entered into the prefix cache
        ("launch", t, step, request ids)   a step starts with these requests in it
        ("complete", t, step)              that step ends
    """
    # A run allocates millions of short-lived objects and makes no reference cycles; the
    # cyclic collector's full passes over the growing heap cost about a third of it.
    enabled = gc.isenabled()
    gc.disable()
    try:
        return Worker(model, worker, policy, tuple(requests), max_steps, check_invariants,
                      trace).run()
    finally:
        if enabled:
            gc.enable()


class Worker(AdmissionQueue, PrefixCache, PageBooks, Lifecycle, Steps, Recorder, Decisions):
    def __init__(self, model, worker, policy, requests, max_steps, check_invariants, trace=None):
        self.model, self.spec, self.policy, self.cost = model, worker, policy, worker.cost
        self.pt = worker.page_tokens
        geometry = Geometry.of(model, worker)
        too_large = pool_too_large(geometry)
        if too_large:
            # Refused, not allocated: the files that set the sizes check this bound first
            # and name their field; this is the last line for any other caller.
            raise SpecError(too_large)
        self.pool = PagePool(geometry.pool_pages)
        self.lives = [Sequence(r) for r in requests]
        self.check = check_invariants
        self.trace = trace                       # None, or a list that receives the page events
        # Two bounds stop a run that cannot finish. The stall bound: every step either decodes
        # (one token per decoder) or moves the oldest prefill by at least one token, and a
        # (re)prefill is shorter than prompt + max_new, so a healthy run never goes that many
        # steps without a token or an ending; one that does is stuck, and says so within
        # seconds. The step cap, 50 steps per token of work, is the backstop.
        self.stall_limit = max((r.prompt_tokens + r.max_new_tokens for r in requests), default=0) + 64
        self.max_steps = max_steps if max_steps is not None else 50 * (len(requests) + sum(
            r.max_new_tokens + r.prompt_tokens // self.pt for r in requests)) + 1000
        self.progress_step = 0                   # the last step a token was emitted or a request ended
        self.now = 0.0
        self.events: list = []
        # FCFS queue. A request stopped while queued is left in place and skipped when it
        # reaches the head (removing it would cost O(queue) per cancel under overload), so
        # `queued` counts the entries still waiting.
        self.waiting: deque[Sequence] = deque()
        self.queued = 0
        self.prefilling: dict[int, Sequence] = {}   # admission order: the oldest gets the chunk
        self.decoding: dict[int, Sequence] = {}
        self.cancelling: dict[int, Sequence] = {}
        self.page_due: dict[int, list] = {}      # step -> decoders that need a page at its launch
        self.finish_due: dict[int, list] = {}    # step -> decoders whose last token it emits
        self.outstanding = 0                     # sum of promise_left over requests
        self.running = 0
        self.admissions = 0                      # admissions so far: the next one's admit_order
        self.context_sum = 0                     # summed context of decoders, before the next step
        self.decode_pages = 0
        self.completed = 0                       # steps completed: the next step's index
        self.inflight = None                     # (index, end_s, chunk live, chunk tokens)
        self.orphans: set[int] = set()           # pages the in-flight step pins but nobody holds
        self.freed_pinned: dict[int, tuple] = {} # page -> (request id, released at) while pinned
        self.true_keys: dict[tuple, int] = {}   # the ground-truth prefix keys (no prefix_key policy)
        self.next_key = 0                        # the next ground-truth key's id
        self.keys_kept = prefix_cache.KEYS_KEPT  # true_keys' size that makes it forget
        self.origin: dict[int, tuple] = {}       # published page -> (scope, live, block index)
        self.full_pages: list = []               # block i -> the PageInfo of a full, written prompt page
        self.prefix_hits = 0
        self.retry = False
        self.violations: list[Violation] = []
        self.step_rows: list[tuple] = []         # the latest steps' rows, until they spill
        self.step_columns = StepColumns()        # every earlier row, held as columns
        self.table = self._read_table()
        # Transitions a sane machine ignores are skipped per request, keeping steps O(changes).
        self.quiet_launch = self._noop("running", "step_launched", True)
        self.quiet_complete = self._noop("running", "step_completed", False)
        self.quiet_steps = self.quiet_launch and self.quiet_complete
        self.aborted = ""

    def run(self) -> Run:
        # Client events (arrivals, cancels) are known up front: one sort, then a walk (a heap
        # of them all would cost O(log requests) an event, so cost per request would grow with
        # the workload). The one step in flight stays out of the list: it completes first
        # when its end is due (at equal times completions come first, as
        # _COMPLETE < _CANCEL < _ARRIVAL did).
        events, lives = self.events, self.lives
        for live in lives:
            r = live.req
            events.append((r.arrival_s, _ARRIVAL, r.index))
            if r.cancel_at_s is not None:
                events.append((r.cancel_at_s, _CANCEL, r.index))
        events.sort()
        pos, total = 0, len(events)
        next_at = events[0][0] if events else math.inf      # the next client event's time
        while pos < total or self.inflight is not None:
            # Past the last client event next_at is inf, so the step in flight completes.
            if self.inflight is not None and self.inflight[1] <= next_at:
                self.now = self.inflight[1]
                self._complete()
                self.retry = True
            else:
                self.now, kind, index = events[pos]
                pos += 1
                next_at = events[pos][0] if pos < total else math.inf
                if kind == _CANCEL:
                    self._cancel(lives[index])
                else:
                    self._arrive(lives[index])
            if self.retry:
                self.retry = False
                if self.waiting:
                    self._admit_waiting()
            if self.inflight is None:
                if self.quiet_steps and self.decoding and not self.prefilling:
                    self._decode_steps(next_at)
                self.aborted = self._stopped()
                if self.aborted:
                    break
                self._launch()
            if self.check:
                self._assert_books()
        return self._finish_run()

    def _stopped(self) -> str:
        """Why no further step may launch ("" while the run may go on)."""
        steps = self.completed
        if steps >= self.max_steps:
            return f"stopped at the step cap, {self.max_steps} steps, without finishing the workload"
        if steps - self.progress_step > self.stall_limit:
            return (f"stopped after step {steps}: no token and no request ended for "
                    f"{steps - self.progress_step} steps (stuck: a healthy run has one within "
                    f"{self.stall_limit})")
        return ""

    def _in_flight(self, live: Sequence) -> bool:
        """Does the launched, not yet completed step reference this request?"""
        if self.inflight is None:
            return False
        index = self.inflight[0]
        return live.last_step == index or (live.phase == "decode" and live.join_step <= index)

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
