"""Lesson 2 exercise: the admission ledger.

Implement ``admit`` below. Read assignments/lesson2/README.md first: it explains the
ledger and works through the page counts with real numbers.

Your file runs in a sandbox. You may import the standard library and
``reference.shapes``, nothing else from the course. Both arguments are frozen
dataclasses of plain ints and strings. Return an ``Admission``.

The worker calls ``admit`` for the request at the head of its FCFS queue: when the
request arrives, and again (with fresh numbers) whenever pages are released or a step
completes while it waits. Every other decision (contract, chunks, cancellation) is the
reference's.

Check your work with:  grader check lesson2
"""
from reference.shapes import Admission, AdmissionRequest, LedgerView

# The valid decisions are in reference.shapes.DECISIONS: "admit", "wait", "reject".


def admit(request: AdmissionRequest, ledger: LedgerView) -> Admission:
    """Admit the request with a promise of pages, make it wait, or reject it.

    The request (``AdmissionRequest``):
        prompt_tokens, max_new_tokens, page_tokens
        prefix_hit_pages   its leading full prompt pages found in the prefix cache; the
                           worker references them instead of allocating new ones
        prefix_hit_active  how many of those hits a running request references right now
    The ledger (``LedgerView``):
        total_pages        the whole pool
        unallocated_pages  pages nobody holds
        evictable_pages    cached pages nobody references: free capacity, evicted on demand
        reserved_pages     outstanding: promised to running requests, not yet allocated
        running            how many requests are running

    The rules (README, "The ledger"):
    1. footprint = pages_for(prompt_tokens + max_new_tokens, page_tokens): reserve for
       max_new_tokens, never for the output you expect. Nobody knows the true length.
    2. If footprint > total_pages, the request can never fit, even on an idle worker:
       return Admission("reject", 0, reason). Don't make it wait. It would block the
       queue forever.
    3. The promise is the new pages it may ever allocate:
           reserve = footprint - prefix_hit_pages
       Hits are referenced, not allocated, so they are not part of the promise.
    4. Capacity admission takes now:
           need = reserve + (prefix_hit_pages - prefix_hit_active)
       Active hits cost nothing more. Inactive hits leave the evictable set when this
       request references them, so they use capacity.
    5. Capacity not yet promised:
           available = unallocated_pages + evictable_pages - reserved_pages
       Free memory is not capacity: reserved_pages are already promised.
    6. need <= available: return Admission("admit", reserve, reason).
       Otherwise: return Admission("wait", 0, reason). It fits the pool, just not now.

    ``reserve_pages`` is graded exactly for admitted requests. ``reason`` is free text
    for your logs and is not graded.

    Example (README, calculation 1): prompt 100, max_new 40, 16-token pages, no hits:
    footprint = 9, reserve = 9, need = 9. With 30 unallocated, 0 evictable and 22
    reserved, available = 8, so the request waits. With 21 reserved it is admitted
    with reserve_pages = 9.
    """
    raise NotImplementedError("admit: reserve pages_for(prompt + max_new) - prefix hits; "
                              "admit when need <= available, reject what can never fit")
