"""Wrong: rejects whatever does not fit right now, instead of letting it wait."""
from reference.shapes import Admission


def admit(request, ledger):
    pt = request.page_tokens
    footprint = -(-(request.prompt_tokens + request.max_new_tokens) // pt)
    new = footprint - request.prefix_hit_pages
    need = new + request.prefix_hit_pages - request.prefix_hit_active
    free = ledger.unallocated_pages + ledger.evictable_pages - ledger.reserved_pages
    return Admission("admit", new) if need <= free else Admission("reject", 0, "busy")
