"""Wrong: treats inactive cached hits as free, though reusing them takes them out of capacity."""
from reference.shapes import Admission


def admit(request, ledger):
    pt = request.page_tokens
    footprint = -(-(request.prompt_tokens + request.max_new_tokens) // pt)
    new = footprint - request.prefix_hit_pages
    if footprint > ledger.total_pages:
        return Admission("reject", 0, "over the pool")
    free = ledger.unallocated_pages + ledger.evictable_pages - ledger.reserved_pages
    if new <= free:
        return Admission("admit", new, "fits")
    return Admission("wait", 0, "not yet")
