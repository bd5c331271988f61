"""Lesson 3 graded end to end: the oracle by search, and each wrong rule losing where it is wrong."""
import json
import math
import random
import re
import subprocess
import sys
from dataclasses import replace
from fractions import Fraction

import pytest

from conftest import ROOT, SECRETS, SUBMISSIONS, full, grade, other_than, scores
from grader.engine.cases import Case
from grader.engine.checks import Answer, CheckContext
from grader.engine.layout import find_course
from grader.lessons import chunk_oracle, lesson3
from grader.lessons.chunk_probes import page_aligned, progress, verdicts
from grader.lessons.oracles import chunk_search
from mutants import mutations, wrong_file
from reference.shapes import ChunkContext, ChunkPlan, CostModel

L3 = SUBMISSIONS / "lesson3"
REFERENCE = ROOT / "reference" / "solutions" / "lesson3.py"
COURSE = find_course(str(ROOT))


# ---- the oracle -----------------------------------------------------------------------------
def brute_force(ctx: ChunkContext):
    """Every candidate tried in turn: the definition the binary search must agree with."""
    if not chunk_oracle.fits(ctx, 0):
        return "infeasible", 0
    pt, rem = ctx.page_tokens, ctx.prefill_remaining
    candidates = [k * pt for k in range(0, (rem - 1) // pt + 1)] + [rem]
    largest = max(c for c in candidates if chunk_oracle.fits(ctx, c))
    ok = largest == rem or (largest > 0 and largest >= ctx.min_chunk_tokens)
    return ("ok" if ok else "starved"), largest


def test_oracle_search_agrees_with_trying_every_candidate():
    g = random.Random(3)
    for _ in range(400):
        cost = CostModel(g.uniform(0.001, 0.01), g.uniform(1e-5, 1e-4), g.uniform(0, 1e-6),
                         g.choice([0.0, g.uniform(1e-10, 1e-8)]))
        pt = g.choice([1, 4, 16, 32])
        ctx = ChunkContext(0.0, cost, tuple(g.randint(1, 4000) for _ in range(g.randint(0, 40))),
                           g.randint(0, 20000), g.randint(1, 1500), pt, pt * g.choice([0, 1, 4]))
        t = chunk_oracle.step_s(ctx, g.randint(0, ctx.prefill_remaining + 50))
        ctx = replace(ctx, gap_budget_s=t * g.uniform(0.9, 1.1))
        e = chunk_search.search(ctx)
        assert (e.verdict, e.largest) == brute_force(ctx), ctx


def test_edge_cases_of_the_verdicts():
    base = dict(cost=CostModel(), decode_contexts=(2048,) * 32, prefill_done=16352, page_tokens=16,
                min_chunk_tokens=64)
    tail = ChunkContext(gap_budget_s=0.1, prefill_remaining=32, **base)
    assert chunk_search.search(tail).verdict == "ok"          # a fitting tail below min_chunk is ok
    starved = ChunkContext(gap_budget_s=0.0119, prefill_remaining=5000, **base)
    assert chunk_search.search(starved) == chunk_oracle.Expected("starved", 0, chunk_oracle.step_s(starved, 0))
    over = ChunkContext(gap_budget_s=0.0118, prefill_remaining=5000, **base)
    assert chunk_search.search(over).verdict == "infeasible"


def test_an_expected_plan_is_recorded_and_read_back_as_itself():
    # The learner edition reads the oracle's plans for its public probes from a record.
    import dataclasses
    from grader.engine import codec
    plan = chunk_oracle.Expected("starved", 48, 0.0123)
    assert codec.loads(codec.dumps(plan)) == plan and type(codec.loads(codec.dumps(plan))) is chunk_oracle.Expected
    with pytest.raises(dataclasses.FrozenInstanceError):
        plan.largest = 64


def test_a_budget_on_a_knife_edge_is_nudged_off_it_by_a_hair_and_a_clear_one_is_left():
    # Drawn probes keep their family's point (a budget a hair above or below a chunk's step
    # time): moving the budget off an edge changes it by 10 EDGE relative, no more.
    base = ChunkContext(0.0, CostModel(), (2048,) * 32, 16352, 5000, 16, 64)
    on_edge = 0
    for pages in (0, 4, 40, 100):
        t = chunk_oracle.step_s(base, pages * 16)
        for budget in (t, t * (1 + chunk_oracle.EDGE / 2), t * (1 - chunk_oracle.EDGE / 2)):
            ctx = replace(base, gap_budget_s=budget)
            moved = lesson3._clear_of_edges(ctx)
            assert not chunk_search.knife_edges(moved)
            if chunk_search.knife_edges(ctx):
                on_edge += 1
                assert abs(moved.gap_budget_s / budget - 1) <= 10.5 * chunk_oracle.EDGE, (pages, budget)
            else:
                assert moved is ctx
            assert replace(moved, gap_budget_s=0.0) == replace(ctx, gap_budget_s=0.0)
    assert on_edge >= 3          # the decode-only time and a largest chunk's, at least


@pytest.mark.parametrize("probe_secret", [*SECRETS.values(), b"one", b"two", b"three"],
                         ids=[*SECRETS, "one", "two", "three"])
def test_hidden_probes_are_never_on_a_knife_edge_and_the_reference_agrees(probe_secret):
    from reference.solutions.lesson3 import choose_chunk
    cases = lesson3.hidden_probes(probe_secret)
    assert len(cases) == sum(lesson3.PROBE_FAMILIES.values())
    verdicts = set()
    for case in cases:
        ctx = case.inputs
        assert not chunk_search.knife_edges(ctx), case.label
        e, plan = chunk_search.search(ctx), choose_chunk(ctx)
        assert plan.verdict == e.verdict and (plan.verdict != "ok" or plan.tokens == e.largest), case.label
        verdicts.add(e.verdict)
    assert verdicts == {"ok", "starved", "infeasible"}


def _exact_step(ctx: ChunkContext, tokens: int) -> Fraction:
    """A step's time in exact arithmetic, from the README's formula."""
    c, d = ctx.cost, ctx.prefill_done
    pairs = tokens * d + tokens * (tokens + 1) // 2
    return (Fraction(c.step_fixed) + Fraction(c.per_token) * (len(ctx.decode_contexts) + tokens)
            + Fraction(c.per_context_token) * sum(ctx.decode_contexts) + Fraction(c.per_attention_pair) * pairs)


# Public probes whose budget is exactly a step time: the limits "a step of exactly the
# budget keeps it" sits on (the decode-only step; a chunk of exactly min_chunk_tokens; a
# short tail), on a cost model whose step times are exact in any order of addition.
ON_THE_BUDGET = {"exact-decode-only": ("starved", 0), "exact-min-chunk": ("ok", 64), "exact-tail": ("ok", 40)}


def test_public_probes_are_clear_of_edges_and_match_the_readme():
    probes = {c.name: c.inputs for c in lesson3.public_probes(COURSE)}
    assert [n for n, ctx in probes.items() if chunk_search.knife_edges(ctx)] == list(ON_THE_BUDGET)
    for name, (verdict, tokens) in ON_THE_BUDGET.items():
        ctx = probes[name]
        # Exactly on the step, and that step's float is its exact value: no rounding decides it.
        assert Fraction(ctx.gap_budget_s) == _exact_step(ctx, tokens) == Fraction(chunk_oracle.step_s(ctx, tokens))
        e = chunk_search.search(ctx)
        assert (e.verdict, e.largest) == (verdict, tokens)
        # The next candidate goes over the budget, so a rule that fits only below it is one off.
        nxt = min(ctx.prefill_remaining, tokens + ctx.page_tokens) if tokens < ctx.prefill_remaining else None
        assert nxt is None or _exact_step(ctx, nxt) > Fraction(ctx.gap_budget_s)
    readme = (ROOT / "assignments" / "lesson3" / "README.md").read_text()
    for name, verdict, tokens in [("first-chunk", "ok", 2080), ("late-chunk", "ok", 1328),
                                  ("full-batch-infeasible", "infeasible", 0),
                                  ("min-chunk-exact", "ok", 64), ("starved-late", "starved", 32)]:
        e = chunk_search.search(probes[name])
        assert (e.verdict, e.largest) == (verdict, tokens)
        assert f'ChunkPlan({tokens}, "{verdict}")' in readme
    assert f"{chunk_oracle.step_s(probes['late-chunk'], 2192):.9f}" in readme     # the naive late chunk


# ---- grading --------------------------------------------------------------------------------
# Every expectation of a grade holds under each of conftest's secrets (the `secret` fixture).
@pytest.fixture(scope="module")
def reference_grade(secret):
    return grade("lesson3", REFERENCE, "grade", secret)


def test_reference_full_marks_public_and_hidden(reference_grade):
    assert reference_grade.score == reference_grade.max_score == 12
    families = {c["family"] for c in reference_grade.cases if c["visibility"] == "hidden"}
    assert families == {"probe", "scenario"}
    public = grade("lesson3", REFERENCE, "check")
    assert public.score == public.max_score
    assert all(c["visibility"] == "public" for c in public.cases)


@pytest.mark.parametrize("name", ["alt_search", "alt_margin"])
def test_a_different_correct_rule_keeps_full_marks(name, secret):
    report = grade("lesson3", L3 / f"{name}.py", "grade", secret)
    assert report.score == report.max_score, [c.feedback for c in report.criteria if not c.passed]


# Which criteria each wrong rule must lose, and which others it may lose as a consequence of
# the same mistake (a rule that is always "ok" is also wrong on verdicts); all else stays full.
WRONG = {
    # 2048 tokens is no whole number of pages of 12, 24, 48 or 100 tokens.
    "fixed_large": ({"within-budget", "verdicts", "e2e-gap"}, {"progress", "page-aligned"}),
    # One page per step: its runs stop at twice the oracle's steps, so their gaps show nothing.
    "fixed_tiny": ({"progress", "verdicts", "e2e-ttft"}, {"within-budget", "e2e-gap"}),
    "per_token_only": ({"within-budget", "e2e-gap"}, {"verdicts"}),
    "ignores_decode": ({"within-budget", "verdicts", "e2e-gap"}, set()),
    "wrong_verdicts": ({"verdicts"}, set()),
    "unaligned": ({"page-aligned"}, {"verdicts"}),        # "ok" where not one whole page fits
    # Not in the list: the same properties catch them.
    "default_cost": ({"within-budget", "progress", "e2e-gap"}, {"verdicts"}),
    "no_prefix_attention": ({"within-budget", "e2e-gap"}, {"verdicts"}),
    "ceil_pages": ({"within-budget", "e2e-gap"}, {"verdicts"}),
    "strict_min": ({"verdicts"}, set()),
    "tail_starved": ({"verdicts"}, set()),
    "infeasible_needs_batch": ({"verdicts"}, set()),
    "no_min_chunk": ({"verdicts"}, set()),
    "no_page_infeasible": ({"verdicts"}, set()),
    "below_min_infeasible": ({"verdicts"}, set()),
    # One off at a step of exactly the budget: right on every probe but the public ones on it.
    "fits_strict": ({"verdicts"}, set()),
    "infeasible_at_budget": ({"verdicts"}, set()),
    # Off by one page at the rest of the prompt: a chunk of a few pages one page short, and a
    # starved verdict where that last page was exactly min_chunk_tokens.
    "last_page_missed": ({"progress"}, {"verdicts"}),
    # Aligned by a bit mask: right on every page that is a power of two, and on the others a
    # chunk of no whole number of pages (sometimes below min_chunk_tokens, or short of 95%).
    "page_mask": ({"page-aligned"}, {"verdicts", "progress"}),
    # A search bounded at 4,096 tokens: short wherever the budget fits a larger chunk.
    "capped_search": ({"progress"}, set()),
    # The same bound at 16,384 tokens: it kept 12 of 12 on the check and on every secret
    # (red team, 2026-12-07) until the public probe very-large-chunk and hidden large chunks
    # of up to 65,536 tokens.
    "capped_search_16384": ({"progress"}, set()),
    # A zero coefficient read as a missing one and priced at the default: short chunks on
    # the few probes whose cost model leaves a term out (the public no-attention-term), and
    # now and then a starved verdict there. It loses little (11.97 on the check): a clause of
    # its own thinned the last whole page's below what last_page_missed must lose.
    "zero_cost_default": ({"progress"}, {"verdicts"}),
    # Whole pages only where the whole rest fits, the partial page left a step of its own: at
    # least 95% of a long rest, so it kept 12 of 12 (red team, 2026-12-07) until a chunk short
    # of a rest that fits lost its probe whatever the share.
    "drops_partial_tail": ({"progress"}, {"e2e-ttft"}),
    # An impossible value is wrong on every probe it answers, never a chunk that "fits"; in a
    # run the worker falls back to its floor, so those runs show nothing of the rule.
    "negative_when_starved": ({"within-budget", "page-aligned", "verdicts"}, {"e2e-gap", "e2e-ttft"}),
    # Over the budget only where the probes seldom or never look: beside exactly one decoding
    # request, and where a run continues a prompt the rule chose a chunk for (module state).
    # Both kept 12 of 12 (the runs' blown steps, with small batches, stayed under the p99 of
    # the gaps); the runs' ok chunks are judged as the probes' are.
    "small_batch_overshoot": ({"within-budget"}, {"verdicts", "e2e-gap"}),
    "continuation_overshoot": ({"within-budget"}, {"e2e-gap"}),
    # Chunks to the token, not whole pages, where a run continues a prompt: page-aligned
    # judges the runs' ok chunks that leave some of the prompt, as within-budget does.
    "continuation_unaligned": ({"page-aligned"}, {"e2e-gap", "e2e-ttft"}),
}
NEEDLES = {"within-budget": "over the budget", "progress": ("below 95%", "of the prompt to another step"),
           "page-aligned": "not a multiple",
           "verdicts": "expected", "e2e-gap": "token gap", "e2e-ttft": "TTFT"}


# Its every lost criterion says why first.
SAYS = {"negative_when_starved": "impossible", "drops_partial_tail": "of the prompt to another step"}

# Wrong in every run, where no probe looks: its hidden runs show it as well, on this criterion.
HIDDEN_RUNS_SHOW = {"continuation_overshoot": "within-budget", "continuation_unaligned": "page-aligned"}

# One page per step makes every worker run long; its mistakes all show on the public cases.
PUBLIC_ONLY = {"fixed_tiny"}


def test_every_mutant_is_a_wrong_rule_with_its_expectations():
    assert set(mutations("lesson3")) <= set(WRONG)


def _loses_where_it_is_wrong(name, report):
    got, top = scores(report), full(report)
    lost = {k for k in got if got[k] < top[k]}
    must, may = WRONG[name]
    assert must <= lost, f"{name} kept points on {must - lost}"
    assert lost <= must | may, f"{name} lost points it did not earn losing: {lost - must - may}"
    for c in report.criteria:
        if c.id in must:
            said = SAYS.get(name, NEEDLES[c.id])
            assert any(n in c.feedback for n in ((said,) if isinstance(said, str) else said)), (c.id, c.feedback)


@pytest.mark.parametrize("name", sorted(set(WRONG) - PUBLIC_ONLY))
def test_wrong_rule_loses_where_it_is_wrong(name, tmp_path, secret):
    """fixed_large and fixed_tiny are files of their own; the others, mutants of alt_search.py."""
    report = grade("lesson3", wrong_file("lesson3", name, tmp_path), "grade", secret)
    _loses_where_it_is_wrong(name, report)
    if name in HIDDEN_RUNS_SHOW:
        # Wrong in the hidden runs too, not only in the public ones the check shows.
        judged = next(c for c in report.criteria if c.id == HIDDEN_RUNS_SHOW[name])
        hidden = {c.cite for c in lesson3.hidden_cases(secret, COURSE) if c.family == "scenario"}
        assert hidden & set(judged.evidence), (judged.evidence, judged.feedback)


@pytest.mark.parametrize("name", sorted(mutations("lesson3")))
def test_the_public_probes_show_every_wrong_rule(name, tmp_path):
    """`grader check` shows every known mistake, on the criteria it must lose: a search
    bounded at 4,096 tokens (capped_search) and one a page short of the rest of the prompt
    (last_page_missed) kept 12 of 12 on the check and lost 0.4 to 0.5 on the hidden grade,
    the public probes having no chunk of thousands of tokens that leaves some of the prompt
    and no largest chunk that is the last whole page before a rest of no whole pages
    (public probes large-chunk and last-whole-page now)."""
    report = grade("lesson3", wrong_file("lesson3", name, tmp_path), "check")
    got, top = scores(report), full(report)
    assert {k for k in got if got[k] < top[k]} & WRONG[name][0], (name, got)


@pytest.mark.parametrize("name", sorted(PUBLIC_ONLY))
def test_wrong_rule_loses_where_it_is_wrong_on_public_cases(name, tmp_path):
    _loses_where_it_is_wrong(name, grade("lesson3", wrong_file("lesson3", name, tmp_path), "check"))


# The share of verdicts a rule wrong on one whole clause of the table loses. Within ok, the
# clauses weigh a quarter each (a step exactly on the budget, a short tail, exactly
# min_chunk_tokens with prompt left, the rest): 1/4 of the ok verdict's 1/3. Within
# infeasible, half each (nothing decoding, the rest): 1/2 of 1/3. Within starved, a third
# each (a step exactly on the budget; a chunk fits, below min_chunk_tokens; not one page
# fits): 1/3 of 1/3. The clause of a step exactly on the budget holds the public probes
# exact-min-chunk and exact-tail (ok) and exact-decode-only (starved): a short tail called
# starved, or a chunk of exactly min_chunk_tokens, is wrong on one of the two ok ones too
# (1/12 + 1/24), and "not one page fits" called infeasible on exact-decode-only (1/9 + 1/9).
CLAUSE_SHARE = {"tail_starved": 1 / 8, "strict_min": 1 / 8, "infeasible_needs_batch": 1 / 6,
                "no_min_chunk": 1 / 9, "no_page_infeasible": 2 / 9, "below_min_infeasible": 1 / 9,
                "fits_strict": 1 / 12, "infeasible_at_budget": 1 / 9}
# What the verdicts' feedback must say of each: what decides the verdict the rule missed.
CLAUSE_SAYS = {"tail_starved": "a chunk that finishes the prompt is progress",
               "strict_min": "and is at least min_chunk_tokens",
               "no_page_infeasible": "infeasible is a decode-only step over the budget, and this one takes",
               "below_min_infeasible": "infeasible is a decode-only step over the budget, and this one takes",
               "fits_strict": "probe exact-min-chunk",
               "infeasible_at_budget": "probe exact-decode-only"}


@pytest.mark.parametrize("name", sorted(CLAUSE_SHARE))
def test_a_rule_wrong_on_one_clause_of_a_verdict_loses_that_clause_s_share(name, tmp_path, secret):
    """A short tail, a chunk of exactly min_chunk_tokens, an empty batch over the budget and
    a chunk that fits below min_chunk_tokens are each a few probes of their verdict; a rule
    wrong on one of them (or on starved's other clause, not one page fits, called infeasible)
    is wrong on a whole clause of the table, and verdicts is (1 - share - 0.6) / 0.4 of its 2
    points. Its feedback says what decides the verdict it missed."""
    report = grade("lesson3", wrong_file("lesson3", name, tmp_path), "grade", secret)
    verdicts = next(c for c in report.criteria if c.id == "verdicts")
    want = 2 * (1 - CLAUSE_SHARE[name] - 0.6) / 0.4
    assert verdicts.score == pytest.approx(want, abs=1e-3), verdicts.feedback
    assert CLAUSE_SAYS.get(name, "expected") in verdicts.feedback, verdicts.feedback


def test_a_search_one_page_short_of_the_rest_loses_progress(tmp_path, secret):
    """(remaining // pt - 1) pages for (remaining - 1) // pt: the last whole page before a
    rest of the prompt that is no whole number of pages is never tried. Where that page
    decides a chunk of a few pages (the hidden last-page probes), the chunk is one page
    short, below 95% of the largest; the probes were a few of many, and it kept 11.9 of 12.
    Their clause is a third of progress beside the plain probes and the large chunks: over
    31 drawn secrets it lost 0.19 to 0.34 of progress and kept 11.60 to 11.81. A quarter
    since a whole rest that fits is a clause too (2026-12-08): over 15 secrets it lost 0.17
    to 0.25 and kept 11.69 to 11.82."""
    report = grade("lesson3", wrong_file("lesson3", "last_page_missed", tmp_path), "grade", secret)
    progress = next(c for c in report.criteria if c.id == "progress")
    assert progress.max_score - progress.score >= 0.15, progress.feedback
    assert report.score <= 11.85, report.score
    last = [c for c in lesson3.hidden_probes(secret) if c.name.startswith("last-page#")]
    assert last and all(chunk_search.search(c.inputs).largest
                        == (c.inputs.prefill_remaining - 1) // c.inputs.page_tokens * c.inputs.page_tokens
                        > 0 for c in last)


def test_a_rule_that_starves_every_prompt_earns_no_progress_from_its_floor(tmp_path, secret):
    """Progress counts the worker's floor chunk for a starved plan. Last-page probes whose
    largest chunk was exactly min_chunk_tokens (the floor is that chunk) paid a rule that
    never chooses a chunk 0.1 to 0.3 of progress, once they weighed as a clause: the clause
    leaves out the probes the floor reaches, and the family's minimum is 0 or one page."""
    p = tmp_path / "starves.py"
    p.write_text("from reference.shapes import ChunkPlan\n\n\ndef choose_chunk(ctx):\n"
                 "    if ctx.cost.step_time(ctx.decode_contexts) > ctx.gap_budget_s:\n"
                 "        return ChunkPlan(0, 'infeasible')\n"
                 "    return ChunkPlan(0, 'starved')\n")
    progress = next(c for c in grade("lesson3", p, "grade", secret).criteria if c.id == "progress")
    assert progress.score == 0, progress.feedback


def test_a_one_token_chunk_is_said_in_the_singular(tmp_path):
    p = tmp_path / "one_token.py"
    p.write_text("from reference.shapes import ChunkPlan\n\n\ndef choose_chunk(ctx):\n"
                 "    return ChunkPlan(1, 'ok')\n")
    progress = next(c for c in grade("lesson3", p, "check").criteria if c.id == "progress")
    assert re.search(r"chunk of 1 token (is below|leaves)", progress.feedback), progress.feedback


def test_hidden_probes_put_an_empty_batch_over_the_budget(secret):
    """step_fixed alone over the budget, with nothing decoding: infeasible too."""
    empty = [c for c in lesson3.hidden_probes(secret)
             if not c.inputs.decode_contexts and chunk_oracle.step_s(c.inputs, 0) > c.inputs.gap_budget_s]
    assert empty, "no hidden probe is infeasible with an empty batch"


def _over_budget_in_run(scenario: str, choose_chunk):
    """The public scenario run on the worker with ``choose_chunk`` (stateless), computed here
    from the worker and the step log, not chunk_runs: each ok plan beside decoding requests
    whose step went over the budget, as (step, request, plan's context, tokens, step time)."""
    import numpy as np
    from grader.course.scenario import load_scenario
    from grader.engine.oracle import lesson_policy
    s = load_scenario(ROOT / "assignments" / "lesson3" / "public" / f"{scenario}.scenario.yaml", COURSE)
    asked = []

    def rule(ctx):
        plan = choose_chunk(ctx)
        asked.append((ctx, plan))
        return plan
    policy = lesson_policy({"choose_chunk": rule}, s.sheet)
    steps = s.run(policy).steps
    over = [i for i in np.flatnonzero((steps.batch > 0) & (steps.duration_s > policy.gap_budget_s))
            if steps.chunk_verdict[i] == "ok"]
    plans = [(ctx, plan) for ctx, plan in asked if plan.verdict == "ok" and ctx.decode_contexts
             and chunk_oracle.step_s(ctx, plan.tokens) > ctx.gap_budget_s]
    assert len(over) == len(plans)
    return [(int(i), steps.chunk_request[i], ctx, plan.tokens, float(steps.duration_s[i]))
            for i, (ctx, plan) in zip(over, plans)], policy.gap_budget_s


def test_an_ok_chunk_over_the_budget_in_a_run_costs_within_budget_and_names_its_step(tmp_path):
    """The whole rest of the prompt beside exactly one decoding request: a batch of one is a
    few probes of hundreds, and in a run the blown step is one gap of thousands (under the
    p99), so the rule kept 11.6 to 12 of 12. A run is judged as the probes are: an ok chunk
    whose step goes over the budget while requests decode breaks the run, and the feedback
    names the run, the step, the chunk and its time against the budget."""
    import importlib.util
    path = wrong_file("lesson3", "small_batch_overshoot", tmp_path)
    spec = importlib.util.spec_from_file_location("small_batch_overshoot", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    assert not _over_budget_in_run("busy-decode", module.choose_chunk)[0]
    over, budget = _over_budget_in_run("long-prompts", module.choose_chunk)
    assert len(over) == 1
    step, request, ctx, tokens, took = over[0]
    assert len(ctx.decode_contexts) == 1 and tokens == ctx.prefill_remaining
    within = next(c for c in grade("lesson3", path, "check").criteria if c.id == "within-budget")
    # One of the two public runs broken: half of the runs kept the budget, below the floor.
    assert within.score == 0, within.feedback
    shown, limit = chunk_oracle.ms_apart(took, budget)
    page = chunk_oracle.step_s(ctx, ctx.page_tokens)
    assert within.feedback.startswith(
        f"1 of 2 runs put an ok chunk's step over the budget while requests were decoding; first, public "
        f"scenario long-prompts: step {step}, {request}'s ok chunk of {tokens} tokens after {ctx.prefill_done} "
        f"prefilled, beside 1 decoding, took {shown}, over the budget {limit}; a smaller chunk fits: "
        f"one page ({ctx.page_tokens} tokens) makes the step {chunk_oracle.ms(page)}"), within.feedback
    assert within.evidence[0] == "long-prompts", within.evidence


def test_a_rule_over_the_budget_only_where_a_run_continues_a_prompt_loses_within_budget_there(tmp_path):
    """Module state: where a call continues a prompt the rule chose a chunk for (only a worker
    run does; every probe starts fresh) beside at most 8 decoding requests, the whole rest of
    the prompt. Right on every probe, over the budget in every run, and 12 of 12."""
    import re
    within = next(c for c in grade("lesson3", wrong_file("lesson3", "continuation_overshoot", tmp_path),
                                   "check").criteria if c.id == "within-budget")
    assert within.score == 0, within.feedback
    said = re.match(r"2 of 2 runs put an ok chunk's step over the budget while requests were decoding; first, "
                    r"public scenario busy-decode: step \d+, r\d+'s ok chunk of (\d+) tokens after (\d+) prefilled, "
                    r"beside ([1-8]) decoding, took (\S+) ms, over the budget (\S+) ms", within.feedback)
    assert said, within.feedback
    assert float(said[4]) > float(said[5]) and int(said[1]) > 0 and int(said[2]) > 0, within.feedback
    # The probes alone are right: the runs are the side that decides.
    assert "all" in within.feedback.split("; probes: ")[-1] and "right" in within.feedback, within.feedback


def _around_a_right_rule(path, rule: str):
    """A rule written around a correct one (alt_search.py's, as ``_right``): ``rule`` is the
    source after it, a ``choose_chunk`` that calls ``_right`` where it means to be right."""
    path.write_text((L3 / "alt_search.py").read_text().replace("def choose_chunk(", "def _right(")
                    + "\n\n" + rule)
    return path


def test_a_run_charges_no_step_that_makes_no_token_gap(tmp_path):
    """The runs judge ok chunks while requests decode: a step with nobody decoding makes no
    token gap, and the probes (empty batches among them) judge that case. A rule that takes
    the whole rest of the prompt on an idle worker goes over the budget in the public runs
    and is not charged there."""
    import numpy as np
    from grader.course.scenario import load_scenario
    from grader.engine.oracle import lesson_policy
    p = _around_a_right_rule(tmp_path / "idle_whole.py", "def choose_chunk(ctx):\n"
                             "    if not ctx.decode_contexts and ctx.cost.step_time() <= ctx.gap_budget_s:\n"
                             "        return ChunkPlan(ctx.prefill_remaining, 'ok')\n"
                             "    return _right(ctx)\n")
    namespace = {}
    exec(compile(p.read_text(), str(p), "exec"), namespace)
    s = load_scenario(ROOT / "assignments" / "lesson3" / "public" / "long-prompts.scenario.yaml", COURSE)
    policy = lesson_policy({"choose_chunk": namespace["choose_chunk"]}, s.sheet)
    steps = s.run(policy).steps
    assert np.any((steps.batch == 0) & (steps.duration_s > policy.gap_budget_s))
    within = next(c for c in grade("lesson3", p, "check").criteria if c.id == "within-budget")
    assert "runs put an ok chunk" not in within.feedback and "no ok chunk over the budget in 2 runs" \
        in within.feedback, within.feedback


def test_e2e_feedback_names_the_slow_step(tmp_path):
    report = grade("lesson3", wrong_file("lesson3", "per_token_only", tmp_path), "check")
    gap = next(c for c in report.criteria if c.id == "e2e-gap")
    assert "p99 token gap" in gap.feedback and "slowest: step" in gap.feedback and "prefilled" in gap.feedback


def test_broken_return_type_gets_zero_with_clear_feedback():
    report = grade("lesson3", L3 / "wrong_types.py", "check")
    assert report.score == 0
    assert all("expected ChunkPlan" in c.feedback for c in report.criteria)


def test_hidden_cases_depend_on_the_secret_and_only_on_it(reference_grade, secret):
    again = grade("lesson3", REFERENCE, "grade", secret)
    strip = lambda r: {**r.to_dict(), "duration_s": 0}
    assert strip(again) == strip(reference_grade)
    other = lesson3.hidden_cases(other_than(secret), COURSE)
    digests = lambda cases: {c.digest for c in cases}
    mine = [c for c in lesson3.hidden_cases(secret, COURSE)]
    assert digests(other).isdisjoint(digests(mine))


def test_check_on_the_command_line():
    p = subprocess.run([sys.executable, "-m", "grader.cli", "check", "lesson3", "--submission",
                        str(REFERENCE), "--json"], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    report = json.loads(p.stdout)
    assert report["score"] == report["max_score"] == 12


@pytest.mark.parametrize("body,says", [
    # The same plan everywhere: within the budget and page-aligned by luck, shown nowhere.
    ("return ChunkPlan(0, 'starved')", "the same"),
    # Different plans, none an ok chunk: no chunk of the rule's to judge.
    ("return ChunkPlan(ctx.prefill_remaining // 2, 'starved')", "no usable ok chunk"),
])
def test_a_rule_that_never_chooses_an_ok_chunk_earns_nothing_for_its_chunks(tmp_path, body, says):
    """Within the budget and page-aligned judge the ok chunks a rule chooses: with none to
    judge they pay nothing, not full marks for mistakes never made."""
    p = tmp_path / "never_ok.py"
    p.write_text("from reference.shapes import ChunkPlan\n\n\ndef choose_chunk(ctx):\n    " + body + "\n")
    report = grade("lesson3", p, "check")
    by_id = {c.id: c for c in report.criteria}
    for cid in ("within-budget", "page-aligned"):
        assert by_id[cid].score == 0, (cid, by_id[cid].feedback)
        assert says in by_id[cid].feedback


def test_a_rule_whose_every_ok_chunk_finishes_its_prompt_shows_no_alignment(tmp_path):
    """Alignment applies to a chunk that leaves some of the prompt. A rule that runs the whole
    prompt when it fits and is otherwise starved never chose such a chunk: page-aligned paid
    it in full for a rule it was never asked to keep. Its ok chunks do keep the budget."""
    p = tmp_path / "finish_or_starve.py"
    p.write_text("from reference.shapes import ChunkPlan\n\n\ndef choose_chunk(ctx):\n"
                 "    if ctx.cost.step_time(ctx.decode_contexts) > ctx.gap_budget_s:\n"
                 "        return ChunkPlan(0, 'infeasible')\n"
                 "    whole = ctx.cost.step_time(ctx.decode_contexts, ctx.prefill_remaining, ctx.prefill_done)\n"
                 "    return ChunkPlan(ctx.prefill_remaining, 'ok') if whole <= ctx.gap_budget_s else ChunkPlan(0, 'starved')\n")
    report = grade("lesson3", p, "check")
    by_id = {c.id: c for c in report.criteria}
    assert by_id["page-aligned"].score == 0, by_id["page-aligned"].feedback
    assert "finishes its prompt, so none shows page alignment" in by_id["page-aligned"].feedback
    assert by_id["within-budget"].score == by_id["within-budget"].max_score


# ---- the end-to-end runs' feedback, against the worker's own runs ----------------------------
def _fixed_run(scenario: str, tokens: int | None, max_steps: int | None = None):
    """The public scenario run on the worker: the reference's rule (tokens None) or a fixed
    chunk of ``tokens``, computed here from the worker and the records, not chunk_runs."""
    from grader.course.scenario import load_scenario
    from grader.engine.oracle import lesson_policy, reference_decisions
    from reference.knobs import with_knobs
    s = load_scenario(ROOT / "assignments" / "lesson3" / "public" / f"{scenario}.scenario.yaml", COURSE)
    policy = lesson_policy(reference_decisions("lesson3"), s.sheet)
    if tokens is not None:
        policy = with_knobs(policy, {"chunk_rule": {"rule": "fixed", "fixed_tokens": tokens}})
    run = s.run(policy, max_steps=max_steps) if max_steps else s.run(policy)
    firsts = [r.first_token_s - r.arrival_s for r in run.requests if r.first_token_s is not None]
    chunks = [int(c) for c in run.steps.chunk_tokens if c > 0]
    return run, firsts, sum(chunks) / len(chunks)


def test_a_rule_stopped_at_twice_the_oracles_steps_is_told_its_numbers(tmp_path):
    """One page per step: the run stops at 2x the oracle rule's steps (and 500 more); the
    feedback's steps, requests still waiting and mean chunks are the worker's."""
    report = grade("lesson3", L3 / "fixed_tiny.py", "check")
    ttft = next(c.feedback for c in report.criteria if c.id == "e2e-ttft")
    oracle, oracle_firsts, oracle_chunk = _fixed_run("busy-decode", None)
    steps = len(oracle.steps)
    mine, my_firsts, my_chunk = _fixed_run("busy-decode", 16, max_steps=2 * steps + 500)
    assert mine.aborted
    assert (f"first, public scenario busy-decode: TTFT far above the oracle rule's: your rule needed "
            f"more than 2x its {steps} steps, so the run was stopped with "
            f"{len(oracle_firsts) - len(my_firsts)} requests still waiting for a first token; your "
            f"chunks averaged {my_chunk:.0f} tokens, the oracle rule's {oracle_chunk:.0f}") in ttft, ttft


def test_a_slow_rule_that_finishes_is_told_how_far_above_the_oracles_ttft(tmp_path):
    """A fixed chunk of 256 finishes both public runs (within twice the oracle rule's steps)
    with a mean TTFT more than twice the oracle rule's (so the percent is over 100: a ratio
    between 1 and 2 could not tell 'ratio - 1' from 'ratio mod 1'): the percent and the means
    are the worker's."""
    p = tmp_path / "fixed256.py"
    p.write_text("from reference.shapes import ChunkPlan\n\n\ndef choose_chunk(ctx):\n"
                 "    return ChunkPlan(min(256, ctx.prefill_remaining), 'ok')\n")
    ttft = next(c for c in grade("lesson3", p, "check").criteria if c.id == "e2e-ttft")
    shown, ratios = [], []
    for scenario in ("busy-decode", "long-prompts"):
        _, best, best_chunk = _fixed_run(scenario, None)
        run, mine, my_chunk = _fixed_run(scenario, 256)
        assert not run.aborted and len(mine) == len(best)
        m, b = sum(mine) / len(mine), sum(best) / len(best)
        ratios.append(m / b)
        if m > b * 1.10:
            shown.append(f"public scenario {scenario}: mean TTFT {m:.4g} s is {m / b - 1:.0%} above the "
                         f"oracle rule's {b:.4g} s (allowed 10%); your chunks averaged {my_chunk:.0f} "
                         f"tokens, the oracle rule's {best_chunk:.0f}")
    assert shown and ttft.score < ttft.max_score and ratios[0] > 2
    assert f"first, {shown[0]}" in ttft.feedback, ttft.feedback


@pytest.mark.parametrize("body,says", [
    ("raise NotImplementedError", "choose_chunk is not implemented yet"),
    ("raise ValueError('no plan')", "choose_chunk failed during the run, so the worker could not use your "
                                    "rule (choose_chunk raised ValueError: no plan"),
])
def test_a_run_whose_rule_fails_says_whether_it_was_never_written_or_failed(tmp_path, body, says):
    p = tmp_path / "fails.py"
    p.write_text(f"def choose_chunk(ctx):\n    {body}\n")
    runs = [c for c in grade("lesson3", p, "check").criteria if c.id.startswith("e2e")]
    assert [c.id for c in runs] == ["e2e-gap", "e2e-ttft"]
    for c in runs:
        assert c.score == 0 and says in c.feedback, c.feedback
        assert ("failed during the run" in c.feedback) == ("ValueError" in body)


def test_what_the_runs_keep_crosses_boundaries_frozen():
    import dataclasses
    from grader.lessons.chunk_runs import OracleRun, RunPair
    o = OracleRun(10, 1.0, 3, 64.0)
    with pytest.raises(dataclasses.FrozenInstanceError):
        o.steps = 11
    with pytest.raises(dataclasses.FrozenInstanceError):
        RunPair(None, o, 0.1, "stopped").failure = ""


def test_a_step_a_hair_over_the_budget_reads_over_it_in_the_feedback(tmp_path):
    """README calculation 5: 80 tokens beside 108 requests at context 8192 make the step
    0.10000008 s, 0.08 µs over a 100 ms budget. Said to six digits, both were "100 ms", and
    the feedback read "makes the step 100 ms, over the budget 100 ms"."""
    p = _around_a_right_rule(tmp_path / "hair_over.py", "def choose_chunk(ctx):\n"
                             "    if len(ctx.decode_contexts) == 108 and ctx.prefill_done == 0:\n"
                             "        return ChunkPlan(80, 'ok')\n"
                             "    return _right(ctx)\n")
    feedback = next(c.feedback for c in grade("lesson3", p, "check").criteria if c.id == "within-budget")
    import re
    step, budget = map(float, re.search(r"makes the step (\S+) ms, over the budget (\S+) ms", feedback).groups())
    true = CostModel().step_time((8192,) * 108, 80, 0)
    assert true > 0.1 and step > budget == 100.0, feedback
    assert abs(step / 1000 - true) <= 1e-6 * true, (step, true)


def test_times_a_hair_apart_are_said_apart():
    assert chunk_oracle.ms_apart(0.10000008, 0.1) == ("100.0001 ms", "100 ms")
    assert chunk_oracle.ms_apart(0.004, 0.004 * (1 - 1e-6)) == ("4 ms", "3.999996 ms")
    assert chunk_oracle.ms_apart(0.158191248, 0.1) == ("158.191 ms", "100 ms")
    # Over by a whole tenth of a ms, yet "100.1 ms" sorts before "99.9 ms" as text.
    assert chunk_oracle.ms_apart(0.1001, 0.0999) == ("100.1 ms", "99.9 ms")
    # An ulp apart: distinct in ms only at 17 digits (128.27944384397145 and ...142).
    larger = 0.12827944384397144
    smaller = math.nextafter(larger, 0.0)
    assert larger * 1000 != smaller * 1000
    assert chunk_oracle.ms_apart(larger, smaller) == ("128.27944384397145 ms", "128.27944384397142 ms")
    # An ulp apart and one double once in ms: said in seconds, where they differ.
    larger = 0.3821235348693305
    smaller = math.nextafter(larger, 0.0)
    assert larger * 1000 == smaller * 1000
    assert chunk_oracle.ms_apart(larger, smaller) == ("0.3821235348693305 s", "0.38212353486933043 s")


@pytest.mark.parametrize("elsewhere,says", [
    ("ChunkPlan(0, 'starved')", "on the hidden probes, choose_chunk gave the same answer"),
    ("ChunkPlan(0, 'infeasible') if ctx.cost.step_time(ctx.decode_contexts) > ctx.gap_budget_s "
     "else ChunkPlan(0, 'starved')", "no usable ok chunk on any of the {n} hidden probes"),
])
def test_a_rule_fitted_to_the_public_probes_shows_no_chunk_on_the_hidden_ones(tmp_path, secret, elsewhere, says):
    """Right on the public probes (looked up by hand) and never a chunk elsewhere: its every ok
    chunk was on a probe it knew, and the hidden probes it starved passed within the budget and
    aligned for free, 4 of 12 from the public answers alone. In a grade the two criteria look
    for the rule's chunks on the hidden probes; the check, which has only public ones, judges
    the public chunks as before."""
    known = sorted((c.inputs.gap_budget_s, c.inputs.prefill_done, c.inputs.prefill_remaining,
                    len(c.inputs.decode_contexts)) for c in lesson3.public_probes(COURSE))
    p = _around_a_right_rule(tmp_path / "public_table.py", f"KNOWN = {known!r}\n\n\ndef choose_chunk(ctx):\n"
                             "    key = (ctx.gap_budget_s, ctx.prefill_done, ctx.prefill_remaining, "
                             "len(ctx.decode_contexts))\n"
                             f"    return _right(ctx) if key in KNOWN else {elsewhere}\n")
    graded = {c.id: c for c in grade("lesson3", p, "grade", secret).criteria}
    checked = {c.id: c for c in grade("lesson3", p, "check").criteria}
    for cid in ("within-budget", "page-aligned"):
        assert graded[cid].score == 0, (cid, graded[cid].feedback)
        assert says.format(n=len(lesson3.hidden_probes(secret))) in graded[cid].feedback, graded[cid].feedback
        assert checked[cid].score == checked[cid].max_score, (cid, checked[cid].feedback)


def test_a_rule_that_yields_its_plan_is_told_of_the_yield_not_sent_for_a_tuple(tmp_path):
    """A yield where a return was meant makes choose_chunk return a generator: the line
    said "return a tuple, tuple(...) of it", and a ChunkPlan is no tuple."""
    p = _around_a_right_rule(tmp_path / "yields.py", "def choose_chunk(ctx):\n    yield _right(ctx)\n")
    report = grade("lesson3", p, "check")
    assert report.score == 0
    for c in report.criteria:
        assert "a yield in the function makes it return one; return the value itself" in c.feedback, c.feedback


# ---- the probe criteria in process, on probes built by hand -----------------------------------
def _probe(name, rest, pt, min_chunk, largest):
    """A probe whose largest fitting candidate chunk is ``largest`` (0: not one page fits, nor
    the rest): the budget halfway between that chunk's step and the next candidate's."""
    base = ChunkContext(0.0, CostModel(), (2048,) * 32, 4096, rest, pt, min_chunk)
    low = chunk_oracle.step_s(base, largest)
    high = chunk_oracle.step_s(base, min(rest, (largest // pt + 1) * pt)) if largest < rest else 2 * low
    ctx = replace(base, gap_budget_s=(low + high) / 2)
    assert brute_force(ctx)[1] == largest, name
    return Case("probe", name, "public", ctx)


def _infeasible_probe(name):
    base = ChunkContext(0.0, CostModel(), (2048,) * 32, 4096, 500, 16, 64)
    ctx = replace(base, gap_budget_s=chunk_oracle.step_s(base, 0) * 0.9)
    assert brute_force(ctx) == ("infeasible", 0)
    return Case("probe", name, "public", ctx)


def _measure(check, plans, **params):
    """A probe criterion measured in process on (case, plan) pairs, as if choose_chunk had
    answered each case with its plan."""
    cases = [case for case, _ in plans]
    answers = [Answer(case, value=plan) for case, plan in plans]
    return check(CheckContext(None, cases, memo={("plans", tuple(c.name for c in cases)): answers}), params)


def _right(case):
    e = brute_force(case.inputs)
    return case, ChunkPlan(e[1] if e[0] == "ok" else 0, e[0])


def _plain_ok(i):
    """An ok probe decided by no clause: many pages left, a chunk of many pages fits."""
    return _probe(f"plain#{i}", 5000 + i, 16, 64, 40 * 16 + 16 * i)


def test_progress_weighs_as_a_clause_exactly_the_last_page_probes_the_floor_does_not_reach():
    """The last whole page before a rest that is no whole number of pages, where one page
    less is short of the share and the worker's floor chunk is short of it too, weighs as a
    clause of its own in progress. One such probe answered with an impossible chunk beside
    three right plain ones: a clause of its own halves progress, one probe of four a quarter."""
    plain = [_right(_plain_ok(i)) for i in range(3)]

    def named(case, share=0.95):
        value = _measure(progress, [(case, ChunkPlan(-1, "ok")), *plain], share=share).value
        assert value in (pytest.approx(0.5), pytest.approx(0.75)), (case.name, value)
        return value == pytest.approx(0.5)
    named_ones = {
        # rest 4 pages + 15, the last whole page is the 4th: named
        "last-page": _probe("last-page", 4 * 16 + 15, 16, 16, 4 * 16),
        "last-page-one-over": _probe("last-page-one-over", 4 * 16 + 1, 16, 16, 4 * 16),
        # the whole rest fits: no page is the last whole one, but the rest is a clause of its own
        "whole-rest-fits": _probe("whole-rest-fits", 4 * 16 + 5, 16, 16, 4 * 16 + 5),
    }
    not_named = {
        # 30 pages: one page less is within 95% of the chunk
        "long-chunk": _probe("long-chunk", 30 * 16 + 5, 16, 16, 30 * 16),
        # the floor (min_chunk_tokens 64) is the chunk itself: a rule that never chooses is paid as much
        "floor-is-the-chunk": _probe("floor-is-the-chunk", 4 * 16 + 5, 16, 64, 4 * 16),
        # the floor (38 tokens) is exactly 95% of the 40-token chunk: it reaches the share
        "floor-at-the-share": _probe("floor-at-the-share", 10 * 4 + 2, 4, 38, 10 * 4),
        # the rest is a whole number of pages: the last page is the rest itself
        "whole-pages": _probe("whole-pages", 5 * 16, 16, 16, 4 * 16),
        # a page short of the last whole one
        "page-short": _probe("page-short", 5 * 16 + 5, 16, 16, 4 * 16),
    }
    assert {name for name, case in {**named_ones, **not_named}.items() if named(case)} == set(named_ones)
    # At a share of 0.75 the 48-token chunk's floor of 36 reaches 36 tokens: not named; one
    # token of floor less is short of it, named.
    assert not named(_probe("floor-at-three-quarters", 3 * 16 + 5, 16, 36, 3 * 16), share=0.75)
    assert named(_probe("floor-below-three-quarters", 3 * 16 + 5, 16, 35, 3 * 16), share=0.75)


def test_progress_weighs_a_largest_chunk_of_thousands_of_tokens_as_a_clause():
    """A largest chunk of LARGE_CHUNK tokens or more that leaves some of the prompt is a
    clause of progress: one answered with an impossible chunk beside three right plain ones
    halves progress. A whole rest of that size is no such chunk (nothing bounds it but the
    prompt; it is the clause of a rest that fits), nor is one just under the size."""
    from grader.lessons.chunk_probes import LARGE_CHUNK
    plain = [_right(_plain_ok(i)) for i in range(3)]

    def named(case):
        value = _measure(progress, [(case, ChunkPlan(-1, "ok")), *plain]).value
        assert value in (pytest.approx(0.5), pytest.approx(0.75)), (case.name, value)
        return value == pytest.approx(0.5)
    assert named(_probe("large", LARGE_CHUNK + 500, 16, 64, LARGE_CHUNK))
    assert named(_probe("larger", 20000, 1, 0, 3 * LARGE_CHUNK + 7))
    assert not named(_probe("just-under", LARGE_CHUNK + 500, 16, 64, LARGE_CHUNK - 16))
    assert not named(_probe("whole-rest", LARGE_CHUNK, 16, 64, LARGE_CHUNK))


def test_a_chunk_short_of_a_rest_that_fits_loses_its_probe_whatever_the_share():
    """Where the whole rest of the prompt fits, a chunk short of it leaves the rest a step
    of its own: wrong, not paid in proportion (whole pages of a long rest were more than 95%
    of it, drops_partial_tail kept 12 of 12). Such a rest, whole pages and a partial one, is
    a clause of progress; a rest of whole pages, or of less than a page, is not."""
    plain = [_right(_plain_ok(i)) for i in range(3)]
    rest = _probe("rest", 40 * 16 + 5, 16, 64, 40 * 16 + 5)
    alone = _measure(progress, [(rest, ChunkPlan(40 * 16, "ok"))])
    assert alone.value == 0 and "leaves 5 tokens of the prompt to another step" in alone.feedback
    assert _measure(progress, [(rest, ChunkPlan(40 * 16 + 5, "ok"))]).value == 1

    def named(case):
        value = _measure(progress, [(case, ChunkPlan(-1, "ok")), *plain]).value
        assert value in (pytest.approx(0.5), pytest.approx(0.75)), (case.name, value)
        return value == pytest.approx(0.5)
    assert named(rest)
    assert not named(_probe("whole-pages-rest", 40 * 16, 16, 64, 40 * 16))
    assert not named(_probe("short-tail", 12, 16, 64, 12))


def test_every_secret_holds_largest_chunks_of_thousands_of_tokens(many_secrets):
    """A search bounded at a few thousand tokens is right on every smaller chunk: the hidden
    probes must hold chunks past any such bound, past 16,384 tokens too, that leave some of
    the prompt, and on which the worker's floor for a starved plan earns little."""
    from grader.lessons.chunk_probes import LARGE_CHUNK, floor_chunk
    for s in many_secrets:
        large = []
        for c in lesson3.hidden_probes(s):
            verdict, largest = brute_force(c.inputs) if c.name.startswith("large-chunk#") else (None, 0)
            if verdict == "ok" and LARGE_CHUNK / 0.95 < largest < c.inputs.prefill_remaining:
                large.append(largest)
                assert floor_chunk(c.inputs) <= largest / 8, c.label
        assert len(large) == lesson3.PROBE_FAMILIES["large-chunk"], (s, large)
        assert sum(n > 4 * LARGE_CHUNK for n in large) >= 3 and max(large) > 8 * LARGE_CHUNK, (s, large)


def test_a_chunk_short_of_the_share_earns_its_share_of_the_share():
    """Progress pays a short chunk tokens / (share x largest): 32 tokens of a 64-token
    largest chunk are 32 / 60.8 of the credit, and a starved plan its floor chunk's share."""
    case = _plain_ok(0)
    largest = brute_force(case.inputs)[1]
    assert _measure(progress, [(case, ChunkPlan(32, "ok"))], share=0.95).value == pytest.approx(32 / (0.95 * largest))
    assert _measure(progress, [(case, ChunkPlan(0, "starved"))], share=0.5).value == pytest.approx(64 / (0.5 * largest))


def test_a_whole_rest_of_exactly_min_chunk_tokens_is_no_short_tail_in_the_verdicts():
    """A short tail finishes the prompt below min_chunk_tokens; a whole rest of exactly
    min_chunk_tokens is ok by the other clause (at least min_chunk_tokens) and weighs with
    the plain ok probes. Called starved beside two right plain ones and a right tail: 2/3 of
    the plain clause and all of the tail's, 5/6 (3/4 were it counted as a tail)."""
    exact = _probe("exact-rest", 64, 16, 64, 64)
    tail = _probe("tail", 40, 16, 64, 40)
    m = _measure(verdicts, [(exact, ChunkPlan(0, "starved")), _right(_plain_ok(0)), _right(_plain_ok(1)), _right(tail)])
    assert m.value == pytest.approx(5 / 6), m
    assert "a chunk of 64 tokens fits" in m.feedback and "is at least min_chunk_tokens 64" in m.feedback, m.feedback


def test_a_wrong_verdict_is_told_what_decides_the_right_one():
    """Starved with not one page fitting, starved with a chunk below min_chunk_tokens, and
    infeasible each say their own reason; only a plan that says infeasible is told what
    infeasible means."""
    def why(case, plan):
        m = _measure(verdicts, [(case, plan)])
        assert m.value == 0.0 and m.feedback.startswith("1 of 1 probes wrong; "), m.feedback
        return m.feedback.split(": ", 1)[1]
    nothing = _probe("nothing-fits", 500, 16, 64, 0)
    assert why(nothing, ChunkPlan(16, "ok")) == ("said 'ok', expected 'starved': not even one page (16 tokens) "
                                                 "fits next to the batch, nor the whole 500-token rest")
    below = _probe("below-min", 500, 16, 64, 32)
    assert why(below, ChunkPlan(32, "ok")) == ("said 'ok', expected 'starved': the largest chunk that fits is "
                                               "32 tokens, below min_chunk_tokens 64, and does not finish the prompt")
    over = why(_infeasible_probe("over"), ChunkPlan(0, "starved"))
    assert over.startswith("said 'starved', expected 'infeasible': the decode-only step takes ") \
        and over.endswith("no chunk can help"), over
    told = "infeasible is a decode-only step over the budget"
    assert told in why(below, ChunkPlan(0, "infeasible"))
    assert told not in why(_plain_ok(0), ChunkPlan(0, "starved")) and told not in why(nothing, ChunkPlan(16, "ok"))


def test_every_secret_holds_partial_chunks_on_pages_that_are_no_power_of_two(many_secrets):
    """A rounding that masks bits is right on powers of two alone: the hidden probes must hold
    pages of other sizes where the largest chunk leaves some of the prompt, or it keeps
    page-aligned."""
    for s in many_secrets:
        odd = [c for c in lesson3.hidden_probes(s) if c.inputs.page_tokens & (c.inputs.page_tokens - 1)]
        found = [(c, *brute_force(c.inputs)) for c in odd]
        partial = [c for c, verdict, largest in found if verdict == "ok"
                   and 0 < largest < c.inputs.prefill_remaining
                   and largest & -c.inputs.page_tokens != largest]
        assert len(partial) >= 5, (s, len(odd), len(partial))


def test_pages_that_are_no_power_of_two_weigh_as_a_clause_in_page_aligned():
    """Three plain probes on 16-token pages right, one on 24-token pages wrong: a clause of
    its own halves page-aligned (one probe of four would cost a quarter), and the feedback
    says a page need not be a power of two."""
    plain = [_right(_plain_ok(i)) for i in range(3)]
    odd = _probe("odd-page", 5000, 24, 48, 40 * 24)
    m = _measure(page_aligned, [(odd, ChunkPlan(40 * 24 - 8, "ok")), *plain])
    assert m.value == pytest.approx(0.5), m
    assert "not a multiple of page_tokens 24 (a page is any whole number of tokens, not always a power of two)" \
        in m.feedback, m.feedback
    m = _measure(page_aligned, [(plain[0][0], ChunkPlan(100, "ok")), *plain[1:], _right(odd)])
    assert m.value == pytest.approx(1 - 1 / 3 / 2), m
    assert "power of two" not in m.feedback, m.feedback


def test_a_line_that_finds_no_chunk_to_judge_names_the_answers_it_could_not_use():
    """A rule whose every partial chunk came back a float (2080.0) was told only that every
    ok chunk it gave finished its prompt: its whole-prompt answers, the only usable ones, did.
    The line now says how many answers could not be used, and the first one's problem."""
    whole, part, other = _probe("whole", 40, 16, 64, 40), _plain_ok(0), _plain_ok(1)
    wrong = "choose_chunk returned ChunkPlan.tokens: expected int, got float 2080.0"
    answers = [Answer(whole, value=ChunkPlan(40, "ok")), Answer(part, problem=wrong),
               Answer(other, value=ChunkPlan(-1, "ok"))]
    cases = [whole, part, other]
    m = page_aligned(CheckContext(None, cases, memo={("plans", tuple(c.name for c in cases)): answers}), {})
    assert m.value == 0 and "finishes its prompt, so none shows page alignment" in m.feedback, m.feedback
    assert m.feedback.endswith(f"; 2 of the 3 answers could not be used; first, plain#0: {wrong}"), m.feedback
    answers = [Answer(whole, value=ChunkPlan(0, "starved")), Answer(part, problem=wrong),
               Answer(other, value=ChunkPlan(0, "infeasible"))]
    m = page_aligned(CheckContext(None, cases, memo={("plans", tuple(c.name for c in cases)): answers}), {})
    assert "no usable ok chunk on any of the 3 probes" in m.feedback and m.feedback.endswith(
        f"; 1 of the 3 answers could not be used; first, plain#0: {wrong}"), m.feedback
    # Nothing left out, nothing said of it.
    m = _measure(page_aligned, [(whole, ChunkPlan(40, "ok")), (part, ChunkPlan(0, "starved")), (other, ChunkPlan(0, "starved"))])
    assert m.value == 0 and "could not be used" not in m.feedback, m.feedback


def test_an_unaligned_chunk_is_told_the_page_multiple_below_it():
    m = _measure(page_aligned, [(_plain_ok(0), ChunkPlan(100, "ok")), _right(_plain_ok(1))])
    assert m.value == 0.5 and m.feedback.endswith(
        "chunk of 100 tokens is not a multiple of page_tokens 16 and does not finish the prompt "
        "(5000 left); round down to 96"), m.feedback
