"""Lesson 2 reference solution: the admission ledger.

A valid submission as it stands (it imports nothing but ``reference.shapes``). The design
sheet's faulty ledgers are not written here: they are distortions of what any correct
ledger is asked or answers (reference/knobs.py).
"""
from reference.shapes import Admission, AdmissionRequest, LedgerView


def _pages_for(tokens: int, page_tokens: int) -> int:
    return -(-tokens // page_tokens)


def admit(request: AdmissionRequest, ledger: LedgerView) -> Admission:
    footprint = _pages_for(request.prompt_tokens + request.max_new_tokens, request.page_tokens)
    # Prefix hits are pages the request references instead of allocating; the reservation
    # promises only the new pages it will ever allocate.
    new_pages = footprint - request.prefix_hit_pages
    # Reactivating an inactive hit takes the page out of the evictable set, so it uses
    # capacity now even though the request does not allocate it.
    need = new_pages + request.prefix_hit_pages - request.prefix_hit_active
    if footprint > ledger.total_pages:
        return Admission("reject", 0, f"needs {footprint} pages, the pool has {ledger.total_pages}")
    available = ledger.unallocated_pages + ledger.evictable_pages - ledger.reserved_pages
    if need <= available:
        return Admission("admit", new_pages, f"{need} of {available} available pages")
    return Admission("wait", 0, f"needs {need} pages, {available} available")
