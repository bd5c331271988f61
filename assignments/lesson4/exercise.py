"""Lesson 4 exercise: cancellation, safe reclamation and prefix ownership.

Implement the three functions below. Read assignments/lesson4/README.md first: it walks
through the state machine, the fence, shared pages and the prefix key with timelines
from real runs.

Your file runs in a sandbox. You may import the standard library and
``reference.shapes``, nothing else from the course. Every argument is a plain value or
a frozen dataclass of plain values; every return value is a ``Transition``, a ``str`` or
a tuple of ints.

Check your work with:  grader check lesson4
"""
from reference.shapes import ACTIONS, EVENTS, STATES, PageInfo, Transition

# STATES  = ("waiting", "admitted", "running", "cancelling", "done")
# EVENTS  = ("admit", "step_launched", "step_completed", "finished", "cancel")
# ACTIONS = ("stop_scheduling", "notify_client", "release_pages")


def on_event(state: str, event: str, step_in_flight: bool) -> Transition:
    """One transition of a request's state machine: Transition(next_state, actions).

    States: waiting (not admitted, no pages), admitted (pages, not yet in a step),
    running, cancelling (cancelled, but a launched step still pins its pages), done
    (terminal). ``step_in_flight`` is True when a launched step that has not completed
    yet references this request's pages.

    The worker reads your whole table once (all 5 x 5 x 2 inputs) and then follows it.
    It must keep these invariants on every entry and every sequence of events:
    - never "release_pages" while a step is in flight: reclamation waits for the fence
      (the completion of the last launched step that pins the pages);
    - a cancel is immediate for the client: "stop_scheduling" and "notify_client" (once)
      in the cancel transition itself, and the request never returns to a state the
      scheduler serves;
    - every cancelled or finished request is released exactly once, at its fence: at the
      cancel (or finish) when no step pins it, else at the step_completed that ends the pin;
    - done stays done, with no action.
    Any (state, event) pair that means nothing for a request returns Transition(state).
    """
    raise NotImplementedError("on_event: the cancellation state machine (see the README's table)")


def prefix_key(scope: str, parent_key: str, block_tokens: tuple) -> str:
    """The prefix-cache key of one full prompt block.

    ``scope`` is the tenant, ``parent_key`` the key of the previous block ("" for the
    first block), ``block_tokens`` the block's token ids (ints >= 0).
    - deterministic across processes: the same inputs give the same key in any process
      (Python's hash() of a str is salted per process, so do not use it);
    - scope-separated: two different scopes never share a key, whatever characters a
      scope name holds (a separator the name may contain is not a boundary);
    - position-bound: the key depends on parent_key, so one block at two positions, or
      after two different prefixes, gets two keys;
    - a non-empty string of at most 512 characters.
    """
    raise NotImplementedError("prefix_key: an injective, deterministic key of (scope, parent_key, block)")


def publishable(pages: tuple) -> tuple:
    """Which of a request's offered pages may enter the prefix cache: their ``index`` values.

    ``pages`` is a tuple of PageInfo(index, prompt_tokens, page_tokens, written_tokens,
    published). A page may be published when it is full of prompt tokens
    (prompt_tokens == page_tokens), every slot's write has completed (written_tokens ==
    page_tokens) and it is not already published. The worker also asks after a chunk of a
    request cancelled mid-prefill: the pages that chunk completed are publishable, the
    rest are not.
    """
    raise NotImplementedError("publishable: the indices of full, written, unpublished pages")
