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

    Every layer keeps a key vector and a value vector for each *KV* head (README, "KV bytes
    per token"). Under GQA several query heads share one KV head: ``model.kv_heads`` is
    the count that stores KV. Under MHA the two counts are equal.

    Example: 32 layers, 8 KV heads, head_dim 128, bf16 (2 bytes) -> 131072 (128 KiB).

    Returns an int (bytes), exact for every model the schema allows.
    """
    raise NotImplementedError("kv_bytes_per_token is not implemented yet")


def pages_for(tokens: int, page_tokens: int) -> int:
    """The number of pages that hold ``tokens`` tokens, ``page_tokens`` tokens per page.

    A partly filled page is still a whole page.
    - ``tokens`` >= 0 and ``page_tokens`` >= 1.
    - 0 tokens -> 0 pages. An exact multiple needs no extra page: (32, 16) -> 2,
      (33, 16) -> 3.
    - Exact for any int, including counts past 2**53, where a float loses the last page.

    Returns an int (pages).
    """
    raise NotImplementedError("pages_for is not implemented yet")


def pool_pages(model: ModelSpec, worker: WorkerSpec) -> int:
    """How many KV pages the worker's pool holds for this model.

    The pool is the device memory left beside the model's weights and the worker's
    reserved bytes, in whole pages of ``worker.page_tokens`` tokens of this model's KV.
    A partial page at the end of memory is not a page. When the weights and the
    reservation leave nothing (or less than nothing), the pool is 0: never negative.

    Example: 80 GiB device, 16 GiB weights, 4 GiB reserved, 2 MiB pages -> 30720.

    Returns an int (pages, >= 0).
    """
    raise NotImplementedError("pool_pages is not implemented yet")


def worst_case_pages(request: RequestView, worker: WorkerSpec) -> int:
    """Pages this request needs if it emits every token it may emit.

    Size it for ``request.max_new_tokens``, not the true output length. No policy can
    see the true length, and the promise has to hold for every output up to
    max_new_tokens.

    Returns an int (pages).
    """
    raise NotImplementedError("worst_case_pages is not implemented yet")


def check_contract(request: RequestView, model: ModelSpec, worker: WorkerSpec) -> Verdict:
    """Can this request ever be served within its promise on this model and worker?

    Return ``Verdict(ok=True, reason="")`` when it breaks none of the six rules of the
    README's table ("The contract rules"). Otherwise return ``Verdict(ok=False,
    reason=R)`` where R is the first rule it breaks, in the order of CONTRACT_REASONS.

    The contract, as the grader checks it:
    - ``ok`` must be exact on every request: a request is refused exactly when no
      schedule, even on an idle worker with the whole pool free, can serve it.
    - Limits are inclusive: a context of exactly ``model.max_context`` tokens, a worst
      case of exactly the pool, a step of exactly ``ttft_s`` or ``gap_s`` are all fine.
      "Misses" means strictly longer.
    - Step times come from the worker's own cost model, ``worker.cost`` (its
      ``step_time``), never from the CostModel defaults.
    - An empty prompt has nothing to prefill: the TTFT rule cannot apply to it. A request
      that may emit a single token has no gap between tokens: the gap rule cannot apply to
      it, but the TTFT rule does (its one token still waits for the prefill). No other
      request is exempt from a timing rule, however short its output.
    - When several rules are broken, any of them is accepted as ``reason``; the first,
      in order, is the contract.
    """
    raise NotImplementedError("check_contract is not implemented yet")
