"""Wrong: a fixed large chunk (2048 tokens), always "ok", whatever the budget says."""
from reference.shapes import ChunkContext, ChunkPlan


def choose_chunk(ctx: ChunkContext) -> ChunkPlan:
    return ChunkPlan(min(2048, ctx.prefill_remaining), "ok")
