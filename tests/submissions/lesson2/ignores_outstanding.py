"""Wrong: free memory taken for capacity: outstanding reservations of running requests ignored."""
from reference.shapes import Admission


def admit(request, ledger):
    pt = request.page_tokens
    footprint = -(-(request.prompt_tokens + request.max_new_tokens) // pt)
    new = footprint - request.prefix_hit_pages
    need = new + request.prefix_hit_pages - request.prefix_hit_active
    if footprint > ledger.total_pages:
        return Admission("reject", 0, "over the pool")
    if need <= ledger.unallocated_pages + ledger.evictable_pages:
        return Admission("admit", new, "fits in free memory")
    return Admission("wait", 0, "not yet")
