"""Lesson 2, written from the README alone (without reading the reference solution): an
alternative correct solution that must keep full marks."""
from reference.shapes import Admission, AdmissionRequest, LedgerView


def _pages(tokens: int, page_tokens: int) -> int:
    return (tokens + page_tokens - 1) // page_tokens


def admit(request: AdmissionRequest, ledger: LedgerView) -> Admission:
    footprint = _pages(request.prompt_tokens + request.max_new_tokens, request.page_tokens)
    if footprint > ledger.total_pages:
        return Admission("reject", 0, f"footprint {footprint} > pool {ledger.total_pages}")
    promise = footprint - request.prefix_hit_pages            # shared pages are not new
    reactivated = request.prefix_hit_pages - request.prefix_hit_active
    takes = promise + reactivated                             # inactive hits leave the evictable set
    free = ledger.unallocated_pages + ledger.evictable_pages
    unpromised = free - ledger.reserved_pages
    if takes <= unpromised:
        return Admission("admit", promise, f"takes {takes} of {unpromised}")
    return Admission("wait", 0, f"takes {takes}, only {unpromised} unpromised")
