"""Wrong: the right rule on the default coefficients, not the context's cost model."""
from reference.shapes import ChunkContext, ChunkPlan, CostModel

DEFAULT = CostModel()


def choose_chunk(ctx: ChunkContext) -> ChunkPlan:
    def step(c):
        return DEFAULT.step_time(ctx.decode_contexts, c, ctx.prefill_done)   # the mistake

    if step(0) > ctx.gap_budget_s:
        return ChunkPlan(0, "infeasible")
    if step(ctx.prefill_remaining) <= ctx.gap_budget_s:
        return ChunkPlan(ctx.prefill_remaining, "ok")
    lo, hi = 0, (ctx.prefill_remaining - 1) // ctx.page_tokens
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if step(mid * ctx.page_tokens) <= ctx.gap_budget_s:
            lo = mid
        else:
            hi = mid - 1
    tokens = lo * ctx.page_tokens
    if tokens == 0 or tokens < ctx.min_chunk_tokens:
        return ChunkPlan(tokens, "starved")
    return ChunkPlan(tokens, "ok")
