"""A correct solution (tests): plain_correct.py with a key that escapes each field, the escape
itself included, then joins the fields with '|'. The key search forges separators escaped
while their escape is not; an encoding that escapes both keeps full marks."""
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


def _escaped(field):
    return field.replace("\\", "\\\\").replace("|", "\\|")


def prefix_key(scope, parent_key, block_tokens):
    text = "|".join((_escaped(scope), _escaped(parent_key), ",".join(map(str, block_tokens))))
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def publishable(pages):
    return tuple(p.index for p in pages if p.prompt_tokens == p.page_tokens
                 and p.written_tokens >= p.page_tokens and not p.published)
