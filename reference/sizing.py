"""The pool's geometry: the worker's own size arithmetic, in exact integers.

The worker needs these numbers to exist at all (how many pages its pool holds, how many
pages a context fills); they are the definitions of the spec, kept here once so that no
part of the worker reaches into an answer key. Binary units throughout, integer division
throughout: a float ceiling is wrong past 2**53 tokens.
"""
from __future__ import annotations

from dataclasses import dataclass

from reference.shapes import ModelSpec, WorkerSpec


# The most pages a simulated pool may hold: the worker keeps an entry per page (its
# refcount, the free stack), so device_bytes of 2**80 asked for terabytes and ended in a
# MemoryError. The course's pools hold under 31,000 pages; this is 34 times the largest.
MAX_POOL_PAGES = 1 << 20


def pool_too_large(geometry: "Geometry") -> str | None:
    """Why a pool of this geometry cannot be simulated, or None when it can."""
    if geometry.pool_pages <= MAX_POOL_PAGES:
        return None
    return (f"the pool would hold {geometry.pool_pages:,} pages, more than the worker simulates "
            f"({MAX_POOL_PAGES:,}): a smaller device_bytes, or larger pages (page_tokens, or the "
            f"model's KV per token)")


def pages_for(tokens: int, page_tokens: int) -> int:
    """Pages that ``tokens`` slots fill: the ceiling of tokens / page_tokens."""
    return -(-tokens // page_tokens)


@dataclass(frozen=True)
class Geometry:
    """One model on one worker: bytes of KV per token and per page, pages in the pool."""
    kv_bytes_per_token: int
    page_tokens: int
    page_bytes: int
    pool_pages: int

    @classmethod
    def of(cls, model: ModelSpec, worker: WorkerSpec) -> "Geometry":
        # K and V, for every layer and KV head (GQA shares KV heads across query heads).
        kv = 2 * model.layers * model.kv_heads * model.head_dim * model.dtype_bytes
        page = kv * worker.page_tokens
        free = worker.device_bytes - model.weight_bytes - worker.reserved_bytes
        return cls(kv, worker.page_tokens, page, max(0, free // page))

    def pages(self, tokens: int) -> int:
        return pages_for(tokens, self.page_tokens)
