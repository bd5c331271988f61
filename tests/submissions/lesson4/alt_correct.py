"""A different correct solution: an explicit table, a JSON key under SHA-1, a set filter."""
import hashlib
import json

from reference.shapes import Transition


_TABLE = {
    # (state, event) -> next state, for the transitions without actions
    ("waiting", "admit"): "admitted",
    ("admitted", "step_launched"): "running",
}


def on_event(state, event, step_in_flight):
    if state == "done":
        return Transition("done", ())
    if event == "cancel" and state in ("waiting", "admitted", "running"):
        told = ("notify_client", "stop_scheduling")        # another order, same actions
        if state == "waiting":
            return Transition("done", told)
        if step_in_flight:
            return Transition("cancelling", told)
        return Transition("done", told + ("release_pages",))
    if event == "finished" and state == "running":
        # Finished while a launched step still pins the pages: they wait for its completion.
        if step_in_flight:
            return Transition("cancelling", ("stop_scheduling",))
        return Transition("done", ("release_pages", "stop_scheduling"))
    if state == "cancelling" and event == "step_completed" and not step_in_flight:
        return Transition("done", ("release_pages",))
    return Transition(_TABLE.get((state, event), state), ())


def prefix_key(scope, parent_key, block_tokens):
    text = json.dumps([scope, parent_key, list(block_tokens)], ensure_ascii=False)
    return "k" + hashlib.sha1(text.encode("utf-8")).hexdigest()


def publishable(pages):
    ready = set()
    for page in pages:
        full = page.prompt_tokens == page.page_tokens
        if full and page.written_tokens == page.page_tokens and not page.published:
            ready.add(page.index)
    return tuple(sorted(ready, reverse=True))
