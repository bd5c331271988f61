"""A plain correct solution (tests): the base that every lesson 4 mutant in mutants.yaml
changes in one place. It is graded for full marks like alt_correct.py."""
import hashlib

from reference.shapes import Transition

STOP, NOTIFY, RELEASE = "stop_scheduling", "notify_client", "release_pages"


def on_event(state, event, step_in_flight):
    if state == "done":
        return Transition("done")
    if event == "cancel":
        if state == "waiting":
            return Transition("done", (STOP, NOTIFY))
        if state == "cancelling":
            return Transition("cancelling")
        if step_in_flight:
            return Transition("cancelling", (STOP, NOTIFY))
        return Transition("done", (STOP, NOTIFY, RELEASE))
    if state == "waiting" and event == "admit":
        return Transition("admitted")
    if state == "admitted" and event == "step_launched":
        return Transition("running")
    if state == "running" and event == "finished":
        if step_in_flight:
            return Transition("cancelling", (STOP,))
        return Transition("done", (STOP, RELEASE))
    if state == "cancelling" and event == "step_completed" and not step_in_flight:
        return Transition("done", (RELEASE,))
    return Transition(state)


def prefix_key(scope, parent_key, block_tokens):
    h = hashlib.sha256()
    for part in (scope, parent_key):
        data = part.encode("utf-8")
        h.update(len(data).to_bytes(8, "little") + data)
    h.update(",".join(map(str, block_tokens)).encode())
    return h.hexdigest()


def publishable(pages):
    return tuple(p.index for p in pages if p.prompt_tokens == p.page_tokens
                 and p.written_tokens >= p.page_tokens and not p.published)
