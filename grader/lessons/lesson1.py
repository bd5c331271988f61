"""Lesson 1, the request contract: probes of sizes and verdicts against the oracle.

Cases: ``models`` (kv bytes), ``shapes`` (a model on a worker: pool pages), ``tokens``
(pages_for), ``contract`` (a request on a model and a worker). Public cases come from
assignments/lesson1/public.yaml; hidden ones are drawn from the instructor secret near
every boundary the lesson names (page multiples, max_context, the pool, the deadlines).
"""
from __future__ import annotations


import numpy as np

from grader.engine.cases import Case
from grader.engine.checks import CheckContext, Measure, ask, check, grade_answers
from grader.engine.layout import read_sections
from reference.yaml_words import reading_problem
from grader.engine.errors import InputError
from grader.engine.oracle import reference_oracle
from grader.engine.secret import derive_seed
from reference.shapes import CostModel, ModelSpec, RequestView, Slo, Verdict, WorkerSpec
from reference.specs import SpecError, model_from, worker_from

GiB = 1 << 30
# The reference solution, or in the learner edition its recorded answers to the public cases.
oracle = reference_oracle("lesson1")


# ---- public cases ---------------------------------------------------------------------
def public_cases(course) -> list[Case]:
    path = course.assignment("lesson1") / "public.yaml"
    data = read_sections(path, {"models": "records", "workers": "records", "token_probes": "list",
                                "requests": "records"})
    try:
        models = {m["name"]: model_from(m, f"{path}: models.{m.get('name', i)}")
                  for i, m in enumerate(data.get("models", []))}
        workers = {w["name"]: worker_from(w, f"{path}: workers.{w.get('name', i)}")
                   for i, w in enumerate(data.get("workers", []))}
    except SpecError as e:                   # it names the file and the field already
        raise InputError(str(path), str(e).removeprefix(f"{path}: ")) from None
    except (KeyError, TypeError) as e:
        raise InputError(str(path), f"cannot read the public probes: {reading_problem(e)}") from None
    cases = [Case("models", f"model {name}", "public", m, f"model {name}")
             for name, m in models.items()]
    cases += [Case("shapes", f"{mn} on {wn}", "public", (m, w), f"model {mn} on worker {wn}")
              for mn, m in models.items() for wn, w in workers.items()]
    cases += [Case("tokens", f"pages_for{tuple(p)}", "public", tuple(p), f"pages_for{tuple(p)}")
              for p in data.get("token_probes", [])]
    for i, r in enumerate(data.get("requests", [])):
        where = f"{path}: requests.{r.get('id', i)}"
        try:
            req = RequestView(id=str(r["id"]), scope="public", prompt_tokens=int(r["prompt_tokens"]),
                              max_new_tokens=int(r["max_new_tokens"]),
                              slo=Slo(float(r["ttft_s"]), float(r["gap_s"])))
            inputs = (req, models[r["model"]], workers[r["worker"]])
        except (KeyError, TypeError, ValueError) as e:
            raise InputError(where, f"bad contract probe: {reading_problem(e)}") from None
        cases.append(Case("contract", f"request {req.id}", "public", inputs,
                          f"request {req.id} ({r.get('note', '')})".replace(" ()", "")))
    return cases


# ---- hidden cases ---------------------------------------------------------------------
def _model(g: np.random.Generator, i: int) -> ModelSpec:
    mha = g.random() < 0.35
    heads = int(g.choice([12, 16, 20, 25, 32, 40, 52])) if mha else int(g.choice([1, 2, 4, 8, 16]))
    return ModelSpec(name=f"{'mha' if mha else 'gqa'}-{i}", layers=int(g.integers(1, 129)),
                     kv_heads=heads, head_dim=int(g.choice([40, 64, 80, 96, 112, 128, 256])),
                     dtype_bytes=int(g.choice([1, 2, 4])), max_context=int(g.integers(512, 262145)),
                     weight_bytes=int(g.integers(1, 200)) * GiB + int(g.integers(0, GiB)))


def _worker(g: np.random.Generator, model: ModelSpec, pool: str = "") -> WorkerSpec:
    """A worker for ``model``; ``pool`` "under a page" or "negative" leaves it no pool,
    "roomy" gives it a pool past the model's whole window, "tight" one whole page short of
    it or more."""
    page_tokens = int(g.choice([1, 8, 16, 32, 64, 128]))
    page = oracle.kv_bytes_per_token(model) * page_tokens
    # Device sizes land anywhere: whole GiB, odd bytes, and a few bytes either side of a page.
    if pool in ("under a page", "negative"):
        pages = 0 if pool == "under a page" else int(g.integers(-3, 0))
    elif pool == "tight":
        # The pool, and one token past it, inside the window: a request on the pool's
        # limit breaks or meets the pool rule alone (at least two pages: room for a
        # prompt and an output).
        pages = int(g.integers(2, model.max_context // page_tokens))
    else:
        pages = int(g.integers(-2, 4000))
        if pool == "roomy":
            # A request one token past max_context then fits the pool, so the window alone
            # refuses it: on a small pool it breaks over_pool too, and a rule that never
            # counted the output budget against the window was right on it by over_pool.
            pages = abs(pages) + oracle.pages_for(model.max_context + 1, page_tokens)
    free = pages * page + int(g.choice([0, 1, page - 1, int(g.integers(0, page))]))
    reserved = int(g.integers(0, 8)) * GiB + int(g.integers(0, 1 << 20))
    cost = CostModel(step_fixed=float(g.uniform(0.001, 0.02)), per_token=float(g.uniform(5e-6, 1e-4)),
                     per_context_token=float(g.uniform(1e-8, 5e-7)),
                     per_attention_pair=float(g.uniform(1e-10, 1e-8)))
    return WorkerSpec(device_bytes=max(0, model.weight_bytes + reserved + free),
                      reserved_bytes=reserved, page_tokens=page_tokens,
                      max_running=int(g.integers(1, 257)), cost=cost)


# Limits a few hidden requests sit on under every secret. Drawn, each would be missing from
# a secret now and then, and a rule one off there would lose nothing under it. On each, the
# request breaks or meets that one rule alone: the window's and the deadlines' limits on a
# roomy worker, the pool's on a tight one. _PLACES says which requests. Each limit: the
# kind of request it is (see _request) and what puts it on the limit, where a drawn request
# of that kind draws it: tokens past the window (1), pages past the pool (2), where the
# TTFT deadline falls (3: _request's u; 0.5 is the deadline just over the prefill), the
# decode step the gap is halfway to (4; for the gap short by its output's context, how far
# the gap is from the step at the prompt's context to the one before the slowest), max_new (6).
PLACED = {"one past the window": (1, 1), "exactly the window": (1, 0),
          "one page past the pool": (2, 1), "exactly the pool": (2, 0),
          "a TTFT a pair a token short": (3, 0.3), "a TTFT short by its pairs": (3, 0.1),
          "a TTFT the prefill just keeps": (3, 0.5),
          "a gap only the slowest step keeps": (4, 1), "a gap only the slowest step misses": (4, 0),
          "a gap short by its output's context": (4, 0.75),
          "one token, no gap": (6, 1), "two tokens, no gap": (6, 2),
          "one token, a TTFT a pair a token short": (3, 0.3), "one token, a TTFT the prefill just keeps": (3, 0.5),
          "a short output, a TTFT a pair a token short": (3, 0.3),
          "a short output, a TTFT the prefill just keeps": (3, 0.5),
          "a short output, a gap only the slowest step misses": (4, 0),
          "a short output, a gap only the slowest step keeps": (4, 1)}
# The limits above that a short output sits on: its max_new is drawn from this range (both
# ends in), not from 1..2047, where one of a few thousand draws is that short. A request
# that may emit one token has no gap, but its prefill must still meet its TTFT deadline;
# a rule skipped for short outputs is wrong only on these requests.
SHORT_MAX_NEW = 32
SHORT_OUTPUT = {"one token, a TTFT a pair a token short": (1, 1),
                "one token, a TTFT the prefill just keeps": (1, 1),
                "a short output, a TTFT a pair a token short": (2, SHORT_MAX_NEW),
                "a short output, a TTFT the prefill just keeps": (2, SHORT_MAX_NEW),
                "a short output, a gap only the slowest step misses": (3, SHORT_MAX_NEW),
                "a short output, a gap only the slowest step keeps": (3, SHORT_MAX_NEW)}


def _request(g: np.random.Generator, i: int, model: ModelSpec, worker: WorkerSpec,
             placed: str = "") -> RequestView:
    """A request placed near one of the contract's boundaries (or none), or on the limit
    ``placed`` names (one of PLACED)."""
    pt, pool, cost = worker.page_tokens, oracle.pool_pages(model, worker), worker.cost
    drawn = int(g.integers(0, 8))
    kind, at = PLACED[placed] if placed else (drawn, None)
    p = int(g.integers(1, max(2, min(model.max_context, 20000))))
    m = int(g.integers(1, 2048))
    if kind in (3, 4) and at is not None:      # the deadlines alone decide: inside the window
        p = min(p, model.max_context - 2)
        m = max(2, min(m, model.max_context - p))
    if placed == "a gap short by its output's context":     # an output long enough to read
        p = min(p, model.max_context - 64)
        m = max(64, min(m, model.max_context - p))
    if placed in SHORT_OUTPUT:     # a short output, the window's limit well clear of it
        m = int(g.integers(SHORT_OUTPUT[placed][0], SHORT_OUTPUT[placed][1] + 1))
        p = max(1, min(p, model.max_context - m - 1))
    if kind == 0:
        p, m = (0, m) if g.random() < 0.6 else (p, 0)
    elif kind == 1:      # around max_context
        m = max(1, min(m, model.max_context - 1))
        p = max(1, model.max_context - m + (int(g.integers(-1, 2)) if at is None else at))
    elif kind == 2 and pool > 0:   # around the whole pool
        total = pool * pt + (int(g.choice([-1, 0, 1, pt - 1 if pt > 1 else 0])) if at is None else at)
        m = max(1, min(m, total - 1))
        p = max(1, total - m)
    elif kind == 6:      # one token (no gap to miss) or two (one decode step)
        m = int(g.integers(1, 3)) if at is None else at
        p = min(p, model.max_context - m)
    p, m = max(0, p), max(0, m)
    ttft = cost.step_time((), p, 0) if p else 0.5
    gap = cost.step_time((p + m - 1,)) if m >= 2 else 0.01
    # Deadlines a little either side of what the worker can do, never on the knife edge.
    u = g.random() if kind in (3, 5) and p else 1.0
    if kind == 3 and at is not None:
        u = at
    if u < 0.25:
        # Between the prefill without its attention pairs and the whole prefill: the pairs
        # alone decide it (README calculation 3), half a prefill's pairs from either step.
        ttft = (_without_pairs(cost).step_time((), p, 0) + ttft) / 2
    elif u < 0.45:
        # A quarter of the p pairs of each token with itself under the prefill: one pair a
        # token fewer (p(p-1)/2), or p*p/2, meets it; far from a float rounding either way.
        ttft -= cost.per_attention_pair * p / 4
    elif kind == 3 and at == 0.5:      # "a TTFT the prefill just keeps", with any output
        # As far over the prefill: a prefill timed slow (its prompt read as decode context,
        # a decode step after it, a chunk more) misses it. The met side's TTFT limit: drawn
        # deadlines are 3% over the prefill at the closest, which such a rule mostly keeps.
        ttft += cost.per_attention_pair * p / 4
    else:
        ttft *= float(g.choice([0.97, 1.03, 3.0])) if kind in (3, 5) else 5.0
    if placed == "a gap short by its output's context":
        # Most of the way from the decode step at the prompt's context to the step before the
        # slowest: a gap timed at the prompt, the first decode step or the middle of the output
        # keeps it (README calculation 4); only the output's context puts it out of reach.
        low, high = cost.step_time((p,)), cost.step_time((p + m - 2,))
        gap = low + at * (high - low)
    elif kind in (4, 5) and m >= 2 and (at is not None or g.random() < 0.5):
        # Halfway between the decode steps one token of context apart, on either side of the
        # slowest: only the step at context p + m - 1 decides it (half a per_context_token
        # from either step, far from a float rounding).
        c = p + m - 1 + (int(g.integers(0, 2)) if at is None else at)
        gap = (cost.step_time((c - 1,)) + cost.step_time((c,))) / 2
    elif kind == 6:      # below the step at context p: a gap no decode step can keep
        gap = cost.step_time((p,)) * float(g.choice([0.5, 0.97]))
    else:
        gap *= float(g.choice([0.97, 1.03, 3.0])) if kind in (4, 5) else 5.0
    return RequestView(id=f"h{i}", scope="hidden", prompt_tokens=p, max_new_tokens=m,
                       slo=Slo(ttft_s=max(ttft, 1e-6), gap_s=max(gap, 1e-6)))


def _without_pairs(cost: CostModel) -> CostModel:
    """The cost model with no attention term: a prefill timed by its tokens alone."""
    return CostModel(cost.step_fixed, cost.per_token, cost.per_context_token, 0.0)


# Which requests sit on each limit of PLACED, by (model number % 4, worker): the first of
# their worker's four requests. Worker 0 is roomy, worker 1 of the second model in four tight.
# The short outputs' limits (SHORT_OUTPUT) fill the roomy workers of the third and fourth.
_PLACES = {(0, 0): ("one past the window", "a TTFT a pair a token short", "a TTFT short by its pairs",
                    "a gap only the slowest step misses"),
           (1, 0): ("exactly the window", "one token, no gap", "two tokens, no gap",
                    "a gap only the slowest step keeps"),
           (1, 1): ("exactly the pool", "one page past the pool"),
           (2, 0): ("a TTFT the prefill just keeps", "a gap short by its output's context",
                    "one token, a TTFT a pair a token short", "one token, a TTFT the prefill just keeps"),
           (3, 0): ("a short output, a TTFT a pair a token short", "a short output, a TTFT the prefill just keeps",
                    "a short output, a gap only the slowest step misses",
                    "a short output, a gap only the slowest step keeps")}


def hidden_cases(secret: bytes, course=None) -> list[Case]:
    g = np.random.Generator(np.random.PCG64(derive_seed(secret, "lesson1", "hidden")))
    cases: list[Case] = []
    models = [_model(g, i) for i in range(16)]
    for i, m in enumerate(models):
        cases.append(Case("models", f"models#{i}", "hidden", m, f"hidden model {_show_model(m)}"))
        for j in range(2):
            # A model's first worker is roomy; its second has no pool (under a page, or less
            # than nothing) on the fourth model of every four, a tight one on the second.
            pool = ("roomy" if j == 0 else ("under a page", "negative")[i // 4 % 2] if i % 4 == 3
                    else "tight" if i % 4 == 1 else "")
            w = _worker(g, m, pool)
            cases.append(Case("shapes", f"shapes#{i}.{j}", "hidden", (m, w),
                              f"hidden model {_show_model(m)} on worker {_show_worker(w)}"))
            limits = _PLACES.get((i % 4, j), ())
            for k in range(4):
                placed = limits[k] if k < len(limits) else ""
                r = _request(g, len(cases), m, w, placed)
                cases.append(Case("contract", f"contract#{i}.{j}.{k}", "hidden", (r, m, w),
                                  f"hidden request {_show_request(r)} on {_show_model(m)}, "
                                  f"{_show_worker(w)}"))
    for i in range(40):
        pt = int(g.choice([1, 2, 16, 32, 128, 1000]))
        t = int(g.choice([0, pt, pt * int(g.integers(1, 10**6)), pt * int(g.integers(1, 10**6)) + 1,
                          int(g.integers(0, 10**6)), 2**53 + 1, 10**18 + int(g.integers(0, 10**6))]))
        cases.append(Case("tokens", f"tokens#{i}", "hidden", (t, pt), f"pages_for({t}, {pt})"))
    return cases


def _show_model(m: ModelSpec) -> str:
    return (f"(layers {m.layers}, kv_heads {m.kv_heads}, head_dim {m.head_dim}, dtype_bytes "
            f"{m.dtype_bytes}, max_context {m.max_context}, weight_bytes {m.weight_bytes})")


def _show_worker(w: WorkerSpec) -> str:
    return (f"(device_bytes {w.device_bytes}, reserved_bytes {w.reserved_bytes}, page_tokens "
            f"{w.page_tokens})")


def _show_request(r: RequestView) -> str:
    return (f"(prompt {r.prompt_tokens}, max_new {r.max_new_tokens}, ttft {r.slo.ttft_s:.6g} s, "
            f"gap {r.slo.gap_s:.6g} s)")


# ---- checks ---------------------------------------------------------------------------
def _exact(expected):
    def judge(case: Case, got) -> str:
        want = expected(case)
        return "" if got == want else f"returned {got}, expected {want}"
    return judge


@check("lesson1.kv_bytes")
def kv_bytes(ctx: CheckContext, params: dict) -> Measure:
    cases = ctx.family("models")
    answers = ask(ctx, "kv_bytes_per_token", cases, lambda c: (c.inputs,), int)
    return grade_answers(answers, _exact(lambda c: oracle.kv_bytes_per_token(c.inputs)), "models")


@check("lesson1.pool_pages")
def pool_pages(ctx: CheckContext, params: dict) -> Measure:
    cases = ctx.family("shapes")
    answers = ask(ctx, "pool_pages", cases, lambda c: c.inputs, int)
    # Empty pools are a side of their own, and the lower side counts: a pool that goes
    # negative when the weights and the reservation leave nothing is wrong on a few pairs
    # of forty, and one that rounds a partial page up is right on most empty ones.
    return grade_answers(answers, _exact(lambda c: oracle.pool_pages(*c.inputs)), "model/worker pairs",
                         by=lambda c: oracle.pool_pages(*c.inputs) == 0, worst=True)


@check("lesson1.pages_for")
def pages_for(ctx: CheckContext, params: dict) -> Measure:
    cases = ctx.family("tokens")
    answers = ask(ctx, "pages_for", cases, lambda c: c.inputs, int)
    return grade_answers(answers, _exact(lambda c: oracle.pages_for(*c.inputs)), "token counts")


@check("lesson1.worst_case")
def worst_case(ctx: CheckContext, params: dict) -> Measure:
    cases = ctx.family("contract")
    answers = ask(ctx, "worst_case_pages", cases, lambda c: (c.inputs[0], c.inputs[2]), int)
    return grade_answers(answers, _exact(lambda c: oracle.worst_case_pages(c.inputs[0], c.inputs[2])),
                         "requests")


def _verdicts(ctx: CheckContext):
    """check_contract is asked once per run; both verdict criteria read the same answers."""
    cases = ctx.family("contract")
    key = ("verdicts", tuple(c.name for c in cases))    # by case: the memo serves every case set
    if key not in ctx.memo:
        ctx.memo[key] = ask(ctx, "check_contract", cases, lambda c: c.inputs, Verdict)
    return ctx.memo[key]


def _clause(case: Case) -> str:
    """Within a verdict, what decides a request: each weighs the same in contract-ok.

    A request that breaks the contract is decided by the one rule it breaks, on that rule's
    limit (one past max_context or the pool; a deadline the prefill misses by less than a
    pair a token; two tokens, or a gap only the slowest decode step misses), by the TTFT
    rule's attention pairs alone (a deadline the prefill misses only by them), by the gap
    rule's output alone (a gap a decode step at the prompt's context keeps), or beyond it;
    one of a single output token that breaks the TTFT rule alone is a clause of its own
    (however far its prefill misses): its only token is the prefill's, it has no gap, and a
    rule that skips the timing rules for short outputs is wrong on it alone.
    One that breaks several rules is decided by none of them (ok is right however wrong one
    rule is), and is a clause of its own. One that meets it may sit on a limit too (exactly
    max_context or the pool; a deadline equal to its step time; a TTFT deadline the prefill
    keeps by less than a pair a token; one token and a gap below every decode step; a gap
    only the slowest step keeps). The requests on a limit are a few of their verdict, so
    without a clause of their own a rule one off at that limit would lose almost nothing."""
    r, model, worker = case.inputs
    p, m, gap, step = r.prompt_tokens, r.max_new_tokens, r.slo.gap_s, worker.cost.step_time
    reasons = oracle.contract_reasons(r, model, worker)
    past = {"over_max_context": p + m - model.max_context,     # 0: exactly at it, 1: one past
            "over_pool": oracle.worst_case_pages(r, worker) - oracle.pool_pages(model, worker)}
    if len(reasons) > 1:
        # No one rule decides it: a rule left out, or wrong, is still refused by another.
        return "several rules"
    if reasons:
        (rule,) = reasons
        if rule == "ttft_unreachable" and m == 1:
            return "ttft_unreachable with one output token"
        if rule == "ttft_unreachable":
            # On its limit, a prefill without each token's pair with itself would keep it.
            prefill = step((), p, 0)
            if prefill - worker.cost.per_attention_pair * p <= r.slo.ttft_s:
                return "ttft_unreachable, on its limit"
            if _without_pairs(worker.cost).step_time((), p, 0) <= r.slo.ttft_s:
                return "ttft_unreachable by its attention pairs"
        edge = past.get(rule) == 1 or (rule == "gap_unreachable" and (m == 2 or step((p + m - 2,)) <= gap))
        if edge:
            return f"{rule}, on its limit"
        if rule == "gap_unreachable" and step((p,)) <= gap:
            # A decode step at the prompt's context keeps it: the output's context alone decides.
            return "gap_unreachable by its output's context"
        return rule
    for rule, by in past.items():
        if by == 0:
            return rule
    if step((), p, 0) == r.slo.ttft_s or (m >= 2 and step((p + m - 1,)) == gap):
        return "a deadline met exactly"
    if p and r.slo.ttft_s - step((), p, 0) < worker.cost.per_attention_pair * p:
        return "a TTFT kept by less than a pair a token"
    if m == 1 and step((p,)) > gap:
        return "one token, no gap"
    return "the slowest decode step" if m >= 2 and gap < step((p + m,)) else ""


def _short_output(case: Case, reasons: tuple[str, ...]) -> str:
    """What a request with a short output still owes its deadlines, said where a verdict of
    ok missed a timing rule on one (a rule skipped for short outputs misses it there alone)."""
    m = case.inputs[0].max_new_tokens
    if not 1 <= m <= SHORT_MAX_NEW:
        return ""
    if "ttft_unreachable" in reasons:
        return (f" (max_new {m}: however few tokens a request may emit, its first comes after the "
                "prefill of its whole prompt, and the TTFT rule holds for it"
                + (", though with one token the gap rule does not)" if m == 1 else ")"))
    if "gap_unreachable" in reasons:
        return (f" (max_new {m}: a request that may emit two tokens or more has a gap between "
                "tokens, however short its output, and the gap rule holds for it)")
    return ""


@check("lesson1.contract_ok")
def contract_ok(ctx: CheckContext, params: dict) -> Measure:
    def judge(case: Case, got: Verdict) -> str:
        reasons = oracle.contract_reasons(*case.inputs)
        if got.ok == (not reasons):
            return ""
        if got.ok:
            return f"said ok, but it breaks the contract: {', '.join(reasons)}{_short_output(case, reasons)}"
        return f"said not ok ({got.reason or 'no reason'}), but the request meets the contract"
    # Requests that meet the contract and requests that break it weigh the same: a verdict
    # that is always the same is right on one side only. Within a side, so do its clauses.
    return grade_answers(_verdicts(ctx), judge, "requests",
                         by=lambda c: not oracle.contract_reasons(*c.inputs), within=_clause)


@check("lesson1.contract_reason")
def contract_reason(ctx: CheckContext, params: dict) -> Measure:
    failing = [a for a in _verdicts(ctx) if oracle.contract_reasons(*a.case.inputs)]

    def judge(case: Case, got: Verdict) -> str:
        reasons = oracle.contract_reasons(*case.inputs)
        if not got.ok and got.reason in reasons:
            return ""
        return f"gave reason {got.reason!r} (ok={got.ok}), expected one of {list(reasons)}"
    # Each first broken rule weighs the same, so naming one reason everywhere earns nothing.
    return grade_answers(failing, judge, "failing requests",
                         by=lambda c: oracle.contract_reasons(*c.inputs)[0])
