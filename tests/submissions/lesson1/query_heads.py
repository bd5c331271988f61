"""Wrong on purpose (tests): Counts query heads (4 per KV head) instead of KV heads.

A valid submission in its own right (it imports nothing but ``reference.shapes``), and
the one implementation of the course's size arithmetic: the worker and the lesson 1
oracle call these same functions.
"""
from reference.shapes import ModelSpec, RequestView, Verdict, WorkerSpec


def kv_bytes_per_token(model: ModelSpec) -> int:
    # K and V, for every layer and KV head (GQA shares KV heads across query heads).
    return 2 * model.layers * (model.kv_heads * 4) * model.head_dim * model.dtype_bytes


def pages_for(tokens: int, page_tokens: int) -> int:
    # Ceiling division in integers: a float ceil is wrong past 2**53 tokens.
    return -(-tokens // page_tokens)


def pool_pages(model: ModelSpec, worker: WorkerSpec) -> int:
    page_bytes = kv_bytes_per_token(model) * worker.page_tokens
    free_bytes = worker.device_bytes - model.weight_bytes - worker.reserved_bytes
    return max(0, free_bytes // page_bytes)


def worst_case_pages(request: RequestView, worker: WorkerSpec) -> int:
    # The KV of a request holds its whole context: the prompt plus every token it may emit.
    return pages_for(request.prompt_tokens + request.max_new_tokens, worker.page_tokens)


def contract_reasons(request: RequestView, model: ModelSpec, worker: WorkerSpec) -> tuple[str, ...]:
    """Every reason this request breaks the contract, in CONTRACT_REASONS order."""
    p, m, cost = request.prompt_tokens, request.max_new_tokens, worker.cost
    reasons = []
    if p == 0:
        reasons.append("empty_prompt")
    if m == 0:
        reasons.append("no_output_budget")
    if p + m > model.max_context:
        reasons.append("over_max_context")
    if worst_case_pages(request, worker) > pool_pages(model, worker):
        reasons.append("over_pool")
    if p > 0 and cost.step_time((), p, 0) > request.slo.ttft_s:
        reasons.append("ttft_unreachable")
    # The last decode step reads the prompt and every token but the one it emits.
    if m >= 2 and cost.step_time((p + m - 1,)) > request.slo.gap_s:
        reasons.append("gap_unreachable")
    return tuple(reasons)


def check_contract(request: RequestView, model: ModelSpec, worker: WorkerSpec) -> Verdict:
    reasons = contract_reasons(request, model, worker)
    return Verdict(ok=not reasons, reason=reasons[0] if reasons else "")
