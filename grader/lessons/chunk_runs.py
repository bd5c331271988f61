"""Lesson 3 end to end: the learner's chunk rule in the worker, beside the oracle rule's run.

Probes judge one decision; a run shows what the rule does to a workload: the token gaps
the decoding requests see, and how soon prompts get their first token. Each scenario runs
with the learner's choose_chunk beside the course baselines (reference.baselines) for the
other decisions, and with the reference rule beside the same baselines: that run is the
oracle, and what the criteria need of it (its steps, mean TTFT, mean chunk) is a figure,
recorded in the learner edition.
"""
from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from grader.engine.cases import Case
from grader.engine.checks import Answer, CheckContext, Measure, check, grade_answers
from grader.course.experiments.common import token_gaps, ttfts
from grader.engine.codec import persistent
from grader.engine.text import plural
from grader.engine.learner_policy import CallLog, learner_decisions
from grader.lessons.chunk_oracle import ms, ms_apart, step_s
from grader.lessons.chunk_probes import unusable
from grader.engine.oracle import figures, lesson_policy, reference_decisions, solution
from grader.engine.together import memo_runs
from reference.records import Run
from reference.shapes import ChunkContext, ChunkPlan
from reference.worker import PolicyError

GAP_SLACK = 1e-9          # token gaps are differences of summed floats: allow their rounding
STEP_CAP = 2              # a learner's run stops after this many times the oracle's steps


@persistent
@dataclass(frozen=True)
class OracleRun:
    """What the criteria read of the oracle rule's run of a scenario."""
    steps: int
    mean_ttft_s: float          # over the requests that got a first token (inf if none did)
    first_tokens: int           # how many did
    mean_chunk: float           # mean prefill chunk, in tokens


def _summary(run: Run) -> OracleRun:
    mean, n = mean_ttft(run)
    return OracleRun(len(run.steps), mean, n, _mean_chunk(run))


def oracle_run(case: Case) -> OracleRun:
    s = case.inputs
    return figures("lesson3-oracle", case.digest,
                   lambda: _summary(s.run(lesson_policy(reference_decisions("lesson3"), s.sheet))),
                   needs=(solution("lesson3"),), persist=case.visibility == "public")


@dataclass(frozen=True)
class RunChunk:
    """An ok plan of a run a criterion finds against: a step over the budget while requests
    were decoding, or a chunk that is not whole pages and leaves some of the prompt."""
    call: int              # which call of the rule in the run (from 1)
    ctx: ChunkContext      # what the rule was asked
    tokens: int            # the ok chunk it chose


@dataclass(frozen=True)
class RunPair:
    """One scenario run with the learner's rule (None when a call failed) and the oracle rule."""
    learner: Run | None
    oracle: OracleRun
    budget_s: float
    failure: str           # why the learner's run stopped ("" when it ran to the end)
    chosen: int = 0        # ok chunks of the learner's rule the worker ran as given
    # within-budget's evidence, from every call up to a stop: the ok plans beside decoding
    # requests, how many of them put the step over the budget, and the first that did.
    judged: int = 0
    over: int = 0
    first_over: RunChunk | None = None
    # page-aligned's: the ok plans that leave some of the prompt, how many of them are not
    # whole pages, and the first that is not.
    partial: int = 0
    unaligned: int = 0
    first_unaligned: RunChunk | None = None

    def not_evidence(self) -> str:
        """Why this run shows nothing of the learner's rule ("" when it does): the gaps and
        first tokens of a run the worker's floor drove are the floor's, not the rule's."""
        if not self.chosen:
            return ("your rule chose no chunk in this run (every plan was starved or infeasible), so "
                    "the worker's floor ran every chunk: the run says nothing of your rule")
        return ""


class _Stopped(Exception):
    """A call of the learner's rule failed, or gave a plan the worker cannot use: the run is
    decided (it is not the rule's, but the floor's from there on), so it stops there."""


def _pair(ctx: CheckContext, case: Case) -> RunPair:
    return memo_runs(ctx, case, _made_pair)


def _made_pair(sandbox, case: Case) -> RunPair:
    s = case.inputs
    log = CallLog()
    remote = learner_decisions(sandbox, ("choose_chunk",), log)["choose_chunk"]

    counts = {"calls": 0, "chosen": 0, "unusable": "", "judged": 0, "over": 0, "first_over": None,
              "partial": 0, "unaligned": 0, "first_unaligned": None}

    def choose_chunk(c: ChunkContext) -> ChunkPlan:
        counts["calls"] += 1
        try:
            plan = remote(c)
        except PolicyError:
            raise _Stopped from None
        why = unusable(c, plan)
        if why:
            counts["unusable"] = f"{plan!r}: {why}"
            raise _Stopped
        counts["chosen"] += plan.verdict == "ok"
        if plan.verdict == "ok" and c.decode_contexts:
            # What a probe asks of an ok chunk, asked of every one the run's decoders wait on.
            counts["judged"] += 1
            if over_budget(c, plan.tokens):
                counts["over"] += 1
                counts["first_over"] = counts["first_over"] or RunChunk(counts["calls"], c, plan.tokens)
        if plan.verdict == "ok" and plan.tokens < c.prefill_remaining:
            # What a probe asks of a chunk that leaves some of the prompt, asked in the run.
            counts["partial"] += 1
            if plan.tokens % c.page_tokens:
                counts["unaligned"] += 1
                counts["first_unaligned"] = (counts["first_unaligned"]
                                             or RunChunk(counts["calls"], c, plan.tokens))
        return plan
    oracle = oracle_run(case)
    policy = lesson_policy({"choose_chunk": choose_chunk}, s.sheet)
    # A rule that needs many times the oracle's steps has already lost on TTFT; stopping
    # it there keeps a one-page-per-step rule from taking minutes.
    cap = STEP_CAP * oracle.steps + 500
    try:
        learner = s.run(policy, max_steps=cap)
    except _Stopped:
        if counts["unusable"]:
            why = (f"the worker could not use your plan {counts['unusable']}, and would have run its "
                   "floor chunk instead: a run of the floor's chunks says nothing of your rule")
        else:
            first = log.first["choose_chunk"]
            why = first if "not implemented" in first else (
                f"choose_chunk failed during the run, so the worker could not use your rule ({first})")
        return RunPair(None, oracle, policy.gap_budget_s, why, 0, **_judged(counts))
    return RunPair(learner, oracle, policy.gap_budget_s, "", counts["chosen"], **_judged(counts))


def _judged(counts: dict) -> dict:
    """What the run's calls showed the criteria, as RunPair's fields (every call up to a stop)."""
    return {k: counts[k] for k in ("judged", "over", "first_over", "partial", "unaligned", "first_unaligned")}


def over_budget(c: ChunkContext, tokens: int) -> bool:
    """The step of this chunk goes over the budget by more than float rounding: a rule that
    checks step - decode_only <= budget - decode_only (as the reference does) may land an ulp
    past a step time the worker sums in another order, and no probe of a run is kept off that
    edge. A chunk one token too large is over by far more (per_token alone is 1e-4 of it)."""
    return step_s(c, tokens) > c.gap_budget_s * (1 + GAP_SLACK)


def _scenario_answers(ctx: CheckContext) -> list[Answer]:
    answers = []
    for case in ctx.family("scenario"):
        pair = _pair(ctx, case)
        answers.append(Answer(case, pair, pair.failure))
    return answers


def worst_step(run: Run) -> str:
    """The slowest step that carried a chunk, in words."""
    steps = run.steps
    with_chunk = np.flatnonzero(steps.chunk_tokens > 0)
    if with_chunk.size == 0:
        return ""
    i = int(with_chunk[np.argmax(steps.duration_s[with_chunk])])
    rid = steps.chunk_request[i]
    done = int(sum(int(steps.chunk_tokens[j]) for j in with_chunk if j < i and steps.chunk_request[j] == rid))
    return (f"; slowest: step {i}, {rid}'s chunk of {int(steps.chunk_tokens[i])} tokens after {done} "
            f"prefilled, with {int(steps.batch[i])} decoding, took {ms(float(steps.duration_s[i]))}")


@check("lesson3.e2e_gap", params={"percentile": (0, 100)})
def e2e_gap(ctx: CheckContext, params: dict) -> Measure:
    q = float(params.get("percentile", 99))

    def judge(case: Case, pair: RunPair) -> str:
        if pair.not_evidence():
            return pair.not_evidence()
        if pair.learner.aborted:
            # The gaps of requests that were never served were never measured.
            return (f"the run was stopped: your rule needed more than {STEP_CAP}x the oracle rule's "
                    f"{pair.oracle.steps} steps, so its token gaps are of the few requests it served")
        gaps = token_gaps(pair.learner)
        if gaps.size == 0:
            return "no request emitted two tokens, so there is no token gap to measure"
        p = float(np.percentile(gaps, q))
        if p <= pair.budget_s * (1 + GAP_SLACK):
            return ""
        late = int(np.count_nonzero(gaps > pair.budget_s * (1 + GAP_SLACK)))
        gap, budget = ms_apart(p, pair.budget_s)
        return (f"p{q:g} token gap {gap} > budget {budget} ({late} of {gaps.size} "
                f"gaps over budget){worst_step(pair.learner)}")
    return grade_answers(_scenario_answers(ctx), judge, "scenarios")


def mean_ttft(run: Run) -> tuple[float, int]:
    """Mean TTFT over the requests that got a first token, and how many did."""
    t = ttfts(run)
    return (float(t.mean()) if t.size else float("inf")), int(t.size)


def _mean_chunk(run: Run) -> float:
    chunks = run.steps.chunk_tokens[run.steps.chunk_tokens > 0]
    return float(chunks.mean()) if chunks.size else 0.0


@check("lesson3.e2e_ttft", params={"tolerance": (0, 1)})
def e2e_ttft(ctx: CheckContext, params: dict) -> Measure:
    tolerance = float(params.get("tolerance", 0.10))

    def judge(case: Case, pair: RunPair) -> str:
        if pair.not_evidence():
            return pair.not_evidence()
        mine, n_mine = mean_ttft(pair.learner)
        best, n_best = pair.oracle.mean_ttft_s, pair.oracle.first_tokens
        if pair.learner.aborted:
            return (f"TTFT far above the oracle rule's: your rule needed more than {STEP_CAP}x its "
                    f"{pair.oracle.steps} steps, so the run was stopped with {n_best - n_mine} "
                    f"requests still waiting for a first token; your chunks averaged "
                    f"{_mean_chunk(pair.learner):.0f} tokens, the oracle rule's {pair.oracle.mean_chunk:.0f}")
        if n_mine < n_best:
            return f"{n_best - n_mine} requests never got a first token"
        if mine <= best * (1 + tolerance):
            return ""
        return (f"mean TTFT {mine:.4g} s is {mine / best - 1:.0%} above the oracle rule's {best:.4g} s "
                f"(allowed {tolerance:.0%}); your chunks averaged {_mean_chunk(pair.learner):.0f} tokens, "
                f"the oracle rule's {pair.oracle.mean_chunk:.0f}")
    return grade_answers(_scenario_answers(ctx), judge, "scenarios")


# ---- within-budget, in the runs ----------------------------------------------------------------
def _step_of(run: Run | None, o: RunChunk, more: str) -> str:
    """Where the overshoot is in the run's step log (its step, request and what it carried),
    ``more`` (how many such steps), and what the rule should have said instead."""
    c, took = o.ctx, step_s(o.ctx, o.tokens)
    where = f"call {o.call} of your rule"
    if run is not None:
        steps = run.steps
        rows = np.flatnonzero((steps.chunk_tokens == o.tokens) & (steps.duration_s == took)
                              & (steps.batch == len(c.decode_contexts)))
        row = next((int(i) for i in rows if steps.chunk_verdict[i] == "ok"), None)
        if row is not None:
            where = f"step {row}, {steps.chunk_request[row]}'s"
    shown, budget = ms_apart(took, c.gap_budget_s)
    said = (f"{where} ok chunk of {o.tokens} tokens after {c.prefill_done} prefilled, beside "
            f"{len(c.decode_contexts)} decoding, took {shown}, over the budget {budget}{more}")
    smallest = min(c.page_tokens, c.prefill_remaining)
    what = f"one page ({smallest} tokens)" if smallest == c.page_tokens else f"the whole {smallest}-token rest"
    if step_s(c, 0) > c.gap_budget_s:
        return (f"{said}; the decode-only step alone takes {ms(step_s(c, 0))}: no chunk fits, and the "
                "plan that says so is infeasible, not ok")
    if step_s(c, smallest) > c.gap_budget_s:
        return (f"{said}; not even {what} fits beside the batch ({ms(step_s(c, smallest))}): no chunk "
                "fits, and the plan that says so is starved, not ok")
    return f"{said}; a smaller chunk fits: {what} makes the step {ms(step_s(c, smallest))}"


def _probes_and_runs(ctx: CheckContext, probes: Measure, shows, breaks, said, clean: str) -> Measure:
    """A criterion on both sides: the probes' measure, and the share of runs that keep the
    property, the lower counting. ``shows(pair)``: the run holds a chunk the property judges
    (one that holds none counts on neither side; with no scenario, the probes' measure is
    all); ``breaks(pair)``: it breaks the property; ``said(case, pair)``: what the first run
    that breaks it did; ``clean``: what the feedback adds when no run breaks it."""
    shown = [(case, pair) for case in ctx.family("scenario") if shows(pair := _pair(ctx, case))]
    if not shown:
        return probes
    broken = [(case, pair) for case, pair in shown if breaks(pair)]
    runs = plural(len(shown), "run")
    if not broken:
        return replace(probes, feedback=f"{probes.feedback}; {clean} in {runs}")
    case, pair = broken[0]
    share = 1 - len(broken) / len(shown)
    evidence = tuple(c.cite for c, _ in broken) + probes.evidence
    return Measure(min(share, probes.value),
                   f"{len(broken)} of {runs} {said(case, pair)}; probes: {probes.feedback}", evidence)


def within_budget_in_runs(ctx: CheckContext, probes: Measure) -> Measure:
    """within-budget on both sides: the probes' measure, and the runs'. A run asks the rule
    what a probe asks, at every step, and more: a call that continues a prompt, a batch of
    one, the steps of a workload. An ok chunk whose step goes over the budget while requests
    decode breaks the run (its requests all wait on that step), as one broken promise breaks a
    lesson 2 run; the runs' share is that of unbroken runs, and the criterion the lower side.
    A run in which the rule chose no ok chunk beside decoding requests shows nothing of it."""
    def said(case: Case, pair: RunPair) -> str:
        more = f" ({pair.over} such steps in this run)" if pair.over > 1 else ""
        return (f"put an ok chunk's step over the budget while requests were decoding; first, "
                f"{case.label or case.name}: {_step_of(pair.learner, pair.first_over, more)}")
    return _probes_and_runs(ctx, probes, lambda p: p.judged, lambda p: p.over, said,
                            "no ok chunk over the budget")


def page_aligned_in_runs(ctx: CheckContext, probes: Measure) -> Measure:
    """page-aligned on both sides, as within-budget: the probes' measure, and the share of
    runs whose ok chunks that leave some of the prompt are all whole pages. A rule that
    rounded on the probes alone (each a first call of a prompt) and chose the largest fitting
    chunk to the token on a run's continuations kept the point. A run with no such chunk
    shows nothing of it."""
    def said(case: Case, pair: RunPair) -> str:
        o = pair.first_unaligned
        c = o.ctx
        return (f"ran ok chunks that are not a multiple of page_tokens and leave some of the prompt "
                f"({pair.unaligned} of {pair.partial} such chunks in the first); first, "
                f"{case.label or case.name}: call {o.call} of your rule chose {o.tokens} tokens after "
                f"{c.prefill_done} prefilled, {c.prefill_remaining} left, pages of {c.page_tokens} "
                f"tokens: round down to {o.tokens - o.tokens % c.page_tokens}")
    return _probes_and_runs(ctx, probes, lambda p: p.partial, lambda p: p.unaligned, said,
                            "every ok chunk that left some of the prompt was whole pages")
