"""Wrong: divides the slack by per_token alone (no attention term), otherwise by the book.

Right on an idle worker with a short prefix; over the budget on late chunks of long
prompts, where each chunk token attends to everything prefilled before it.
"""
from reference.shapes import ChunkContext, ChunkPlan


def choose_chunk(ctx: ChunkContext) -> ChunkPlan:
    decode_only = ctx.cost.step_time(ctx.decode_contexts)
    if decode_only > ctx.gap_budget_s:
        return ChunkPlan(0, "infeasible")
    slack = ctx.gap_budget_s - decode_only
    fit = int(slack / ctx.cost.per_token) if ctx.cost.per_token > 0 else ctx.prefill_remaining
    if fit >= ctx.prefill_remaining:
        return ChunkPlan(ctx.prefill_remaining, "ok")
    fit -= fit % ctx.page_tokens
    if fit == 0 or fit < ctx.min_chunk_tokens:
        return ChunkPlan(fit, "starved")
    return ChunkPlan(fit, "ok")
