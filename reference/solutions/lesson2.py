"""Lesson 2 reference solution: the admission ledger.

A valid submission as it stands. The keyword-only knobs are the design sheet's
``admission_ledger`` values; their non-default values are the faulty ledgers the
lesson discusses, so the worker can replay them.
"""
from reference.shapes import Admission, AdmissionRequest, LedgerView


def _pages_for(tokens: int, page_tokens: int) -> int:
    return -(-tokens // page_tokens)


def admit(request: AdmissionRequest, ledger: LedgerView, *,
          reserve: str = "prompt_and_output",    # or "prompt_only" (faulty)
          active_hits: str = "shared",            # or "as_new" (faulty: pays twice)
          inactive_hits: str = "consume",         # or "free" (faulty)
          outstanding: str = "count",             # or "ignore" (faulty)
          impossible: str = "reject",             # or "wait" (faulty: waits forever)
          ) -> Admission:
    pt = request.page_tokens
    tokens = request.prompt_tokens
    if reserve == "prompt_and_output":
        tokens += request.max_new_tokens
    footprint = _pages_for(tokens, pt)
    # Prefix hits are pages the request references instead of allocating; the reservation
    # promises only the new pages it will ever allocate.
    new_pages = footprint - request.prefix_hit_pages
    if active_hits == "as_new":
        new_pages += request.prefix_hit_active
    inactive = request.prefix_hit_pages - request.prefix_hit_active
    # Reactivating an inactive hit takes the page out of the evictable set, so it uses
    # capacity now even though the request does not allocate it.
    need = new_pages + (inactive if inactive_hits == "consume" else 0)

    if impossible == "reject" and footprint > ledger.total_pages:
        return Admission("reject", 0, f"needs {footprint} pages, the pool has {ledger.total_pages}")
    available = ledger.unallocated_pages + ledger.evictable_pages
    if outstanding == "count":
        available -= ledger.reserved_pages
    if need <= available:
        return Admission("admit", new_pages, f"{need} of {available} available pages")
    return Admission("wait", 0, f"needs {need} pages, {available} available")
