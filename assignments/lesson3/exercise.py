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
    plus one prefill chunk of c tokens after ``ctx.prefill_done`` already prefilled.
    ``ctx.cost.step_time(ctx.decode_contexts, c, ctx.prefill_done)`` is its time under this
    worker's cost model; use ``ctx.cost``, never the default coefficients. A chunk fits
    when its step takes at most ``ctx.gap_budget_s``.

    Candidates for c: multiples of ``ctx.page_tokens`` below ``ctx.prefill_remaining``,
    and ``ctx.prefill_remaining`` itself (a chunk that finishes the prompt need not be
    page-aligned). L is the largest candidate that fits (0 when none does).

    Returns ``ChunkPlan(tokens, verdict)`` with ``tokens`` an int and ``verdict`` one of
    CHUNK_VERDICTS, as the README's table defines them ("The verdicts"):
    - "infeasible" (tokens 0) when the decode batch alone misses the budget: no chunk can
      help; the fix is fewer running requests. It comes before the other two verdicts.
    - "ok" when the chunk keeps the budget and the prompt makes progress;
    - "starved" when the budget leaves the prompt only a trickle (or nothing): its TTFT
      would grow without bound. The worker then runs a minimum chunk anyway.

    What the grader checks: an "ok" chunk never puts its step over the budget; it is at
    least 95% of L; it is page-aligned unless it finishes the prompt, and never more than
    the prompt; the verdict matches; end to end, the p99 token gap stays within the
    budget and mean TTFT within 10% of the oracle rule's. Edge cases that matter: an
    empty decode batch, a remaining prompt shorter than a page or than
    ``min_chunk_tokens``, a budget just above or below the decode-only step, very long
    prefixes (the attention pairs grow with ``prefill_done``), 1-token pages, and cost
    models whose attention or context coefficient is zero.
    """
    raise NotImplementedError("choose_chunk is not implemented yet")
