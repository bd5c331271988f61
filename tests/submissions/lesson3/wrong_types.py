"""Broken: returns a (tokens, verdict) tuple instead of a ChunkPlan."""
from reference.shapes import ChunkContext


def choose_chunk(ctx: ChunkContext):
    return (min(512, ctx.prefill_remaining), "ok")
