"""The synthetic cost model, and the worker's step times, against numbers worked out by hand.

No expectation here calls CostModel: each is the formula of reference/shapes.py worked out
term by term (T tokens, C summed decode context, A attention pairs), with coefficients that
are powers of two so every sum is exact in floating point and compared with ==.

    step = step_fixed + per_token*T + per_context_token*C + per_attention_pair*A
    T = decoding requests + chunk tokens, C = the decoders' contexts summed,
    A = c*d + c*(c+1)/2 for a chunk of c tokens after d prefilled.
"""
from fractions import Fraction as F

import pytest

from grader.engine.oracle import reference_policy
from reference.shapes import CostModel, attention_pairs
from worker_helpers import machine, request, run

# Exact binary fractions: every step time below is an exact float.
FIXED, TOKEN, CONTEXT, PAIR = F(1, 64), F(1, 4096), F(1, 65536), F(1, 2 ** 20)
DYADIC = CostModel(step_fixed=float(FIXED), per_token=float(TOKEN),
                   per_context_token=float(CONTEXT), per_attention_pair=float(PAIR))
WHOLE_PROMPT = reference_policy({"chunk_rule": {"rule": "fixed", "fixed_tokens": 10 ** 6}})


def step(T, C=0, A=0) -> float:
    return float(FIXED + TOKEN * T + CONTEXT * C + PAIR * A)


def ends(start, durations):
    total, out = F(start), []
    for d in durations:
        total += F(d)
        out.append(float(total))
    return out


@pytest.mark.parametrize("chunk,done,pairs", [
    (0, 0, 0), (0, 9, 0), (1, 0, 1), (3, 0, 6), (3, 2, 12), (4, 2, 18), (64, 64, 6176),
    (22, 128, 3069),
    # Past 2**53 only integer arithmetic is exact: 500,000,001,500,000,001 is no float.
    (10 ** 9 + 1, 0, 500_000_001_500_000_001), (1, 10 ** 18, 10 ** 18 + 1),
])
def test_attention_pairs_by_hand(chunk, done, pairs):
    # c*d pairs against the prefix, then 1 + 2 + ... + c inside the chunk.
    assert attention_pairs(chunk, done) == pairs and type(attention_pairs(chunk, done)) is int


def test_each_coefficient_counts_its_own_term():
    # decoders with contexts 7 and 9, a chunk of 5 after 3: T = 2 + 5, C = 16, A = 15 + 15.
    contexts, chunk, done = (7, 9), 5, 3
    assert CostModel(1.0, 0.0, 0.0, 0.0).step_time(contexts, chunk, done) == 1.0
    assert CostModel(0.0, 1.0, 0.0, 0.0).step_time(contexts, chunk, done) == 7.0
    assert CostModel(0.0, 0.0, 1.0, 0.0).step_time(contexts, chunk, done) == 16.0
    assert CostModel(0.0, 0.0, 0.0, 1.0).step_time(contexts, chunk, done) == 30.0


def test_step_times_of_mixed_steps_by_hand():
    cm = CostModel(step_fixed=1.0, per_token=0.5, per_context_token=0.25, per_attention_pair=0.125)
    assert cm.step_time() == 1.0                               # an empty step: the fixed cost
    assert cm.step_time((3, 5)) == 1 + 0.5 * 2 + 0.25 * 8      # two decoders: 4.0
    assert cm.step_time((), 4, 0) == 1 + 0.5 * 4 + 0.125 * 10  # a chunk alone: 4.25
    assert cm.step_time((), 4, 2) == 1 + 0.5 * 4 + 0.125 * 18  # after 2 prefilled: 5.25
    assert cm.step_time((3, 5), 4, 2) == 8.25                  # both: T 6, C 8, A 18
    assert cm.step_time_of(2, 8, 4, 2) == 8.25                 # the same from batch and sum
    assert cm.step_time_of(0, 0) == 1.0
    # Left out, the chunk is empty and nothing was prefilled before it.
    assert cm.step_time((), 4) == cm.step_time_of(0, 0, 4) == 4.25
    assert cm.step_time((3, 5)) == cm.step_time_of(2, 8) == 4.0


def test_the_default_coefficients_are_the_courses():
    # Every grade and experiment is priced with these; a change must be deliberate.
    assert CostModel() == CostModel(step_fixed=0.004, per_token=4e-05, per_context_token=1e-07,
                                    per_attention_pair=2e-09)


def test_one_request_prefills_then_decodes_one_token_per_step():
    model, worker = machine(50, cost=DYADIC)
    result = run(model, worker, WHOLE_PROMPT, (request(0, 0.25, 40, 4),))
    # Step 0: the whole 40-token prompt: T 40, A 40*41/2 = 820; it emits token 1.
    # Steps 1-3 emit tokens 2-4, each reading the prompt and the tokens before: C 41, 42, 43.
    expected = [step(40, 0, 820), step(1, 41), step(1, 42), step(1, 43)]
    assert result.steps.duration_s.tolist() == expected
    assert result.steps.launch_s.tolist() == [0.25] + ends(0.25, expected)[:-1]
    (rec,) = result.requests
    assert list(rec.token_times) == ends(0.25, expected)
    assert rec.first_token_s == 0.25 + expected[0]


def test_two_requests_share_steps_and_their_cost():
    model, worker = machine(50, cost=DYADIC)
    result = run(model, worker, WHOLE_PROMPT, (request(0, 0.0, 30, 4), request(1, 0.0, 50, 3)))
    # 0: r0's chunk (T 30, A 465). 1: r0 decodes at context 31 + r1's chunk of 50 (T 51,
    # C 31, A 1275). 2, 3: both decode, contexts (32, 51) then (33, 52).
    expected = [step(30, 0, 465), step(51, 31, 1275), step(2, 83), step(2, 85)]
    assert result.steps.duration_s.tolist() == expected
    t = ends(0.0, expected)
    r0, r1 = result.requests
    assert list(r0.token_times) == t and list(r1.token_times) == t[1:]


def test_later_chunks_pay_for_the_prefix_they_attend_to():
    model, worker = machine(50, cost=DYADIC)
    sheet = {"chunk_rule": {"rule": "fixed", "fixed_tokens": 64}}
    result = run(model, worker, reference_policy(sheet), (request(0, 0.0, 150, 2),))
    # Chunks of 64, 64 and 22 tokens after 0, 64 and 128 prefilled:
    # A = 2080, 64*64 + 2080 = 6176, 22*128 + 253 = 3069; then one decode step at context 151.
    expected = [step(64, 0, 2080), step(64, 0, 6176), step(22, 0, 3069), step(1, 151)]
    assert result.steps.chunk_tokens.tolist() == [64, 64, 22, 0]
    assert result.steps.duration_s.tolist() == expected
    assert result.requests[0].first_token_s == ends(0.0, expected)[2]


def test_the_cost_model_is_frozen():
    # Every chunk rule is handed the worker's own cost model (ChunkContext.cost): one that
    # could change it would reprice every later step of the run.
    import dataclasses
    cost = CostModel()
    with pytest.raises(dataclasses.FrozenInstanceError):
        cost.per_token = 0.0
    assert hash(cost) == hash(CostModel())


def test_a_decode_step_costs_what_a_step_without_a_chunk_costs_to_the_bit():
    # The worker prices chunkless steps with decode_step_time; a run's digest holds those
    # floats, so it must give step_time_of's bits, for coefficients that are not exact too.
    import random
    draw = random.Random(18)
    models = [CostModel(), CostModel(float(FIXED), float(TOKEN), float(CONTEXT), float(PAIR)),
              CostModel(0.03, 2e-4, 0.0, 2e-9)]
    models += [CostModel(draw.uniform(1e-4, 0.05), draw.uniform(0, 1e-3), draw.uniform(0, 1e-6),
                         draw.uniform(0, 1e-8)) for _ in range(20)]
    for cm in models:
        for _ in range(200):
            decoding, contexts = draw.randrange(0, 300), draw.randrange(0, 10 ** 8)
            assert cm.decode_step_time(decoding, contexts).hex() == \
                cm.step_time_of(decoding, contexts).hex()
    # 3 decoders with 40 tokens of context: 1/64 + 3/4096 + 40/65536, exact.
    exact = CostModel(float(FIXED), float(TOKEN), float(CONTEXT), float(PAIR))
    assert exact.decode_step_time(3, 40) == float(FIXED + 3 * TOKEN + 40 * CONTEXT)
