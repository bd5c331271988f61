"""Lesson 1, written from the README alone (without reading the reference solution): an
alternative correct solution that must keep full marks."""
from reference.shapes import ModelSpec, RequestView, Verdict, WorkerSpec


def kv_bytes_per_token(model: ModelSpec) -> int:
    per_head = model.head_dim * model.dtype_bytes          # one vector
    return 2 * per_head * model.kv_heads * model.layers     # K and V, every KV head, every layer


def pages_for(tokens: int, page_tokens: int) -> int:
    whole, part = divmod(tokens, page_tokens)
    return whole + (1 if part else 0)


def pool_pages(model: ModelSpec, worker: WorkerSpec) -> int:
    page = kv_bytes_per_token(model) * worker.page_tokens
    left = worker.device_bytes - model.weight_bytes - worker.reserved_bytes
    return left // page if left > 0 else 0


def worst_case_pages(request: RequestView, worker: WorkerSpec) -> int:
    return pages_for(request.prompt_tokens + request.max_new_tokens, worker.page_tokens)


def check_contract(request: RequestView, model: ModelSpec, worker: WorkerSpec) -> Verdict:
    p, m, cost = request.prompt_tokens, request.max_new_tokens, worker.cost
    broken = []
    if p == 0:
        broken.append("empty_prompt")
    if m == 0:
        broken.append("no_output_budget")
    if p + m > model.max_context:
        broken.append("over_max_context")
    if worst_case_pages(request, worker) > pool_pages(model, worker):
        broken.append("over_pool")
    if p > 0 and cost.step_time((), p, 0) > request.slo.ttft_s:
        broken.append("ttft_unreachable")
    if m >= 2 and cost.step_time((p + m - 1,)) > request.slo.gap_s:
        broken.append("gap_unreachable")
    return Verdict(ok=not broken, reason=broken[0] if broken else "")
