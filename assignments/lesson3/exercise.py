"""Lesson 3 exercise: the chunk rule.

Implement ``choose_chunk`` below. Read assignments/lesson3/README.md first: it explains
the step-time model, the three verdicts, and works through the arithmetic with numbers.

Your file runs in a sandbox. You may import the standard library and
``reference.shapes``, nothing else from the course. The argument is a frozen
``ChunkContext``; the return value is a ``ChunkPlan(tokens, verdict)``.

Times are float seconds. Token counts are ints.

Check your work with:  grader check lesson3
"""
from reference.shapes import ChunkContext, ChunkPlan

# The valid verdicts are in reference.shapes.CHUNK_VERDICTS: "ok", "starved", "infeasible".


def choose_chunk(ctx: ChunkContext) -> ChunkPlan:
    """How many prompt tokens the oldest prefilling request gets in this step, and why.

    The step runs every decoding request (one token each, contexts ``ctx.decode_contexts``)
    plus one prefill chunk of c tokens after ``ctx.prefill_done`` already prefilled. Its
    time under the context's cost model is

        ctx.cost.step_time(ctx.decode_contexts, c, ctx.prefill_done)
        = step_fixed + per_token*(len(decode) + c) + per_context_token*sum(decode)
          + per_attention_pair*(c*d + c*(c+1)/2)          (d = ctx.prefill_done)

    Use ``ctx.cost``, never the default coefficients. The step "fits" when its time is
    <= ``ctx.gap_budget_s``.

    Candidates for c: multiples of ``ctx.page_tokens`` below ``ctx.prefill_remaining``,
    and ``ctx.prefill_remaining`` itself (a chunk that finishes the prompt need not be
    page-aligned). Never more than ``ctx.prefill_remaining``.

    Return, in this order of tests:
    1. ``ChunkPlan(0, "infeasible")`` when the decode-only step (c = 0) is already over
       the budget: no chunk can help; the fix is fewer running requests.
    2. ``ChunkPlan(L, "ok")`` where L is the largest fitting candidate, when L finishes
       the prompt (L == prefill_remaining), or when L > 0 and L >= ``ctx.min_chunk_tokens``.
    3. ``ChunkPlan(L, "starved")`` otherwise (L may be 0): the prompt would crawl, so its
       TTFT grows without bound. The worker then runs a minimum chunk anyway.

    The attention term grows with ``prefill_done``: late chunks of a long prompt cost more
    per token than early ones. Dividing the slack by per_token alone overshoots the budget.

    Graded: an ok chunk never makes the step exceed the budget; it is at least 95% of L;
    it is page-aligned unless it finishes the prompt; the verdict matches; and end to end
    the p99 token gap stays within the budget with mean TTFT within 10% of the oracle's.
    """
    raise NotImplementedError("choose_chunk: the largest page-aligned chunk whose step fits the budget")
