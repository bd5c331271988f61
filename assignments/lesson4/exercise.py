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
    - every cancelled or finished request is released exactly once, at its fence, not
      later (when no step pins the pages, the fence has already passed); a waiting
      request holds no pages;
    - done stays done, with no action.
    Any (state, event) pair that means nothing for a request returns Transition(state).
    """
    raise NotImplementedError("on_event is not implemented yet")


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
    - the tokens count one by one: two different blocks never share a key;
    - a non-empty string of at most 512 characters.
    The grader asks for many pairs of inputs that must get different keys (README, "How
    you are graded"), never for the text of a key.
    """
    raise NotImplementedError("prefix_key is not implemented yet")


def publishable(pages: tuple) -> tuple:
    """Which of a request's offered pages may enter the prefix cache: their ``index`` values.

    ``pages`` is a tuple of PageInfo(index, prompt_tokens, page_tokens, written_tokens,
    published): ``index`` is the page's position in the request's context (not in the
    tuple), ``prompt_tokens`` how many of its slots hold prompt tokens, ``written_tokens``
    how many slots a completed step has written.

    Every later request that hits a published page reads it as its own prompt, so a page
    may be returned only when all it holds is this prompt's tokens with their KV written;
    a page already in the cache gains nothing by being published again (README, "Which
    pages may be published"). The worker also asks after the chunk that was in flight
    when the request was cancelled: what that chunk completed is as good as any other
    completed write. Order does not matter; return a tuple of ints.
    """
    raise NotImplementedError("publishable is not implemented yet")
