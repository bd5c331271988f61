"""A different correct solution: other arithmetic, reasons checked in another order."""
from reference.shapes import Verdict


def kv_bytes_per_token(model):
    per_layer = model.kv_heads * model.head_dim * model.dtype_bytes
    return per_layer * model.layers * 2


def pages_for(tokens, page_tokens):
    whole, rest = divmod(tokens, page_tokens)
    return whole + (1 if rest else 0)


def pool_pages(model, worker):
    left = worker.device_bytes - worker.reserved_bytes - model.weight_bytes
    if left <= 0:
        return 0
    return left // (kv_bytes_per_token(model) * worker.page_tokens)


def worst_case_pages(request, worker):
    return pages_for(request.prompt_tokens + request.max_new_tokens, worker.page_tokens)


def check_contract(request, model, worker):
    c = worker.cost
    p, m = request.prompt_tokens, request.max_new_tokens
    if m >= 2 and c.step_time((p + m - 1,), 0, 0) > request.slo.gap_s:
        return Verdict(False, "gap_unreachable")
    if p + m > model.max_context:
        return Verdict(False, "over_max_context")
    if worst_case_pages(request, worker) > pool_pages(model, worker):
        return Verdict(False, "over_pool")
    if p and c.step_time((), p, 0) > request.slo.ttft_s:
        return Verdict(False, "ttft_unreachable")
    if not p:
        return Verdict(False, "empty_prompt")
    if not m:
        return Verdict(False, "no_output_budget")
    return Verdict(True)
