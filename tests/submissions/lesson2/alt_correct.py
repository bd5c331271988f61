"""A different correct ledger: other arithmetic, other order, other reason strings."""
from reference.shapes import Admission


def _pages(tokens, page_tokens):
    whole, rest = divmod(tokens, page_tokens)
    return whole + (rest > 0)


def admit(request, ledger):
    whole = _pages(request.prompt_tokens + request.max_new_tokens, request.page_tokens)
    promise = whole - request.prefix_hit_pages
    # Reactivated cached pages leave the evictable set: take them off capacity, not onto need.
    reactivated = request.prefix_hit_pages - request.prefix_hit_active
    spare = ledger.evictable_pages - reactivated + ledger.unallocated_pages
    spare -= ledger.reserved_pages
    if promise <= spare:
        return Admission(decision="admit", reserve_pages=promise, reason="ok")
    if whole <= ledger.total_pages:
        return Admission(decision="wait", reason=f"short by {promise - spare}")
    return Admission(decision="reject", reason="larger than the device")
