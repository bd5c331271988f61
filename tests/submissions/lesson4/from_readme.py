"""Lesson 4, written from the README alone (without reading the reference solution): an
alternative correct solution that must keep full marks."""
import hashlib
import json

from reference.shapes import PageInfo, Transition

SERVED = ("waiting", "admitted", "running")
HOLDS = ("admitted", "running", "cancelling")


def on_event(state: str, event: str, step_in_flight: bool) -> Transition:
    if state == "done":
        return Transition("done")
    if event == "cancel" and state in SERVED:
        told = ("stop_scheduling", "notify_client")
        if state == "waiting":                    # holds no pages
            return Transition("done", told)
        if step_in_flight:                        # pinned: the fence is still ahead
            return Transition("cancelling", told)
        return Transition("done", told + ("release_pages",))
    if state == "cancelling" and event == "step_completed" and not step_in_flight:
        return Transition("done", ("release_pages",))
    if state == "waiting" and event == "admit":
        return Transition("admitted")
    if state in ("admitted", "running") and event == "step_launched":
        return Transition("running")
    if state == "running" and event == "finished":
        if step_in_flight:
            return Transition("cancelling")       # wait for the fence, nothing to tell
        return Transition("done", ("release_pages",))
    return Transition(state)


def prefix_key(scope: str, parent_key: str, block_tokens: tuple) -> str:
    # JSON quotes and escapes each string, so no field can be read as part of another.
    text = json.dumps([scope, parent_key, [int(t) for t in block_tokens]], ensure_ascii=True)
    return hashlib.sha256(text.encode("ascii")).hexdigest()


def publishable(pages: tuple) -> tuple:
    return tuple(p.index for p in pages
                 if p.prompt_tokens == p.page_tokens and p.written_tokens == p.page_tokens
                 and not p.published)
