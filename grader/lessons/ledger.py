"""The admission ledger's arithmetic as lesson 2's README defines it, and its words.

These are the lesson's definitions, not a ledger: the judge of every lesson 2 criterion
needs them, and the README states each one. Pages are counted with the worker's own
arithmetic (reference.sizing).
"""
from __future__ import annotations

from grader.engine.text import plural
from reference.shapes import AdmissionRequest, LedgerView
from reference.sizing import pages_for


def footprint(r: AdmissionRequest) -> int:
    """Pages the request's whole context can occupy: pages_for(prompt + max_new)."""
    return pages_for(r.prompt_tokens + r.max_new_tokens, r.page_tokens)


def promise(r: AdmissionRequest) -> int:
    """The exact reservation: the new pages it may ever allocate (hits are referenced)."""
    return footprint(r) - r.prefix_hit_pages


def inactive(r: AdmissionRequest) -> int:
    return r.prefix_hit_pages - r.prefix_hit_active


def need(r: AdmissionRequest) -> int:
    """Capacity admission takes now: the promise plus the inactive hits it reactivates."""
    return promise(r) + inactive(r)


def available(v: LedgerView) -> int:
    """Capacity not yet promised: unallocated + evictable - outstanding reservations."""
    return v.unallocated_pages + v.evictable_pages - v.reserved_pages


def request_words(r: AdmissionRequest) -> str:
    hits = (f"{r.prefix_hit_pages} prefix hits, {r.prefix_hit_active} active"
            if r.prefix_hit_pages else "0 prefix hits")
    return (f"prompt {r.prompt_tokens} + max_new {r.max_new_tokens} at {r.page_tokens} "
            f"tokens/page = {plural(footprint(r), 'page')}, {hits}")


def ledger_words(v: LedgerView) -> str:
    # Every field admit is given, so the call can be made again from the feedback alone.
    return (f"{v.unallocated_pages} unallocated + {v.evictable_pages} evictable - "
            f"{v.reserved_pages} promised to running requests = {available(v)} available "
            f"({v.running} running)")
