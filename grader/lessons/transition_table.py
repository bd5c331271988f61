"""Lesson 4's transition table, model-checked: every entry asked, every event path walked.

on_event is a pure function of (state, event, in-flight), so all 5 x 5 x 2 entries can be
asked up front, with no worker run (twice, in two orders: a table that is not a function of
its arguments is judged on each reading). The table is then judged by what the worker would do
with it, not entry by entry against the reference: a model of the worker's side of a
request's life (which events can come next, and whether a launched step pins the pages)
walks every event sequence the worker can produce, so each invariant (no release under a
pinning step, a cancel stops and notifies at once and nothing else stops a live request,
reclaim at the fence, release once, done stays done) is checked on every path, and on every
entry directly: a live request's entries must keep it served (liveness), and every end a
request can meet, the unusual ones too (finished while a step still pins the pages), must
lead to its release (no leak).

A property a table can hold by doing nothing earns nothing: "never released while pinned"
and "released once" need a table that releases somewhere, and "done stays done" one whose
requests reach done by ending (a table that is done from the start never shows it).
"""
from __future__ import annotations

from collections import deque
from dataclasses import dataclass
from itertools import product

from grader.engine.cases import Case
from grader.engine.checks import CheckContext, Measure, ask, check, not_implemented
from reference.shapes import ACTIONS, EVENTS, STATES, Transition

STOP, NOTIFY, RELEASE = ACTIONS
TABLE_KEYS = tuple(product(STATES, EVENTS, (False, True)))
HOLDING = ("admitted", "running", "cancelling")      # states whose request holds pages
SERVED = ("waiting", "admitted", "running")          # states the scheduler serves


def show_entry(state: str, event: str, in_flight: bool, tr: Transition) -> str:
    acts = f" + {', '.join(tr.actions)}" if tr.actions else ""
    return f"on_event({state!r}, {event!r}, {in_flight}) -> {tr.next_state!r}{acts}"


def table_answers(ctx: CheckContext) -> tuple[tuple[dict, ...], str]:
    """The learner's table {(state, event, in_flight): Transition} as each reading gave it
    (one table when every reading agrees), or why it is unusable.

    The table is read twice, the second time in reverse order. Every worker run of the
    grade follows the first reading (graded_reading), so a table whose answers depend on a
    coin, a call counter or the order it is asked in is judged on every reading it gave: one
    reading right is not the table right (a coin flip on one entry kept full marks one time
    in two). Readings that differ only where both are right (the actions in another order)
    lose nothing."""
    if "table" not in ctx.memo:
        cases = [Case("table", f"on_event{k}", "public", k) for k in TABLE_KEYS]
        tables, problem = [], ""
        for order in (cases, cases[::-1]):
            answers = ask(ctx, "on_event", order, lambda c: c.inputs, Transition)
            ctx.memo.setdefault("table read", answers)
            table, why = _reading(answers)
            problem = problem or why
            if table not in tables:
                tables.append(table)
        ctx.memo["table"] = (tuple(tables), problem)
    return ctx.memo["table"]


def graded_reading(ctx: CheckContext) -> list[tuple[tuple, object, str]]:
    """The table's first graded reading, as (entry, Transition or None, why not): what
    every worker run of the grade follows. A run that read the table again could be handed
    another table than the one graded (a call counter past the grader's two readings was
    right on both and wrong in every run), so no run asks on_event itself."""
    table_answers(ctx)
    return [(a.case.inputs, None if a.problem else a.value, a.problem) for a in ctx.memo["table read"]]


def _reading(answers: list) -> tuple[dict, str]:
    table, problem = {}, not_implemented(answers)
    for a in answers:
        why = a.problem
        if not why and a.value.next_state not in STATES:
            why = f"next_state {a.value.next_state!r} is not one of {', '.join(STATES)}"
        if not why and any(x not in ACTIONS for x in a.value.actions):
            why = f"actions {a.value.actions!r}: each must be one of {', '.join(ACTIONS)}"
        if why and not problem:
            problem = f"on_event{a.case.inputs}: {why}; every entry of the table must be a valid Transition"
        if not why:
            table[a.case.inputs] = a.value
    return table, problem


def answered_twice(tables: tuple[dict, ...]) -> str:
    """The first entry two readings of the table answered differently, in words ("" when
    they agree)."""
    first, *others = tables
    for other in others:
        for k in TABLE_KEYS:
            if first.get(k) != other.get(k):
                again = show_entry(*k, other[k]).split(" -> ", 1)[1]
                return (f"your table changed between two readings: {show_entry(*k, first[k])} the first "
                        f"time, -> {again} the second; on_event must answer from its three arguments "
                        "alone (the worker reads the table once and follows that reading)")
    return ""


# The worker's side of a request's life: in each phase, which events can come, with which
# in-flight flag, and the phase after. After a cancel or finish (the last four), the worker
# fires step_completed only while the state machine says "cancelling".
FLOW = {
    "queued": (("admit", False, "fresh"), ("cancel", False, "gone")),
    "fresh": (("step_launched", True, "pinned"), ("cancel", False, "cancelled")),
    "pinned": (("step_completed", False, "served"), ("cancel", True, "cancelled_pinned")),
    "served": (("step_launched", True, "pinned"), ("step_completed", False, "served"),
               ("finished", False, "ended"), ("cancel", False, "cancelled")),
    "cancelled_pinned": (("step_completed", False, "cancelled"),),
    "cancelled": (("step_completed", False, "cancelled"),),
    "ended": (("step_completed", False, "ended"),),
    "gone": (("step_completed", False, "gone"),),
    # Unusual, never produced by today's worker, and judged all the same: a request that
    # finishes while a launched step still pins its pages.
    "finishing_pinned": (("finished", True, "ended_pinned"),),
    "ended_pinned": (("step_completed", False, "ended"),),
}
PINNED = ("pinned", "cancelled_pinned", "ended_pinned")
LIVE = ("fresh", "served")
PAST_FENCE = ("cancelled", "ended")                 # over, and no step pins the pages
OVER = ("cancelled_pinned", "cancelled", "ended", "gone", "ended_pinned")
ENDS = ("cancel", "finished")
# Where the model starts: a new request, and (for a table that loses track of its state)
# each state the worker can cancel or finish a request in, with that first event.
STARTS = ((("waiting", "queued"), None), (("admitted", "fresh"), "cancel"),
          (("admitted", "pinned"), "cancel"), (("running", "pinned"), "cancel"),
          (("running", "served"), "cancel"), (("running", "served"), "finished"),
          (("running", "finishing_pinned"), None))
LIVE_EVENTS = ("admit", "step_launched", "step_completed")
# Where a live request may be after each event: admitted or running, holding its pages.
KEEPS = {"waiting": {"admit": ("admitted", "running")},
         "admitted": dict.fromkeys(LIVE_EVENTS, ("admitted", "running")),
         "running": dict.fromkeys(LIVE_EVENTS, ("admitted", "running"))}


@dataclass(frozen=True)
class _Config:
    state: str
    phase: str
    released: bool = False
    cancelled: bool = False


class TableFaults:
    """What the table breaks, per invariant, each with the event path that shows it."""
    RULES = ("pinned", "stop", "reclaim", "once", "terminal")

    def __init__(self, table: dict):
        self.table = table
        self.found: dict[str, dict[str, None]] = {r: {} for r in self.RULES}
        self.releases = False              # some path releases a request's pages
        # On the worker's own paths (from a new request): an ended request first released
        # at its end or fence, and one ended into done.
        self.reclaims = self.ends_in_done = False
        seen: set = set()
        self._own = True
        self._explore(STARTS[:1], seen)    # the worker's own event paths first: the clearest evidence
        self._own = False
        self._explore(STARTS[1:], seen)
        self._direct()

    def vacuous(self, rule: str) -> str:
        """Why the table holds ``rule`` only by doing nothing ("" when it shows it)."""
        if rule in ("pinned", "once") and not self.releases:
            return ("your table releases a request's pages on no event path, so it never shows that "
                    "its releases wait for the fence or happen once")
        if rule == "reclaim" and not self.reclaims:
            return ("on no event path does your table release an ended request's pages at its end "
                    "or its fence (they were released before it ended, or never)")
        if rule == "terminal" and not self.ends_in_done:
            return ("no event path of your table ends a request into done (a request is done before "
                    "it ends, or never), so it never shows that done stays done")
        return ""

    def add(self, rule: str, path: list, why: str) -> None:
        *before, last = path
        prefix = ""
        if before:
            steps = ", ".join(f"{e} -> {tr.next_state!r}" + (f" + {', '.join(tr.actions)}" if tr.actions else "")
                              for _, e, _, tr in before)
            prefix = f"from {before[0][0]!r}: {steps}; then "
        self.found[rule].setdefault(f"{prefix}{show_entry(*last)}: {why}", None)

    def _direct(self) -> None:
        t = self.table
        for (s, e, f), tr in t.items():
            if s == "done" and (tr.next_state != "done" or tr.actions):
                self.add("terminal", [(s, e, f, tr)], "a done request must stay done with no action")
            if f and s in HOLDING and RELEASE in tr.actions:
                self.add("pinned", [(s, e, f, tr)], "releases pages while a step still pins them")
        # A request in "cancelling" has ended (cancelled, or finished under a pinning step):
        # whatever event its table answers, it is not served again and its client, told
        # once already or never to be told, hears nothing more.
        for e, f in product(EVENTS, (False, True)):
            tr = t["cancelling", e, f]
            if tr.next_state in SERVED:
                self.add("stop", [("cancelling", e, f, tr)], f"puts a request that has ended back in "
                                                             f"{tr.next_state!r}, a state the scheduler serves")
            if NOTIFY in tr.actions:
                self.add("stop", [("cancelling", e, f, tr)], "notifies the client again after the request ended")
        for s, f in product(SERVED, (False, True)):
            self._cancel_rules([(s, "cancel", f, t[s, "cancel", f])])
            # The worker stops a finished request itself (a stop there is harmless), but the
            # client of a request that finished must not be told it was cancelled.
            if NOTIFY in t[s, "finished", f].actions:
                self.add("stop", [(s, "finished", f, t[s, "finished", f])],
                         "tells the client of a request that finished that it was cancelled")
            for e in LIVE_EVENTS:
                self._live_rules([(s, e, f, t[s, e, f])])
                keeps = KEEPS[s].get(e)
                nxt = t[s, e, f].next_state
                if keeps and nxt not in keeps:
                    why = ("forgets the admission: a waiting request holds no pages, so its end will "
                           "release none (a leak)") if s == "waiting" else (
                          f"moves a request that still holds its pages to {nxt!r}, where its end will "
                          "not release them (a leak)")
                    self.add("reclaim", [(s, e, f, t[s, e, f])], why)

    def _live_rules(self, path: list) -> None:
        """Only an end stops a request or tells its client: else it is never served again."""
        tr = path[-1][3]
        if STOP in tr.actions:
            self.add("stop", path, "stops scheduling a request that was neither cancelled nor "
                                   "finished: it is never served again")
        if NOTIFY in tr.actions:
            self.add("stop", path, "tells the client of a cancel that never came")

    def _cancel_rules(self, path: list) -> None:
        tr = path[-1][3]
        if STOP not in tr.actions:
            self.add("stop", path, "does not stop scheduling: the cancelled request keeps its place "
                                   "in the queue or the batch")
        n = tr.actions.count(NOTIFY)
        if n != 1:
            self.add("stop", path, "does not notify the client at once" if n == 0 else
                     f"notifies the client {n} times")
        if tr.next_state not in ("cancelling", "done"):
            self.add("stop", path, f"leaves a cancelled request in {tr.next_state!r}, a state "
                                   "the scheduler serves")

    def _after_fence(self, state: str, phase: str) -> str:
        """Lazy or leaked. Past the fence only "cancelling" still hears step completions, and
        it answers each with the same entry: it releases at the first one, or never."""
        if state == "cancelling" and RELEASE in self.table[state, "step_completed", False].actions:
            return ("the pages come back only a step completion after the fence (lazy "
                    "reclamation: they sit idle meanwhile)")
        what = "finished" if phase == "ended" else "cancelled"
        return f"the {what} request's pages are never released (a leak)"

    def _explore(self, starts: tuple, seen: set) -> None:
        queue = deque((_Config(*c), first, []) for c, first in starts)
        while queue:
            cfg, only, path = queue.popleft()
            if cfg.phase in OVER and cfg.state != "cancelling":
                if cfg.phase in ("cancelled_pinned", "ended_pinned") and not cfg.released and path:
                    what = "cancelled" if cfg.phase == "cancelled_pinned" else "finished"
                    self.add("reclaim", path, f"no event comes after this, so the {what} "
                                              "request's pages are never released (a leak)")
                continue
            for event, flag, phase in FLOW[cfg.phase]:
                if only and event != only:
                    continue
                tr = self.table[cfg.state, event, flag]
                step = path + [(cfg.state, event, flag, tr)]
                self._step(cfg, event, phase, tr, step)
                nxt = _Config(tr.next_state, phase, cfg.released or RELEASE in tr.actions,
                              cfg.cancelled or event == "cancel")
                if nxt not in seen:
                    seen.add(nxt)
                    queue.append((nxt, None, step))

    def _step(self, cfg: _Config, event: str, phase: str, tr: Transition, path: list) -> None:
        releases = tr.actions.count(RELEASE)
        self.releases = self.releases or bool(releases)
        ended = phase in OVER and phase != "gone"
        if self._own and ended:
            self.ends_in_done = self.ends_in_done or (cfg.state != "done" and tr.next_state == "done")
            self.reclaims = self.reclaims or bool(releases and not cfg.released)
        if event in LIVE_EVENTS and phase in LIVE + PINNED[:1]:
            self._live_rules(path)
        if releases and phase in PINNED:
            self.add("pinned", path, "releases pages while a step still pins them")
        elif releases and phase in LIVE:
            self.add("pinned", path, "releases the pages of a request still being served "
                                     "(neither cancelled nor finished)")
        if releases > 1 or (releases and cfg.released):
            self.add("once", path, "releases the pages a second time")
        if event == "cancel":
            self._cancel_rules(path)
        elif cfg.cancelled:
            if NOTIFY in tr.actions:
                self.add("stop", path, "notifies the client again")
            if tr.next_state in SERVED:
                self.add("stop", path, f"puts a cancelled request back in {tr.next_state!r}")
        crossed = phase in PAST_FENCE and cfg.phase not in PAST_FENCE
        if crossed and not (releases or cfg.released):
            self.add("reclaim", path, self._after_fence(tr.next_state, phase))


def table_faults(ctx: CheckContext) -> tuple[tuple[TableFaults, ...], str]:
    """Each distinct reading of the table model-checked, or why the table is unusable."""
    if "table_faults" not in ctx.memo:
        tables, problem = table_answers(ctx)
        ctx.memo["table_faults"] = (() if problem else tuple(TableFaults(t) for t in tables), problem)
    return ctx.memo["table_faults"]


# Each rule's criterion (lesson4.table_<rule>), and what a table that keeps it guarantees.
KEPT = {
    "pinned": "pages are released only once no step pins them",
    "stop": "a cancel stops scheduling and notifies the client once, at once, and nothing else stops a live request",
    "reclaim": "every cancelled or finished request is released at its fence",
    "once": "no event sequence releases a request's pages twice",
    "terminal": "done stays done",
}


def _table_measure(ctx: CheckContext, rule: str) -> Measure:
    readings, problem = table_faults(ctx)
    if problem:
        return Measure(0.0, problem)
    for faults in readings:
        measure = _reading_measure(faults, rule)
        if measure.value < 1.0:
            differs = answered_twice(tuple(f.table for f in readings))
            if differs:
                return Measure(0.0, f"{measure.feedback}; {differs}", measure.evidence)
            return measure
    return measure


def _reading_measure(faults: TableFaults, rule: str) -> Measure:
    if faults.vacuous(rule):
        return Measure(0.0, faults.vacuous(rule))
    found = list(faults.found[rule])
    if not found:
        return Measure(1.0, f"all 50 entries and every event path keep it: {KEPT[rule]}")
    more = f" ({len(found)} ways in all)" if len(found) > 1 else ""
    return Measure(0.0, found[0] + more, tuple(found[:20]))


def _table_check(rule: str):
    def measure(ctx: CheckContext, params: dict) -> Measure:
        return _table_measure(ctx, rule)
    return measure


for _rule in TableFaults.RULES:
    check(f"lesson4.table_{_rule}")(_table_check(_rule))
