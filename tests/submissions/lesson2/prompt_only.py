"""Wrong: reserves the prompt's pages only, so the output has no promise behind it."""
from reference.shapes import Admission


def admit(request, ledger):
    pt = request.page_tokens
    pages = -(-request.prompt_tokens // pt)
    new = pages - request.prefix_hit_pages
    need = new + request.prefix_hit_pages - request.prefix_hit_active
    if pages > ledger.total_pages:
        return Admission("reject", 0, "prompt over the pool")
    free = ledger.unallocated_pages + ledger.evictable_pages - ledger.reserved_pages
    if need <= free:
        return Admission("admit", new, "prompt fits")
    return Admission("wait", 0, "prompt does not fit yet")
