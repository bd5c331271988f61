"""Lesson 4 reference solution: cancellation, safe reclamation, prefix ownership.

Knobs are the design sheet's ``cancellation`` values; the non-default ones are the
faulty variants the lesson and the prefix ownership experiment replay.
"""
import hashlib
from array import array

from reference.shapes import PageInfo, Transition

_STOP, _NOTIFY, _RELEASE = "stop_scheduling", "notify_client", "release_pages"


def on_event(state: str, event: str, step_in_flight: bool, *,
             release: str = "at_fence",     # or "at_cancel" (faulty), "never" (faulty)
             ) -> Transition:
    def reclaim(next_if_pinned: str, actions: tuple) -> Transition:
        # Pages pinned by a launched step are released only at its completion (the fence).
        if release == "never":
            return Transition("done", actions)
        if step_in_flight and release == "at_fence":
            return Transition(next_if_pinned, actions)
        return Transition("done", actions + (_RELEASE,))

    if state == "done":
        return Transition("done")
    if event == "cancel":
        if state == "waiting":
            return Transition("done", (_STOP, _NOTIFY))
        if state == "cancelling":
            return Transition("cancelling")
        return reclaim("cancelling", (_STOP, _NOTIFY))
    if state == "waiting" and event == "admit":
        return Transition("admitted")
    if state == "admitted" and event == "step_launched":
        return Transition("running")
    if state == "running" and event == "finished":
        return reclaim("cancelling", (_STOP,))
    if state == "cancelling" and event == "step_completed" and not step_in_flight:
        return Transition("done", () if release == "never" else (_RELEASE,))
    return Transition(state)


def prefix_key(scope: str, parent_key: str, block_tokens: tuple, *,
               with_scope: bool = True, with_parent: bool = True) -> str:
    # Every field is length-prefixed, so no scope text can imitate a boundary.
    h = hashlib.blake2b(digest_size=16)
    for part in ((scope if with_scope else ""), (parent_key if with_parent else "")):
        data = part.encode("utf-8", "surrogatepass")
        h.update(len(data).to_bytes(8, "little"))
        h.update(data)
    h.update(array("q", block_tokens).tobytes())  # fixed-width: no separator to forge
    return h.hexdigest()


def publishable(pages: tuple[PageInfo, ...], *, partial: bool = False,
                require_written: bool = True) -> tuple:
    out = []
    for p in pages:
        if p.published or p.prompt_tokens == 0:
            continue
        full = p.prompt_tokens == p.page_tokens
        written = p.written_tokens >= p.prompt_tokens
        if (full or partial) and (written or not require_written):
            out.append(p.index)
    return tuple(out)
