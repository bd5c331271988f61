"""Lesson 3, the chunk rule: probes against a search oracle, then the rule end to end.

Cases: ``probe`` (one ChunkContext) and ``scenario`` (a workload the worker runs with the
learner's choose_chunk). Public probes come from assignments/lesson3/public/probes.yaml,
public scenarios from the other files there; hidden probes are drawn from the instructor
secret per family (short and very long prefixes, empty and full decode batches, budgets
next to the decode-only step or a page boundary, coefficients other than the defaults),
hidden scenarios from grader/families/lesson3.yaml.

The oracle finds the largest fitting chunk by binary search over page multiples with the
true cost model (step time only grows with the chunk), never by the reference's formula,
so another correct rule is judged by what it does, not by how it computes it.
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Mapping

import numpy as np
import yaml

from grader.cases import Case
from grader.checks import Answer, CheckContext, Measure, ask, check, grade_answers
from grader.errors import InputError
from grader.experiments.common import token_gaps, ttfts
from grader.learner_policy import CallLog, learner_policy
from grader.memo import remember
from grader.scenario import hidden_scenarios, public_scenarios
from grader.secret import derive_seed
from reference.policy import reference_policy
from reference.records import Run
from reference.shapes import ChunkContext, ChunkPlan, CostModel
from reference.specs import SpecError, cost_from
from reference.worker import PolicyError

PROGRESS_SHARE = 0.95     # an ok chunk must reach this share of the largest fitting one
EDGE = 1e-7               # probes keep the budget this far (relative) from a deciding step time
GAP_SLACK = 1e-9          # token gaps are differences of summed floats: allow their rounding
STEP_CAP = 2              # a learner's run stops after this many times the oracle's steps


# ---- the oracle ---------------------------------------------------------------------------
def step_s(ctx: ChunkContext, tokens: int) -> float:
    """The true time of this step with a chunk of ``tokens`` (0: the decode-only step)."""
    return ctx.cost.step_time(ctx.decode_contexts, tokens, ctx.prefill_done)


def fits(ctx: ChunkContext, tokens: int) -> bool:
    return step_s(ctx, tokens) <= ctx.gap_budget_s


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


def expected(ctx: ChunkContext) -> Expected:
    """Candidates: page multiples below the remaining prompt, and the remaining prompt itself.

    infeasible: the decode-only step already misses the budget (no chunk can help).
    starved: not infeasible, and the largest fitting candidate neither finishes the prompt
    nor reaches min_chunk_tokens (or is 0). A short tail that fits is ok even when it is
    below min_chunk_tokens: it finishes the prompt, so TTFT does not grow.
    """
    decode_only = step_s(ctx, 0)
    remaining, pt = ctx.prefill_remaining, ctx.page_tokens
    if not fits(ctx, 0):
        return Expected("infeasible", 0, decode_only)
    if fits(ctx, remaining):
        return Expected("ok", remaining, decode_only)
    lo, hi = 0, (remaining - 1) // pt        # page counts: lo fits; above hi is the whole rest
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if fits(ctx, mid * pt):
            lo = mid
        else:
            hi = mid - 1
    largest = lo * pt
    ok = largest > 0 and largest >= ctx.min_chunk_tokens
    return Expected("ok" if ok else "starved", largest, decode_only)


def knife_edges(ctx: ChunkContext) -> list[float]:
    """Step times that decide the answer: a budget this close to one is a float coin toss."""
    e = expected(ctx)
    times = [e.decode_only_s]
    if e.verdict != "infeasible":
        times.append(step_s(ctx, e.largest))
        nxt = e.next_candidate(ctx)
        if nxt is not None:
            times.append(step_s(ctx, nxt))
    return [t for t in times if abs(t - ctx.gap_budget_s) <= EDGE * ctx.gap_budget_s]


# ---- public cases ---------------------------------------------------------------------------
def _decode(value: Any, where: str) -> tuple[int, ...]:
    """A list of context lengths, or {count: N, context: C} for N decoders at context C."""
    if value is None:
        return ()
    if isinstance(value, Mapping):
        n, c = value.get("count"), value.get("context")
        if not (isinstance(n, int) and isinstance(c, int) and n >= 0 and c >= 1):
            raise InputError(where, "decode: expected {count: N >= 0, context: C >= 1}")
        return (c,) * n
    if isinstance(value, list) and all(isinstance(c, int) and c >= 1 for c in value):
        return tuple(value)
    raise InputError(where, "decode: expected a list of context lengths or {count, context}")


def probe_from(p: Mapping, defaults: Mapping, where: str) -> ChunkContext:
    p = {**defaults, **p}
    try:
        ctx = ChunkContext(gap_budget_s=float(p["budget_s"]),
                           cost=cost_from(p.get("cost"), f"{where}.cost"),
                           decode_contexts=_decode(p.get("decode"), where),
                           prefill_done=int(p["done"]), prefill_remaining=int(p["remaining"]),
                           page_tokens=int(p["page_tokens"]),
                           min_chunk_tokens=int(p["min_chunk_tokens"]))
    except SpecError as e:
        raise InputError(where, str(e)) from None
    except (KeyError, TypeError, ValueError) as e:
        raise InputError(where, f"bad chunk probe ({e})") from None
    if min(ctx.prefill_remaining, ctx.page_tokens) < 1 or min(ctx.prefill_done, ctx.min_chunk_tokens) < 0:
        raise InputError(where, "needs remaining >= 1, done >= 0, page_tokens >= 1, "
                                "min_chunk_tokens >= 0")
    return ctx


def public_probes(course) -> list[Case]:
    path = course.assignment("lesson3") / "public" / "probes.yaml"
    try:
        data = yaml.safe_load(Path(path).read_text(encoding="utf-8")) or {}
    except (OSError, yaml.YAMLError) as e:
        raise InputError(str(path), f"cannot read the public probes: {e}") from None
    defaults = data.get("defaults") or {}
    cases = []
    for i, p in enumerate(data.get("probes") or []):
        name = str(p.get("name", i))
        ctx = probe_from({k: v for k, v in p.items() if k not in ("name", "note")}, defaults,
                         f"{path}: probes.{name}")
        note = f" ({p['note']})" if p.get("note") else ""
        cases.append(Case("probe", name, "public", ctx, f"probe {name}{note}"))
    return cases


def public_cases(course) -> list[Case]:
    return public_probes(course) + public_scenarios(course, "lesson3")


# ---- hidden cases ---------------------------------------------------------------------------
def _log_int(g: np.random.Generator, lo: int, hi: int) -> int:
    return int(round(float(np.exp(g.uniform(np.log(lo), np.log(hi))))))


def _remaining(g: np.random.Generator, hi: int) -> int:
    """Prompt left to prefill: mostly long enough for the budget to decide, sometimes a tail."""
    return _log_int(g, 1, 256) if g.random() < 0.2 else _log_int(g, 256, hi)


def _shape(g: np.random.Generator) -> tuple[int, int]:
    """page_tokens and a min_chunk_tokens that is a whole number of pages (0 now and then)."""
    pt = int(g.choice([1, 8, 16, 16, 16, 32, 64, 128]))
    pages = int(g.choice([0, 1, 2, 4, 4, 8, 16])) if pt > 1 else int(g.choice([0, 1, 16, 64, 256]))
    return pt, pt * pages


def _batch(g: np.random.Generator, n_lo: int, n_hi: int, c_lo: int, c_hi: int) -> tuple[int, ...]:
    n = int(g.integers(n_lo, n_hi + 1))
    return tuple(int(c) for c in g.integers(c_lo, c_hi + 1, size=n))


def _other_cost(g: np.random.Generator) -> CostModel:
    pick = lambda lo, hi: float(np.exp(g.uniform(np.log(lo), np.log(hi))))
    cost = CostModel(step_fixed=pick(5e-4, 0.03), per_token=pick(5e-6, 2e-4),
                     per_context_token=pick(1e-8, 1e-6), per_attention_pair=pick(1e-11, 2e-8))
    zero = int(g.integers(0, 6))   # now and then a term the defaults never leave out
    if zero == 0:
        cost = CostModel(cost.step_fixed, cost.per_token, cost.per_context_token, 0.0)
    elif zero == 1:
        cost = CostModel(cost.step_fixed, cost.per_token, 0.0, cost.per_attention_pair)
    return cost


def _budget_for_chunk(ctx: ChunkContext, g: np.random.Generator) -> float:
    """A budget that lets a chunk of about t tokens through: mostly t inside the prompt (the
    budget decides the chunk), sometimes past it (the prompt finishes), sometimes below
    min_chunk_tokens (starved)."""
    remaining, u = ctx.prefill_remaining, g.random()
    if u < 0.2:
        t = remaining + _log_int(g, 1, 4 * remaining)
    elif u < 0.35:
        t = _log_int(g, 1, max(2, ctx.min_chunk_tokens + ctx.page_tokens))
    else:
        t = _log_int(g, max(1, min(remaining, ctx.min_chunk_tokens)), max(1, remaining))
    return step_s(ctx, t) * float(g.uniform(1.0, 1.0 + 1.0 / max(t, 1)))


def _draw(g: np.random.Generator, family: str) -> ChunkContext:
    pt, min_chunk = _shape(g)
    cost = CostModel()
    decode = _batch(g, 0, 64, 16, 8192)
    done = int(g.integers(0, 1025))
    remaining = _remaining(g, 20000)
    budget_kind = "chunk"
    if family == "long-prefix":
        done = int(g.integers(16384, 126977))
        remaining = _remaining(g, 12000)
    elif family == "empty-batch":
        decode, done = (), int(g.integers(0, 40000))
    elif family == "full-batch":
        decode = _batch(g, 128, 256, 512, 16384)
        done = int(g.choice([0, int(g.integers(0, 40000))]))
    elif family == "near-decode-only":
        decode = _batch(g, 0, 256, 16, 16384)
        done = int(g.integers(0, 60000))
        budget_kind = "decode-only"
    elif family == "page-edge":
        done = int(g.integers(0, 60000))
        budget_kind = "page-edge"
    elif family == "other-coefficients":
        cost = _other_cost(g)
        decode = _batch(g, 0, 200, 16, 16384)
        done = int(g.choice([0, int(g.integers(0, 100000))]))
    ctx = ChunkContext(0.0, cost, decode, done, max(1, remaining), pt, min_chunk)
    if budget_kind == "decode-only":
        factor = float(g.choice([0.97, 1 - 1e-6, 1 + 1e-6, 1 + 1e-4, 1 + 1e-3, 1.01, 1.03]))
        budget = step_s(ctx, 0) * factor
    elif budget_kind == "page-edge":
        pages = int(g.integers(1, 65))
        if g.random() < 0.4 and min_chunk > 0:
            pages = max(1, min_chunk // pt + int(g.choice([-1, 0, 0, 1])))   # largest vs min_chunk
        # Mostly a prompt longer than the edge, so the edge decides; now and then the tail.
        longer = max(ctx.prefill_remaining, pages * pt + int(g.integers(1, 3 * pt + 1)))
        if g.random() < 0.85:
            ctx = replace(ctx, prefill_remaining=longer)
        budget = step_s(ctx, pages * pt) * float(g.choice([1 - 1e-6, 1 + 1e-6]))
    else:
        budget = _budget_for_chunk(ctx, g)
    return _clear_of_edges(replace(ctx, gap_budget_s=budget))


def _clear_of_edges(ctx: ChunkContext) -> ChunkContext:
    """Move the budget off any deciding step time, so float rounding never decides a grade."""
    for _ in range(8):
        close = knife_edges(ctx)
        if not close:
            return ctx
        t = close[0]
        away = 1 + 10 * EDGE if ctx.gap_budget_s >= t else 1 - 10 * EDGE
        ctx = replace(ctx, gap_budget_s=t * away)
    raise AssertionError(f"could not move the budget off the knife edge: {ctx}")


PROBE_FAMILIES = {          # family -> hidden probes per secret
    "short-prefix": 30, "long-prefix": 30, "empty-batch": 25, "full-batch": 25,
    "near-decode-only": 35, "page-edge": 35, "other-coefficients": 40,
}


def hidden_probes(secret: bytes) -> list[Case]:
    cases = []
    for family, count in PROBE_FAMILIES.items():
        g = np.random.Generator(np.random.PCG64(derive_seed(secret, "lesson3", "probes", family)))
        for i in range(count):
            ctx = _draw(g, family)
            cases.append(Case("probe", f"{family}#{i}", "hidden", ctx,
                              f"hidden {family} probe {show(ctx)}"))
    return cases


def hidden_cases(secret: bytes, course=None) -> list[Case]:
    return hidden_probes(secret) + hidden_scenarios(course, "lesson3", secret)


def show(ctx: ChunkContext) -> str:
    batch = ctx.decode_contexts
    decode = f"{len(batch)} decoding (context sum {sum(batch)})" if batch else "no decoding requests"
    cost = "" if ctx.cost == CostModel() else (
        f", cost (step_fixed {ctx.cost.step_fixed:.6g}, per_token {ctx.cost.per_token:.6g}, "
        f"per_context_token {ctx.cost.per_context_token:.6g}, per_attention_pair "
        f"{ctx.cost.per_attention_pair:.6g})")
    return (f"(budget {ctx.gap_budget_s:.9g} s, {decode}, done {ctx.prefill_done}, remaining "
            f"{ctx.prefill_remaining}, page_tokens {ctx.page_tokens}, min_chunk_tokens "
            f"{ctx.min_chunk_tokens}{cost})")


# ---- probe checks ---------------------------------------------------------------------------
def _plans(ctx: CheckContext) -> list[Answer]:
    """choose_chunk is asked once per probe; the four probe criteria read the same answers."""
    cases = ctx.family("probe")
    key = ("plans", tuple(c.name for c in cases))
    if key not in ctx.memo:
        ctx.memo[key] = ask(ctx, "choose_chunk", cases, lambda c: (c.inputs,), ChunkPlan)
    return ctx.memo[key]


def _ms(seconds: float) -> str:
    return f"{seconds * 1000:.6g} ms"


@check("lesson3.within_budget")
def within_budget(ctx: CheckContext, params: dict) -> Measure:
    def judge(case: Case, plan: ChunkPlan) -> str:
        c = case.inputs
        if plan.verdict != "ok" or plan.tokens == 0 or plan.tokens > c.prefill_remaining or fits(c, plan.tokens):
            return ""
        e = expected(c)
        best = ("no chunk fits: the decode-only step alone takes " + _ms(e.decode_only_s)
                if e.verdict == "infeasible" else f"the largest chunk that fits is {e.largest} tokens")
        return (f"ok chunk of {plan.tokens} tokens makes the step {_ms(step_s(c, plan.tokens))}, over "
                f"the budget {_ms(c.gap_budget_s)} ({best})")
    return grade_answers(_plans(ctx), judge, "probes")


@check("lesson3.progress")
def progress(ctx: CheckContext, params: dict) -> Measure:
    share = float(params.get("share", PROGRESS_SHARE))
    ok = [a for a in _plans(ctx) if expected(a.case.inputs).verdict == "ok"]

    def judge(case: Case, plan: ChunkPlan):
        c, e = case.inputs, expected(case.inputs)
        need = share * e.largest
        if plan.tokens >= need:
            return ""
        return (plan.tokens / need,
                f"chunk of {plan.tokens} tokens ({plan.verdict}) is below {share:.0%} of the largest "
                f"chunk that fits, {e.largest} tokens (its step takes {_ms(step_s(c, e.largest))} "
                f"of the {_ms(c.gap_budget_s)} budget)")
    return grade_answers(ok, judge, "probes where a chunk fits")


@check("lesson3.page_aligned")
def page_aligned(ctx: CheckContext, params: dict) -> Measure:
    def judge(case: Case, plan: ChunkPlan) -> str:
        c = case.inputs
        if plan.tokens > c.prefill_remaining:
            return f"chunk of {plan.tokens} tokens is more than the {c.prefill_remaining} left to prefill"
        if plan.verdict != "ok" or plan.tokens in (0, c.prefill_remaining) or plan.tokens % c.page_tokens == 0:
            return ""
        return (f"chunk of {plan.tokens} tokens is not a multiple of page_tokens {c.page_tokens} and "
                f"does not finish the prompt ({c.prefill_remaining} left); round down to "
                f"{plan.tokens - plan.tokens % c.page_tokens}")
    return grade_answers(_plans(ctx), judge, "probes")


_WHY = {
    "infeasible": "the decode-only step takes {d} > budget {b}: no chunk can help",
    "starved": "the largest chunk that fits is {n} tokens, below min_chunk_tokens {m}, and does not "
               "finish the prompt",
    "starved0": "not even one page ({p} tokens) fits next to the batch, nor the whole {r}-token rest",
    "ok": "a chunk of {n} tokens fits ({s} <= budget {b})",
}


@check("lesson3.verdicts")
def verdicts(ctx: CheckContext, params: dict) -> Measure:
    def judge(case: Case, plan: ChunkPlan) -> str:
        c, e = case.inputs, expected(case.inputs)
        if plan.verdict == e.verdict:
            return ""
        reason = "starved0" if e.verdict == "starved" and e.largest == 0 else e.verdict
        why = _WHY[reason].format(d=_ms(e.decode_only_s), b=_ms(c.gap_budget_s), n=e.largest,
                                  m=c.min_chunk_tokens, s=_ms(step_s(c, e.largest)), p=c.page_tokens,
                                  r=c.prefill_remaining)
        return f"said {plan.verdict!r}, expected {e.verdict!r}: {why}"
    return grade_answers(_plans(ctx), judge, "probes")


# ---- end to end -----------------------------------------------------------------------------
@dataclass(frozen=True)
class RunPair:
    """One scenario run with the learner's rule (None when a call failed) and the oracle rule."""
    learner: Run | None
    oracle: Run
    budget_s: float
    failure: str           # why the learner's run stopped ("" when it ran to the end)


class _Stopped(Exception):
    """A call of the learner's rule failed: the run is decided, so it stops there."""


def _pair(ctx: CheckContext, case: Case) -> RunPair:
    key = ("run", case.name)
    if key not in ctx.memo:
        s = case.inputs
        base = reference_policy(s.sheet)
        log = CallLog()
        remote = learner_policy(ctx.sandbox, base, ("choose_chunk",), log).choose_chunk

        def choose_chunk(c: ChunkContext) -> ChunkPlan:
            try:
                return remote(c)
            except PolicyError:
                raise _Stopped from None
        oracle = remember("lesson3-oracle", case.digest, lambda: s.run(base),
                          persist=case.visibility == "public")
        # A rule that needs many times the oracle's steps has already lost on TTFT; stopping
        # it there keeps a one-page-per-step rule from taking minutes.
        cap = STEP_CAP * len(oracle.steps) + 500
        try:
            learner = s.run(base.with_(choose_chunk=choose_chunk), max_steps=cap)
        except _Stopped:
            first = log.first["choose_chunk"]
            why = first if "not implemented" in first else (
                f"choose_chunk failed during the run, so the worker could not use your rule ({first})")
            ctx.memo[key] = RunPair(None, oracle, base.gap_budget_s, why)
        else:
            ctx.memo[key] = RunPair(learner, oracle, base.gap_budget_s, "")
    return ctx.memo[key]


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
            f"prefilled, with {int(steps.batch[i])} decoding, took {_ms(float(steps.duration_s[i]))}")


@check("lesson3.e2e_gap")
def e2e_gap(ctx: CheckContext, params: dict) -> Measure:
    q = float(params.get("percentile", 99))

    def judge(case: Case, pair: RunPair) -> str:
        gaps = token_gaps(pair.learner)
        if gaps.size == 0:
            return "no request emitted two tokens, so there is no token gap to measure"
        p = float(np.percentile(gaps, q))
        if p <= pair.budget_s * (1 + GAP_SLACK):
            return ""
        late = int(np.count_nonzero(gaps > pair.budget_s * (1 + GAP_SLACK)))
        return (f"p{q:g} token gap {_ms(p)} > budget {_ms(pair.budget_s)} ({late} of {gaps.size} "
                f"gaps over budget){worst_step(pair.learner)}")
    return grade_answers(_scenario_answers(ctx), judge, "scenarios")


def mean_ttft(run: Run) -> tuple[float, int]:
    """Mean TTFT over the requests that got a first token, and how many did."""
    t = ttfts(run)
    return (float(t.mean()) if t.size else float("inf")), int(t.size)


def _mean_chunk(run: Run) -> float:
    chunks = run.steps.chunk_tokens[run.steps.chunk_tokens > 0]
    return float(chunks.mean()) if chunks.size else 0.0


@check("lesson3.e2e_ttft")
def e2e_ttft(ctx: CheckContext, params: dict) -> Measure:
    tolerance = float(params.get("tolerance", 0.10))

    def judge(case: Case, pair: RunPair) -> str:
        mine, n_mine = mean_ttft(pair.learner)
        best, n_best = mean_ttft(pair.oracle)
        if pair.learner.aborted:
            return (f"TTFT far above the oracle rule's: your rule needed more than {STEP_CAP}x its "
                    f"{len(pair.oracle.steps)} steps, so the run was stopped with {n_best - n_mine} "
                    f"requests still waiting for a first token; your chunks averaged "
                    f"{_mean_chunk(pair.learner):.0f} tokens, the oracle rule's {_mean_chunk(pair.oracle):.0f}")
        if n_mine < n_best:
            return f"{n_best - n_mine} requests never got a first token"
        if mine <= best * (1 + tolerance):
            return ""
        return (f"mean TTFT {mine:.4g} s is {mine / best - 1:.0%} above the oracle rule's {best:.4g} s "
                f"(allowed {tolerance:.0%}); your chunks averaged {_mean_chunk(pair.learner):.0f} tokens, "
                f"the oracle rule's {_mean_chunk(pair.oracle):.0f}")
    return grade_answers(_scenario_answers(ctx), judge, "scenarios")
