"""Wrong: counts the chunk's attention to itself but not to the tokens prefilled before it.

Every chunk is sized as if it were the first (d = 0): right for the first chunk, over
the budget on late chunks of long prompts.
"""
import math

from reference.shapes import ChunkContext, ChunkPlan


def choose_chunk(ctx: ChunkContext) -> ChunkPlan:
    decode_only = ctx.cost.step_time(ctx.decode_contexts)
    if decode_only > ctx.gap_budget_s:
        return ChunkPlan(0, "infeasible")
    slack = ctx.gap_budget_s - decode_only
    a = ctx.cost.per_attention_pair / 2
    b = ctx.cost.per_token + ctx.cost.per_attention_pair / 2     # the mistake: no c*d term
    c = 2 * slack / (b + math.sqrt(b * b + 4 * a * slack)) if b > 0 else ctx.prefill_remaining
    fit = int(c)
    if fit >= ctx.prefill_remaining:
        return ChunkPlan(ctx.prefill_remaining, "ok")
    fit -= fit % ctx.page_tokens
    if fit == 0 or fit < ctx.min_chunk_tokens:
        return ChunkPlan(fit, "starved")
    return ChunkPlan(fit, "ok")
