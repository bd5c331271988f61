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

    Returns ``Admission(decision, reserve_pages, reason)``, ``decision`` one of DECISIONS,
    ``reserve_pages`` an int (read only when admitted) and ``reason`` a str: an answer
    of another type is unusable, whatever its decision.
    What the grader checks (README, "How you are graded"):
    - safety: no admission takes more capacity than is free and not yet promised to
      anyone, counting every page the admission takes out of free capacity now, and no
      promise is smaller than every page the request may allocate up to max_new_tokens;
    - reservations: an admitted request's ``reserve_pages`` is exactly the new pages it
      may ever allocate (pages it shares through prefix hits are not new); an exact fit
      is admitted;
    - liveness: a request that could not fit even on an idle worker with the whole pool
      is rejected (waiting would block the FCFS queue for good); a request that fits the
      pool is never rejected;
    - efficiency: pages a running request already holds cost nothing to share, so a
      ledger that pays for them again admits too little.
    Edge cases that matter: a context that is an exact page multiple, hits that are all
    active, all inactive or mixed, a footprint of exactly the whole pool (possible, on
    an idle worker), a ledger whose free pages are all promised.

    ``reason`` is free text for your logs and is not graded. ``reserve_pages`` is read only
    when the request is admitted.

    Example (README, calculation 1): prompt 100, max_new 40, 16-token pages, no hits,
    with 30 unallocated, 0 evictable and 22 reserved pages: wait. With 21 reserved:
    admit with reserve_pages = 9.
    """
    raise NotImplementedError("admit is not implemented yet")
