"""Sizes raise; the contract is the stub's."""
from reference.shapes import Verdict


def kv_bytes_per_token(model):
    return 1 // 0


def pages_for(tokens, page_tokens):
    raise ValueError("not today")


def pool_pages(model, worker):
    return {}["missing"]


def worst_case_pages(request, worker):
    raise NotImplementedError


def check_contract(request, model, worker):
    raise NotImplementedError
