"""Wrong: never rejects; a request that can never fit waits at the head of the queue forever."""
from reference.shapes import Admission


def admit(request, ledger):
    pt = request.page_tokens
    footprint = -(-(request.prompt_tokens + request.max_new_tokens) // pt)
    new = footprint - request.prefix_hit_pages
    need = new + request.prefix_hit_pages - request.prefix_hit_active
    free = ledger.unallocated_pages + ledger.evictable_pages - ledger.reserved_pages
    if need <= free:
        return Admission("admit", new, "fits")
    return Admission("wait", 0, "wait for pages")
