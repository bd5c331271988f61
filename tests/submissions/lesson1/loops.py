"""pages_for loops forever; the rest is right."""
from reference.shapes import Verdict


def kv_bytes_per_token(model):
    return 2 * model.layers * model.kv_heads * model.head_dim * model.dtype_bytes


def pages_for(tokens, page_tokens):
    while True:
        pass


def pool_pages(model, worker):
    return max(0, (worker.device_bytes - model.weight_bytes - worker.reserved_bytes)
               // (kv_bytes_per_token(model) * worker.page_tokens))


def worst_case_pages(request, worker):
    t = request.prompt_tokens + request.max_new_tokens
    return -(-t // worker.page_tokens)


def check_contract(request, model, worker):
    raise NotImplementedError
