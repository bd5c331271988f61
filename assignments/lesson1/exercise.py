"""Lesson 1 exercise: the request contract.

Implement the five functions below. Read assignments/lesson1/README.md first: it
explains each rule and works through the arithmetic with real numbers.

Your file runs in a sandbox. You may import the standard library and
``reference.shapes``, nothing else from the course. Every argument is a frozen dataclass
of plain values. Every return value is an ``int`` or a ``Verdict``.

Units: bytes are ints in binary units (KiB = 1024 B). Times are float seconds.
Use integer arithmetic for bytes and pages. Floats lose exactness past 2**53.

Check your work with:  grader check lesson1
"""
from reference.shapes import ModelSpec, RequestView, Verdict, WorkerSpec

# The valid reason strings, in the order check_contract tests them, are in
# reference.shapes.CONTRACT_REASONS:
#   "empty_prompt", "no_output_budget", "over_max_context", "over_pool",
#   "ttft_unreachable", "gap_unreachable"


def kv_bytes_per_token(model: ModelSpec) -> int:
    """Bytes of KV cache one token of context occupies, over the whole model.

    One key vector and one value vector per layer and per *KV* head:
        2 x layers x kv_heads x head_dim x dtype_bytes

    Use ``model.kv_heads``, not the number of query heads. Under GQA several query heads
    share one KV head. Under MHA the two counts are equal.

    Example: 32 layers, 8 KV heads, head_dim 128, bf16 (2 bytes) -> 131072 (128 KiB).

    Returns an int (bytes).
    """
    raise NotImplementedError("kv_bytes_per_token: 2 x layers x kv_heads x head_dim x dtype_bytes")


def pages_for(tokens: int, page_tokens: int) -> int:
    """The number of pages that hold ``tokens`` tokens, ``page_tokens`` tokens per page.

    This is ceiling division: a partly filled page is still a whole page.
    - ``tokens`` >= 0 and ``page_tokens`` >= 1.
    - 0 tokens -> 0 pages. An exact multiple needs no extra page: (32, 16) -> 2,
      (33, 16) -> 3.
    - Must be exact for any int, including counts past 2**53. ``math.ceil(tokens /
      page_tokens)`` goes through a float and gets those wrong. Stay in integers.

    Returns an int (pages).
    """
    raise NotImplementedError("pages_for: integer ceiling division of tokens by page_tokens")


def pool_pages(model: ModelSpec, worker: WorkerSpec) -> int:
    """How many KV pages the worker's pool holds for this model.

    page_bytes = kv_bytes_per_token(model) x worker.page_tokens
    free_bytes = worker.device_bytes - model.weight_bytes - worker.reserved_bytes
    pool       = floor(free_bytes / page_bytes), and 0 when free_bytes < page_bytes
                 (including free_bytes < 0, when the weights do not fit).

    A partial page at the end of memory is not a page. The result is never negative.

    Example: 80 GiB device, 16 GiB weights, 4 GiB reserved, 2 MiB pages -> 30720.

    Returns an int (pages, >= 0).
    """
    raise NotImplementedError("pool_pages: floor((device - weights - reserved) / page_bytes), at least 0")


def worst_case_pages(request: RequestView, worker: WorkerSpec) -> int:
    """Pages this request needs if it emits every token it may emit.

    pages_for(request.prompt_tokens + request.max_new_tokens, worker.page_tokens)

    Use max_new_tokens, not the true output length. No policy can see the true length,
    and the promise has to hold for every output up to max_new_tokens.

    Returns an int (pages).
    """
    raise NotImplementedError("worst_case_pages: pages_for(prompt + max_new, page_tokens)")


def check_contract(request: RequestView, model: ModelSpec, worker: WorkerSpec) -> Verdict:
    """Can this request ever be served within its promise on this model and worker?

    Return ``Verdict(ok=True, reason="")`` when no rule below is broken. Otherwise
    return ``Verdict(ok=False, reason=R)``, where R is the first broken rule in this
    order (p = prompt_tokens, m = max_new_tokens, cost = worker.cost):

    1. "empty_prompt"      p == 0
    2. "no_output_budget"  m == 0
    3. "over_max_context"  p + m > model.max_context       (equal is fine)
    4. "over_pool"         worst_case_pages(request, worker) > pool_pages(model, worker)
                           (equal is fine)
    5. "ttft_unreachable"  p > 0 and the time of one step that prefills the whole prompt
                           as a single chunk on an idle worker (no decoding requests;
                           T = p, C = 0, A = p*(p+1)/2) is greater than slo.ttft_s
    6. "gap_unreachable"   m >= 2 and the time of one decode step of this request alone,
                           at its largest context (T = 1, C = p + m - 1, A = 0), is
                           greater than slo.gap_s. When m < 2 there is no decode step,
                           so this rule cannot apply.

    Step times use the worker's cost model (``worker.cost``), not the defaults:
        step_fixed + per_token*T + per_context_token*C + per_attention_pair*A
    ``worker.cost.step_time(decode_contexts, chunk_tokens, chunk_done)`` computes it.
    "Misses" means strictly greater than the SLO.

    The grader compares ``ok`` exactly. When several rules are broken, it accepts any
    of the broken ones as ``reason``. Returning the first, in this order, is the
    contract.
    """
    raise NotImplementedError("check_contract: test the six rules in CONTRACT_REASONS order")
