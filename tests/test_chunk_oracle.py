"""Lesson 3's chunk oracle piece by piece, against numbers worked out by hand.

tests/test_lesson3.py grades end to end and checks the search against trying every
candidate, but both sides of that check call ``fits``, and no grade reads the exact
figures a feedback line quotes or the candidate a knife edge is looked for at. Here every
expectation is the cost model's formula worked out term by term, with coefficients that are
powers of two so each step time is an exact float compared with ==:

    step = step_fixed + per_token*T + per_context_token*C + per_attention_pair*A
    T = decoding requests + chunk tokens, C = the decoders' contexts summed,
    A = c*d + c*(c+1)/2 for a chunk of c tokens after d prefilled.
"""
from dataclasses import replace
from fractions import Fraction as F

import pytest

from grader.engine import memo
from grader.engine.cases import Case
from grader.lessons import chunk_oracle
from grader.lessons.chunk_oracle import Expected
from reference.shapes import ChunkContext, CostModel

FIXED, TOKEN, CONTEXT, PAIR = F(1, 256), F(1, 4096), F(1, 65536), F(1, 2 ** 20)
DYADIC = CostModel(float(FIXED), float(TOKEN), float(CONTEXT), float(PAIR))
# Two decoders of 256 tokens each, a prompt 64 tokens in with 100 left, pages of 16 tokens.
PROBE = ChunkContext(gap_budget_s=1.0, cost=DYADIC, decode_contexts=(256, 256), prefill_done=64,
                     prefill_remaining=100, page_tokens=16, min_chunk_tokens=32)


def by_hand(chunk: int) -> float:
    """PROBE's step time with a chunk: T = 2 + c, C = 512, A = 64c + c(c+1)/2."""
    return float(FIXED + TOKEN * (2 + chunk) + CONTEXT * 512 + PAIR * (64 * chunk + F(chunk * (chunk + 1), 2)))


def test_by_hand_is_the_formula_in_units_of_two_to_the_minus_twenty():
    # 4096 fixed + 256 per token (2 decode, c chunk) + 16 per context token (512) + 1 per pair.
    assert [by_hand(c) * 2 ** 20 for c in (0, 16, 32, 48)] == [12800, 18056, 23568, 29336]


@pytest.mark.parametrize("chunk", [0, 1, 16, 32, 48, 100])
def test_a_step_time_is_the_cost_models_formula_for_the_probes_batch(chunk):
    assert chunk_oracle.step_s(PROBE, chunk) == by_hand(chunk)


def test_a_chunk_whose_step_takes_the_budget_exactly_fits_and_the_next_does_not():
    at_32 = replace(PROBE, gap_budget_s=by_hand(32))
    assert [chunk_oracle.fits(at_32, c) for c in (0, 16, 32, 33, 48)] == [True, True, True, False, False]


@pytest.mark.parametrize("verdict,largest,remaining,page,after", [
    ("ok", 32, 5000, 16, 48),              # the page multiple above the largest
    ("starved", 0, 5000, 16, 16),          # nothing fits but the decode-only step: one page
    ("ok", 64, 5000, 32, 96),
    ("ok", 96, 100, 16, 100),              # the whole rest of the prompt, not the next page past it
    ("ok", 100, 100, 16, None),            # the whole rest fits: nothing above it
    ("infeasible", 0, 5000, 16, None),     # the decode-only step misses: no chunk is a candidate
])
def test_the_next_candidate_is_the_smallest_one_above_the_largest(verdict, largest, remaining, page, after):
    ctx = replace(PROBE, prefill_remaining=remaining, page_tokens=page)
    got = Expected(verdict, largest, 0.0).next_candidate(ctx)
    assert got == after
    assert after is None or type(got) is int          # a chunk is a token count


@pytest.mark.parametrize("budget,min_chunk,plan", [
    (by_hand(32), 32, ("ok", 32)),                    # 32 fits exactly, 48 does not
    (by_hand(48) - 2 ** -20, 32, ("ok", 32)),         # a hair under 48's step time
    (by_hand(32), 64, ("starved", 32)),               # below min_chunk_tokens and not the whole rest
    (by_hand(100), 32, ("ok", 100)),                  # the whole rest of the prompt
    (by_hand(0) - 2 ** -20, 32, ("infeasible", 0)),   # the decode-only step alone misses
])
def test_a_probes_expected_plan_is_worked_out_in_this_process_and_never_written(
        budget, min_chunk, plan, tmp_path, monkeypatch):
    # What a hidden probe's right answer is must not be left in the cache folder for anyone
    # who can read it: the plan is kept in this process only.
    monkeypatch.setenv("GRADER_CACHE", str(tmp_path))
    monkeypatch.setattr(memo, "_memory", {})
    ctx = replace(PROBE, gap_budget_s=budget, min_chunk_tokens=min_chunk)
    got = chunk_oracle.expected(Case("probe", "probe#0", "hidden", ctx))
    assert got == Expected(*plan, by_hand(0))
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("seconds,said", [(0.0125, "12.5 ms"), (0.00123456789, "1.23457 ms"), (2.0, "2000 ms"),
                                          (0.0, "0 ms")])
def test_a_step_time_is_said_in_milliseconds_to_six_figures(seconds, said):
    assert chunk_oracle.ms(seconds) == said
