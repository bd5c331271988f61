"""Lesson 3 reference solution: the chunk rule.

The largest page-aligned prefill chunk whose step still fits the token-gap budget,
solved from the cost model's quadratic (the attention term grows with the tokens
already prefilled). Knobs are the design sheet's ``chunk_rule`` values; the
non-default ones are the rules the lesson shows failing.
"""
import math

from reference.shapes import ChunkContext, ChunkPlan


def _largest_fitting(ctx: ChunkContext, slack: float, attention_term: bool) -> int:
    """Largest c with per_token*c + pair*(c*d + c*(c+1)/2) <= slack (pair=0 without the term)."""
    cost, d = ctx.cost, ctx.prefill_done
    a = cost.per_attention_pair / 2 if attention_term else 0.0
    b = cost.per_token + (cost.per_attention_pair * (d + 0.5) if attention_term else 0.0)
    if a > 0:
        c = (-b + math.sqrt(b * b + 4 * a * slack)) / (2 * a)
    elif b > 0:
        c = slack / b
    else:
        return ctx.prefill_remaining
    c = min(int(c), ctx.prefill_remaining)
    if not attention_term:
        return c
    # The float solution can land one token off; settle it on the true step time.
    base = ctx.cost.step_time(ctx.decode_contexts)
    fits = lambda n: ctx.cost.step_time(ctx.decode_contexts, n, d) - base <= slack
    while c > 0 and not fits(c):
        c -= 1
    while c < ctx.prefill_remaining and fits(c + 1):
        c += 1
    return c


def choose_chunk(ctx: ChunkContext, *,
                 rule: str = "budget",        # or "per_token_only" (faulty), "fixed"
                 fixed_tokens: int = 512,
                 ) -> ChunkPlan:
    remaining, pt = ctx.prefill_remaining, ctx.page_tokens
    decode_only = ctx.cost.step_time(ctx.decode_contexts)
    if rule == "fixed":
        return ChunkPlan(min(fixed_tokens, remaining), "ok")
    if decode_only > ctx.gap_budget_s:
        # No chunk helps: the decode batch alone misses the budget.
        return ChunkPlan(0, "infeasible")
    fit = _largest_fitting(ctx, ctx.gap_budget_s - decode_only, rule == "budget")
    if fit >= remaining:
        return ChunkPlan(remaining, "ok")
    fit -= fit % pt  # page-aligned unless it finishes the prompt
    if fit == 0 or fit < ctx.min_chunk_tokens:
        return ChunkPlan(fit, "starved")
    return ChunkPlan(fit, "ok")
