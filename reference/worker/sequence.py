"""A request's mutable state during a run: the worker's view of it (phase) and the
state machine's (state), its pages and promise, its token bookkeeping and its times.
"""
from __future__ import annotations

from array import array

from reference.request import Request

NONE = frozenset()


class Sequence:
    """A request's mutable state during a run."""
    __slots__ = ("req", "state", "phase", "pages", "promise_left", "target", "done", "written",
                 "emitted", "join_step", "base_ctx", "segments", "admitted_s", "first_token_s",
                 "finish_s", "cancel_s", "fence_s", "released_s", "outcome", "reason",
                 "preemptions", "max_pages", "released_pages", "stopped", "published", "keys",
                 "flagged", "last_step", "offer_from", "flagged_pages", "admit_order", "tokens",
                 "waited")

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
        self.released_pages: array | None = None   # its pages when released (compact)
        self.stopped = False
        self.published: set[int] = set()
        self.keys: list[str] = []    # prefix keys of the prompt's full blocks, as computed
        # Violations flagged once per request, and pages refused for publishing: almost
        # always none, so they share one empty set until the first (200 bytes a request).
        self.flagged: set[str] | frozenset = NONE
        self.last_step = -1          # the last step it took part in, once it left the batch
        self.offer_from = 0          # pages below this are published: no need to offer them
        self.flagged_pages: set[int] | frozenset = NONE   # pages published unwritten or partial
        self.admit_order = -1        # rank of its latest admission: the highest is preempted first
        self.tokens: tuple[int, ...] | None = None   # the prompt as ints while it publishes (prefix_cache)
        self.waited: tuple | None = None       # what it was shown when last told to wait (admission)
