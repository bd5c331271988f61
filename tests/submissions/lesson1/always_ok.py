"""Wrong on purpose (tests): sizes right, but every request passes the contract."""
from reference.shapes import Verdict


def kv_bytes_per_token(model):
    return 2 * model.layers * model.kv_heads * model.head_dim * model.dtype_bytes


def pages_for(tokens, page_tokens):
    return -(-tokens // page_tokens)


def pool_pages(model, worker):
    return max(0, (worker.device_bytes - model.weight_bytes - worker.reserved_bytes)
               // (kv_bytes_per_token(model) * worker.page_tokens))


def worst_case_pages(request, worker):
    return pages_for(request.prompt_tokens + request.max_new_tokens, worker.page_tokens)


def check_contract(request, model, worker):
    return Verdict(True)
