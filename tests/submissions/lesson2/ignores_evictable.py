"""Wrong but safe: evictable (cached, unreferenced) pages are not counted as capacity."""
from reference.shapes import Admission


def admit(request, ledger):
    pt = request.page_tokens
    footprint = -(-(request.prompt_tokens + request.max_new_tokens) // pt)
    new = footprint - request.prefix_hit_pages
    if footprint > ledger.total_pages:
        return Admission("reject", 0, "over the pool")
    free = ledger.unallocated_pages - ledger.reserved_pages
    return Admission("admit", new) if new <= free else Admission("wait")
