"""Another correct solution (tests): the ends of a request as a table of their own, the key
of a JSON text of the three fields, and a page judged full and written one field at a time."""
import hashlib
import json

from reference.shapes import Transition

S, N, R = "stop_scheduling", "notify_client", "release_pages"
END = {  # (state, event) -> (next when pinned, next when free, actions when pinned, actions when free)
    ("admitted", "cancel"): ("cancelling", "done", (S, N), (S, N, R)),
    ("running", "cancel"): ("cancelling", "done", (S, N), (S, N, R)),
    ("running", "finished"): ("cancelling", "done", (S,), (S, R)),
}


def on_event(state, event, step_in_flight):
    if (state, event) in END:
        pinned, free, act_p, act_f = END[state, event]
        return Transition(pinned, act_p) if step_in_flight else Transition(free, act_f)
    simple = {("waiting", "admit"): Transition("admitted"),
              ("waiting", "cancel"): Transition("done", (S, N)),
              ("admitted", "step_launched"): Transition("running")}
    if (state, event) in simple:
        return simple[state, event]
    if (state, event, step_in_flight) == ("cancelling", "step_completed", False):
        return Transition("done", (R,))
    return Transition(state)


def prefix_key(scope, parent_key, block_tokens):
    text = json.dumps([scope, parent_key, list(block_tokens)], ensure_ascii=True)
    return hashlib.sha3_256(text.encode("ascii")).hexdigest()[:32]


def publishable(pages):
    out = []
    for p in pages:
        full = p.prompt_tokens >= p.page_tokens
        done = p.written_tokens == p.page_tokens
        if full and done and not p.published:
            out.append(p.index)
    return tuple(out)
