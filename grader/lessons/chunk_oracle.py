"""Lesson 3's step times, and the expected plan of a probe, asked of the search oracle.

What ships with the lesson are the properties a plan is judged by (a chunk's true step
time, whether it fits the budget); the largest chunk that fits, which is the lesson's
answer, comes from grader/lessons/oracles/chunk_search.py in the course and from the
record in the learner edition (grader.engine.oracle.figures).
"""
from __future__ import annotations

from dataclasses import dataclass

from grader.engine.cases import Case
from grader.engine.codec import persistent
from grader.engine.oracle import figures
from reference.shapes import ChunkContext

EDGE = 1e-7               # probes keep the budget this far (relative) from a deciding step time
SEARCH = "grader.lessons.oracles.chunk_search"


def step_s(ctx: ChunkContext, tokens: int) -> float:
    """The true time of this step with a chunk of ``tokens`` (0: the decode-only step)."""
    return ctx.cost.step_time(ctx.decode_contexts, tokens, ctx.prefill_done)


def fits(ctx: ChunkContext, tokens: int) -> bool:
    return step_s(ctx, tokens) <= ctx.gap_budget_s


@persistent
@dataclass(frozen=True)
class Expected:
    verdict: str          # ok | starved | infeasible
    largest: int          # the largest fitting candidate chunk (0 when none fits)
    decode_only_s: float

    def next_candidate(self, ctx: ChunkContext) -> int | None:
        """The smallest candidate above ``largest`` (it does not fit), if any."""
        if self.verdict == "infeasible" or self.largest >= ctx.prefill_remaining:
            return None
        return min(ctx.prefill_remaining, (self.largest // ctx.page_tokens + 1) * ctx.page_tokens)


def expected(case: Case) -> Expected:
    """The right plan's verdict and largest fitting chunk for a probe case."""
    ctx = case.inputs

    def search() -> Expected:
        from grader.lessons.oracles.chunk_search import search
        return search(ctx)
    # Cheap to compute: kept in this process, and recorded for the learner edition. Keyed by
    # the case's digest, which is digest_of(ctx) (a ChunkContext has no identity), kept
    # on the case: computing it at every answer cost more than the search.
    return figures("lesson3-expected", case.digest, search, needs=(SEARCH,), persist=False)


def ms(seconds: float) -> str:
    """A step time as feedback says it."""
    return f"{seconds * 1000:.6g} ms"


def ms_apart(larger: float, smaller: float) -> tuple[str, str]:
    """Two times as feedback says them when one is over the other, with the digits it takes
    to read so: a step 0.08 µs over a 100 ms budget is "100.0001 ms", not "100 ms"."""
    for digits in range(6, 18):
        said = f"{larger * 1000:.{digits}g} ms", f"{smaller * 1000:.{digits}g} ms"
        if said[0] != said[1]:
            return said
    # Times an ulp apart can round onto one double once in ms; the seconds still differ.
    return f"{larger!r} s", f"{smaller!r} s"
