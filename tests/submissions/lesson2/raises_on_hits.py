"""Broken: raises whenever the request has prefix hits."""
from reference.shapes import Admission


def admit(request, ledger):
    if request.prefix_hit_pages:
        raise ValueError("hits not handled")
    pt = request.page_tokens
    footprint = -(-(request.prompt_tokens + request.max_new_tokens) // pt)
    if footprint > ledger.total_pages:
        return Admission("reject", 0, "over the pool")
    free = ledger.unallocated_pages + ledger.evictable_pages - ledger.reserved_pages
    return Admission("admit", footprint) if footprint <= free else Admission("wait")
