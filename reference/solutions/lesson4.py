"""Lesson 4 reference solution: cancellation, safe reclamation, prefix ownership.

The design sheet's faulty variants (release at the cancel, keys without the scope, ...)
are distortions around these functions (reference/knobs.py), not variants of them.
"""
import struct
from hashlib import blake2b

from reference.shapes import PageInfo, Transition

_STOP, _NOTIFY, _RELEASE = "stop_scheduling", "notify_client", "release_pages"


def on_event(state: str, event: str, step_in_flight: bool) -> Transition:
    def reclaim(next_if_pinned: str, actions: tuple) -> Transition:
        # Pages pinned by a launched step are released only at its completion (the fence).
        if step_in_flight:
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
        return Transition("done", (_RELEASE,))
    return Transition(state)


def prefix_key(scope: str, parent_key: str, block_tokens: tuple) -> str:
    # Every field is length-prefixed, so no scope text can imitate a boundary; the tokens
    # are fixed-width, so no separator can be forged. One hash call: the worker asks once
    # per prompt page, so the fields are kept short (4-byte lengths, 4-byte ids while they
    # fit): a scope of up to 23 bytes, a parent key of 32 and 16 ids make one 128-byte block.
    s = scope.encode("utf-8", "surrogatepass")
    p = parent_key.encode("utf-8", "surrogatepass")
    try:
        tokens = _PACK[len(block_tokens)](4, *block_tokens)
    except (KeyError, struct.error):      # a block length not seen yet, or a wide id
        tokens = _token_bytes(block_tokens)
    return blake2b(b"".join((len(s).to_bytes(4, "little"), s, len(p).to_bytes(4, "little"), p,
                             tokens)), digest_size=16).hexdigest()


# Block length -> the packer of a width byte and that many 4-byte ids. Asked once a page, so
# the common case is one dictionary probe and one pack, not a call of its own.
_PACK: dict = {}


def _token_bytes(block_tokens: tuple) -> bytes:
    # A width byte first: a block of 4-byte ids never reads as one of 8-byte ids.
    n = len(block_tokens)
    pack = _PACK.setdefault(n, struct.Struct(f"<B{n}I").pack)
    try:
        return pack(4, *block_tokens)
    except struct.error:      # an id past 2**32 - 1 (or below 0)
        return struct.pack(f"<B{n}q", 8, *block_tokens)


def publishable(pages: tuple[PageInfo, ...]) -> tuple:
    # Only a full prompt page whose write completed holds what a later hit will read.
    return tuple(p.index for p in pages if not p.published and p.prompt_tokens == p.page_tokens
                 and p.written_tokens >= p.prompt_tokens)
