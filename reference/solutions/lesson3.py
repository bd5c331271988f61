"""Lesson 3 reference solution: the chunk rule.

The largest page-aligned prefill chunk whose step still fits the token-gap budget,
solved from the cost model's quadratic (the attention term grows with the tokens
already prefilled). The design sheet's faulty rules are distortions around it
(reference/knobs.py), not variants of it.
"""
import math

from reference.shapes import ChunkContext, ChunkPlan


def _largest_fitting(ctx: ChunkContext, slack: float) -> int:
    """Largest c with per_token*c + pair*(c*d + c*(c+1)/2) <= slack."""
    cost, d = ctx.cost, ctx.prefill_done
    a = cost.per_attention_pair / 2
    b = cost.per_token + cost.per_attention_pair * (d + 0.5)
    if a > 0:
        c = (-b + math.sqrt(b * b + 4 * a * slack)) / (2 * a)
    elif b > 0:
        c = slack / b
    else:
        return ctx.prefill_remaining
    c = min(int(c), ctx.prefill_remaining)
    # The float solution can land one token off; settle it on the true step time.
    base = ctx.cost.step_time(ctx.decode_contexts)
    fits = lambda n: ctx.cost.step_time(ctx.decode_contexts, n, d) - base <= slack
    while c > 0 and not fits(c):
        c -= 1
    while c < ctx.prefill_remaining and fits(c + 1):
        c += 1
    return c


def choose_chunk(ctx: ChunkContext) -> ChunkPlan:
    remaining, pt = ctx.prefill_remaining, ctx.page_tokens
    decode_only = ctx.cost.step_time(ctx.decode_contexts)
    if decode_only > ctx.gap_budget_s:
        # No chunk helps: the decode batch alone misses the budget.
        return ChunkPlan(0, "infeasible")
    fit = _largest_fitting(ctx, ctx.gap_budget_s - decode_only)
    if fit >= remaining:
        return ChunkPlan(remaining, "ok")
    fit -= fit % pt  # page-aligned unless it finishes the prompt
    if fit == 0 or fit < ctx.min_chunk_tokens:
        return ChunkPlan(fit, "starved")
    return ChunkPlan(fit, "ok")
