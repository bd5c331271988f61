"""Lesson 3, the chunk rule: probes against a search oracle, then the rule end to end.

Cases: ``probe`` (one ChunkContext) and ``scenario`` (a workload the worker runs with the
learner's choose_chunk). Public probes come from assignments/lesson3/public/probes.yaml,
public scenarios from the other files there; hidden probes are drawn from the instructor
secret per family (short and very long prefixes, empty and full decode batches, budgets
next to the decode-only step or a page boundary, coefficients other than the defaults, the
last whole page before a rest of the prompt that is no whole number of pages, pages that
are no power of two, a largest chunk of thousands of tokens), hidden
scenarios from grader/instructor/families/lesson3.yaml.

The oracle (chunk_oracle) finds the largest fitting chunk by binary search over page
multiples with the true cost model, never by the reference's formula, so another correct
rule is judged by what it does, not by how it computes it.

This module builds the cases; chunk_probes (one decision per probe) and chunk_runs (the
rule end to end) judge them, and importing this module registers their checks.
"""
from __future__ import annotations

from dataclasses import replace
from typing import Any, Mapping

import numpy as np

from grader.engine.cases import Case
from grader.engine.layout import read_sections
from reference.yaml_words import reading_problem
from grader.engine.errors import InputError
# Importing the judges registers their checks.
from grader.lessons import chunk_probes, chunk_runs  # noqa: F401
from grader.lessons.chunk_probes import LARGE_CHUNK
from grader.lessons.chunk_oracle import EDGE, step_s
from grader.course.scenario import hidden_scenarios, public_scenarios
from grader.engine.secret import derive_seed
from reference.shapes import ChunkContext, CostModel
from reference.specs import SpecError, cost_from


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
        raise InputError(where, f"bad chunk probe: {reading_problem(e)}") from None
    if min(ctx.prefill_remaining, ctx.page_tokens) < 1 or min(ctx.prefill_done, ctx.min_chunk_tokens) < 0:
        raise InputError(where, "needs remaining >= 1, done >= 0, page_tokens >= 1, "
                                "min_chunk_tokens >= 0")
    return ctx


def public_probes(course) -> list[Case]:
    path = course.assignment("lesson3") / "public" / "probes.yaml"
    data = read_sections(path, {"defaults": "mapping", "probes": "records"})
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


# Page sizes that are no power of two. A page is any whole number of tokens, and a rounding
# that masks bits (tokens & -page_tokens) is right only on powers of two: drawn from those
# alone, the probes paid such a rule in full.
ODD_PAGES = (3, 12, 24, 48, 100)


def _shape(g: np.random.Generator) -> tuple[int, int]:
    """page_tokens and a min_chunk_tokens that is a whole number of pages (0 now and then)."""
    pt = int(g.choice([1, 8, 16, 16, 16, 32, 64, 128]))
    if g.random() < 0.25:
        pt = int(g.choice(ODD_PAGES))
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


def _draw(g: np.random.Generator, family: str, i: int = 0) -> ChunkContext:
    pt, min_chunk = _shape(g)
    cost = CostModel()
    decode = _batch(g, 0, 64, 16, 8192)
    done = int(g.integers(0, 1025))
    remaining = _remaining(g, 20000)
    budget_kind, target = "chunk", 0
    if family == "long-prefix":
        done = int(g.integers(16384, 126977))
        remaining = _remaining(g, 12000)
    elif family == "empty-batch":
        decode, done = (), int(g.integers(0, 40000))
        if i % 5 == 4:      # step_fixed alone decides: infeasible below it, a trickle above
            budget_kind = "step-fixed"
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
    elif family == "last-page":
        pt, pages = int(g.choice([8, 16, 16, 32, 64, 128])), int(g.integers(2, 9))
        # A small min_chunk_tokens: the worker's floor chunk for a starved plan stays one
        # page, far below the largest, so a rule that chooses no chunk is not paid here.
        min_chunk = pt * int(g.integers(0, 2))
        remaining = pages * pt + int(g.integers(1, pt))     # no whole number of pages
        done = int(g.integers(0, 60000))
        budget_kind = "last-page"
    elif family == "large-chunk":
        # Thousands of tokens fit beside a small batch, and the prompt is longer still: a
        # search bounded above (so many pages, so many tokens) is right on every smaller chunk.
        decode = _batch(g, 0, 32, 16, 8192)
        done = int(g.integers(0, 30000))
        min_chunk = pt * int(g.choice([0, 1, 2, 4]))     # the worker's floor stays far below
        # Up to 65,536 tokens: a search capped at 16,384 ("four times the large chunk")
        # was right on every probe when the targets stopped there.
        target = _log_int(g, LARGE_CHUNK + LARGE_CHUNK // 8, 16 * LARGE_CHUNK)
        remaining = target + pt + _log_int(g, 1, 8000)
        budget_kind = "large"
    ctx = ChunkContext(0.0, cost, decode, done, max(1, remaining), pt, min_chunk)
    if budget_kind == "step-fixed":
        sides = [0.97, 1 - 1e-6] if i % 10 == 4 else [1 + 1e-6, 1 + 1e-4, 1.01]
        budget = step_s(ctx, 0) * float(g.choice(sides))
    elif budget_kind == "decode-only":
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
    elif budget_kind == "last-page":
        # The largest chunk is the last whole page before the rest of the prompt, which does
        # not fit: a search that stops a page short of the rest never tries it.
        budget = _budget_between(ctx, g, (ctx.prefill_remaining - 1) // pt * pt, ctx.prefill_remaining)
    elif budget_kind == "large":
        # The largest chunk is the last page of the target; the page after it does not fit.
        largest = target // pt * pt
        budget = _budget_between(ctx, g, largest, largest + pt)
    else:
        budget = _budget_for_chunk(ctx, g)
    return _clear_of_edges(replace(ctx, gap_budget_s=budget))


def _budget_between(ctx: ChunkContext, g: np.random.Generator, fits: int, misses: int) -> float:
    """A budget that a chunk of ``fits`` tokens meets and one of ``misses`` does not."""
    low, high = step_s(ctx, fits), step_s(ctx, misses)
    return low + (high - low) * float(g.uniform(0.1, 0.9))


def _clear_of_edges(ctx: ChunkContext) -> ChunkContext:
    """Move the budget off any deciding step time, so float rounding never decides a grade."""
    from grader.lessons.oracles.chunk_search import knife_edges   # drawing hidden probes: the course
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
    "near-decode-only": 35, "page-edge": 35, "other-coefficients": 40, "last-page": 20,
    "large-chunk": 20,
}


def hidden_probes(secret: bytes) -> list[Case]:
    cases = []
    for family, count in PROBE_FAMILIES.items():
        g = np.random.Generator(np.random.PCG64(derive_seed(secret, "lesson3", "probes", family)))
        for i in range(count):
            ctx = _draw(g, family, i)
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
