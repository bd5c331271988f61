"""Wrong: counts active shared prefix pages as if they were new, so it pays for them twice."""
from reference.shapes import Admission


def admit(request, ledger):
    pt = request.page_tokens
    footprint = -(-(request.prompt_tokens + request.max_new_tokens) // pt)
    new = footprint - request.prefix_hit_pages + request.prefix_hit_active
    need = new + request.prefix_hit_pages - request.prefix_hit_active
    if footprint > ledger.total_pages:
        return Admission("reject", 0, "over the pool")
    free = ledger.unallocated_pages + ledger.evictable_pages - ledger.reserved_pages
    if need <= free:
        return Admission("admit", new, "fits")
    return Admission("wait", 0, "not yet")
