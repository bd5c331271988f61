"""Wrong: a fixed tiny chunk (one page per step), always "ok": safe gaps, TTFT grows."""
from reference.shapes import ChunkContext, ChunkPlan


def choose_chunk(ctx: ChunkContext) -> ChunkPlan:
    return ChunkPlan(min(ctx.page_tokens, ctx.prefill_remaining), "ok")
