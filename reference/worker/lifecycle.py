"""The request state machine (lesson 4's on_event), read once per run as a table, and the
events that drive it: cancel, stop, end.
"""
from __future__ import annotations

from reference.records import Violation
from reference.shapes import ACTIONS, EVENTS, STATES, Transition
from reference.worker.decisions import shown
from reference.worker.sequence import Sequence

_STOP, _NOTIFY, _RELEASE = ACTIONS


class Lifecycle:
    def _read_table(self) -> dict:
        """The policy's transitions, read once for every (state, event, in-flight)."""
        table = {}
        for s in STATES:
            for e in EVENTS:
                for f in (False, True):
                    tr = self._decide("on_event", Transition, s, e, f)
                    # At most the actions the course defines: a transition that repeats one
                    # 100,000 times would be applied on every event of every request.
                    ok = (tr is not None and tr.next_state in STATES and isinstance(tr.actions, tuple)
                          and len(tr.actions) <= len(ACTIONS) and all(a in ACTIONS for a in tr.actions))
                    if not ok:
                        self.violations.append(Violation("invalid_decision", 0.0, (), detail=(
                            f"on_event({s!r}, {e!r}, {f}) returned {shown(tr)}; treated as no change")))
                        tr = Transition(s)
                    table[s, e, f] = tr
        return table

    def _fire(self, live: Sequence, event: str, in_flight: bool) -> None:
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

    def _cancel(self, live: Sequence) -> None:
        if live.outcome or live.cancel_s is not None or live.phase == "new":
            return
        live.cancel_s = self.now
        self.progress_step = self.completed
        in_flight = self._in_flight(live)
        live.fence_s = self.inflight[1] if in_flight else self.now
        live.outcome = "cancelled_by_client"
        self._fire(live, "cancel", in_flight)
        if not live.stopped:
            self._flag(live, "scheduled_after_cancel",
                       f"{live.req.id} kept being scheduled after its cancel")

    def _stop(self, live: Sequence) -> None:
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

    def _end(self, live: Sequence, outcome: str, reason: str = "") -> None:
        """A terminal fact: the request completed, or was rejected."""
        live.finish_s = self.now
        self.progress_step = self.completed
        if not live.outcome:
            live.outcome, live.reason = outcome, reason
        if outcome == "rejected":
            live.stopped, live.phase, live.state = True, "done", "done"
            return
        self._stop(live)
        self._fire(live, "finished", False)

