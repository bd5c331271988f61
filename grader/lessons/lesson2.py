"""Lesson 2, the admission ledger: worker runs on a pool that binds, and admit probes.

Cases:
- ``scenario``: a workload on a small worker whose pages are the binding constraint
  (public: assignments/lesson2/public/*.scenario.yaml; hidden: grader/instructor/families/lesson2.yaml).
  The learner's ``admit`` runs in the sandbox; every other decision is the reference's.
  The oracle is the reference ledger on the same scenario.
- ``probe``: one ``admit(request, ledger)`` call (public: assignments/lesson2/probes.yaml;
  hidden: drawn from the secret at every boundary: roomy, exact fit, one page short, busy,
  impossible, a footprint of exactly the whole pool, a request of a page or two, an exact
  fit on a pool all promised or held but the need, an exact fit beside 65 to 512 requests
  running).

Every other decision of a run is the course baseline's (reference.baselines), so the
runs are the same in the learner edition, where the oracle ledger's figures are recorded.

Every criterion grades a property of the promise, from both kinds of evidence:
- safety: no broken promise, no over-commit in any run, and no admission (in a run or on
  a probe) with a promise short of its new pages; no probe admitted beyond capacity;
- efficiency: requests that met their SLO, as a share of the oracle ledger's, on the runs
  where every request can fit (the never-fit runs are liveness evidence); a run where the
  ledger told no request to wait that fit, and admitted some beyond capacity, is full here
  (its shortfall is safety's);
- liveness: what can never fit is rejected, what fits the pool is never rejected;
- reservations: where capacity covers the need, the probe, and every request the runs
  asked about, is admitted with exactly pages_for(prompt + max_new) - prefix_hit_pages
  (the promise's definition, so any correct ledger gives the same number).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from grader.engine.cases import Case
from grader.engine.checks import (Answer, CheckContext, Measure, ask, check, grade_answers, 
                           not_implemented)
from grader.engine.layout import read_sections
from reference.sizing import pages_for
from reference.yaml_words import reading_problem
from grader.engine.errors import InputError
from grader.lessons.ledger import (available, footprint, inactive, ledger_words, need, promise,
                                   request_words)
from grader.engine.secret import derive_seed
from grader.engine.text import plural
from reference.shapes import DECISIONS, Admission, AdmissionRequest, LedgerView

LESSON = "lesson2"
UNSAFE = ("broken_promise", "over_commit")


# ---- public cases ---------------------------------------------------------------------
_PROBE_FIELDS = {
    "request": ("prompt_tokens", "max_new_tokens", "page_tokens", "prefix_hit_pages",
                "prefix_hit_active"),
    "ledger": ("total_pages", "unallocated_pages", "evictable_pages", "reserved_pages", "running"),
}


def _consistent(r: AdmissionRequest, v: LedgerView) -> str:
    """Why this request and ledger could not come from the worker ("" when they could)."""
    if r.prompt_tokens < 1 or r.max_new_tokens < 1 or r.page_tokens < 1:
        return "prompt_tokens, max_new_tokens and page_tokens must be >= 1"
    if not 0 <= r.prefix_hit_active <= r.prefix_hit_pages <= (r.prompt_tokens - 1) // r.page_tokens:
        return ("prefix hits must be 0 or more, prefix_hit_active at most prefix_hit_pages, and "
                "the hits must leave at least one prompt token to prefill")
    if min(v.unallocated_pages, v.evictable_pages, v.reserved_pages, v.running) < 0:
        return "ledger counts must be >= 0"
    if v.unallocated_pages + v.evictable_pages + r.prefix_hit_active > v.total_pages:
        return "unallocated, evictable and actively hit pages together exceed total_pages"
    if inactive(r) > v.evictable_pages:
        return "inactive hits are evictable pages, so evictable_pages must cover them"
    if v.reserved_pages > v.unallocated_pages + v.evictable_pages:
        return "reserved_pages exceed free capacity (unallocated + evictable)"
    if v.running == 0 and (v.reserved_pages or v.unallocated_pages + v.evictable_pages != v.total_pages):
        # Only running requests hold or are promised pages: a ledger may read running == 0 as
        # an idle pool, on which what does not fit now never will.
        return ("with no request running, no page is held or promised: unallocated + evictable "
                "must be total_pages and reserved_pages 0")
    return ""


def _probe_case(name: str, r: AdmissionRequest, v: LedgerView, visibility: str, label: str) -> Case:
    return Case("probe", name, visibility, (r, v), label)


def _public_probes(course) -> list[Case]:
    path = course.assignment(LESSON) / "probes.yaml"
    data = read_sections(path, {"probes": "records"})
    cases = []
    for i, p in enumerate(data.get("probes") or []):
        where = f"{path}: probes.{p.get('name', i) if isinstance(p, dict) else i}"
        try:
            r = AdmissionRequest(id=str(p["name"]), scope="public",
                                 **{k: int(p["request"][k]) for k in _PROBE_FIELDS["request"]})
            v = LedgerView(**{k: int(p["ledger"][k]) for k in _PROBE_FIELDS["ledger"]})
        except (KeyError, TypeError, ValueError) as e:
            raise InputError(where, f"bad probe: {reading_problem(e)}") from None
        why = _consistent(r, v)
        if why:
            raise InputError(where, why)
        note = p.get("note", "")
        cases.append(_probe_case(f"probe {r.id}", r, v, "public",
                                 f"probe {r.id}" + (f" ({note})" if note else "")))
    return cases


def public_cases(course) -> list[Case]:
    from grader.course.scenario import public_scenarios
    return public_scenarios(course, LESSON) + _public_probes(course)


# ---- hidden cases ---------------------------------------------------------------------
# Which boundary each hidden probe sits on, in a fixed rotation, so every secret covers
# each of them: the capacity the ledger shows is the need, one below, far below, above; a
# footprint of exactly the pool comes both on an idle worker and on a busy one.
_KINDS = ("roomy", "exact", "exact_active", "short", "short_inactive", "short_reserved",
          "busy", "impossible", "impossible_hits", "whole_pool")
# Requests of a page or two, exactly covered or a page short, drawn apart (their own
# stream, after the others). Drawn among the rest, a footprint is a page or two once in
# a thousand probes, and no workload's request is that small: a ledger that admitted every
# request of two pages or less, whatever the capacity, kept 10 of 10.
_SMALL = ("small_exact", "small_short")
# Exact fits on a crowded pool: all of it but the need promised to running requests, or held
# by them, the request an eighth of the pool at most. Drawn among the rest, an exact fit
# has a pool mostly free, so a ledger that held back while three quarters of the pool was
# promised, whatever the need, kept 10 of 10.
_CROWDED = ("crowded_promised", "crowded_held")
# Exact fits beside 65 to 512 running requests. Drawn among the rest, at most 64 run, so a
# ledger with a cap of its own on the requests running (the worker's max_running is the
# worker's to keep: admit is asked only below it) lost a fraction of a point at 64 and
# nothing at 128 or more.
_MANY = ("many_running",)
# Long outputs on pages that are no power of two, exactly covered or a page short. Drawn
# among the rest, max_new is at most 4,096 and a page 1 to 64 tokens, a power of two, and
# no workload asks more than 8,192 tokens: a ledger that reserved for at most 8,192 output
# tokens (a bet on short outputs), or that counted pages with a shift, kept 10 of 10.
_LONG = ("long_exact", "long_short")
LONG_NEW = (16_384, 262_144)            # max_new of a long probe, at least and at most
ODD_PAGES = (3, 12, 20, 24, 48, 100)
# The kinds drawn apart, each from a stream of its own after the others (so adding one
# leaves every other probe as it was drawn), and how many of each stream a secret draws.
_APART = {"small probes": (_SMALL, 6), "crowded probes": (_CROWDED, 4),
          "many running probes": (_MANY, 6), "long output probes": (_LONG, 6)}
# The kinds whose capacity is exactly the need, and those one page short of it.
_EXACT = ("exact", "exact_active", "small_exact", "long_exact", *_CROWDED, *_MANY)
_SHORT = ("short", "short_inactive", "short_reserved", "small_short", "long_short")


def _tokens_for(g: np.random.Generator, pages: int, pt: int, most_new: int) -> tuple[int, int]:
    """A prompt and max_new whose sum needs exactly ``pages`` pages (often a page multiple)."""
    total = max(pages * pt - (0 if g.random() < 0.4 else int(g.integers(0, pt))), 2)
    m = int(g.integers(1, min(total - 1, most_new) + 1))
    p = total - m
    if g.random() < 0.3 and p > pt:                       # a prompt of whole pages
        shift = p % pt
        p, m = p - shift, m + shift
    return p, m


def _sizes(g: np.random.Generator, kind: str) -> tuple[int, int, int, int]:
    """A probe's page, pool and request: (page_tokens, total_pages, prompt, max_new)."""
    if kind in _LONG:
        pt = int(g.choice(ODD_PAGES))
        m = int(np.exp(g.uniform(np.log(LONG_NEW[0]), np.log(LONG_NEW[1]))))
        p = int(g.integers(1, 4097))
        pages = pages_for(p + m, pt)
        return pt, pages + int(g.integers(0, pages + 1)), p, m
    pt = int(g.choice([16, 16, 16, 8, 32, 64, 1]))
    total = int(g.integers(64, 4001))
    if kind in _MANY:
        total = max(total, 1024)             # room for every running request's pages
    if kind == "whole_pool":
        pages = total
    elif kind == "impossible_hits":          # over the pool, yet its new pages are not
        pages = total + int(g.integers(1, 3))
    elif kind == "impossible":
        pages = total + int(g.choice([1, 1, 2, int(g.integers(1, total + 1))]))
    elif kind in _SMALL:
        pages = int(g.integers(1, 3))
    elif kind in _CROWDED or kind in _MANY:
        pages = int(g.integers(2, total // 8 + 1))
    else:
        pages = int(g.integers(2, total + 1))
    return (pt, total, *_tokens_for(g, pages, pt, 2 * pt if kind == "impossible_hits" else 4096))


def _hidden_probe(g: np.random.Generator, i: int, kind: str, part: tuple[int, int] = (0, 1)) -> Case:
    """Probe ``i``, on the boundary ``kind``; ``part``: (k, n), the k-th of a stream's n probes."""
    pt, total, p, m = _sizes(g, kind)
    pages = pages_for(p + m, pt)
    most = min((p - 1) // pt, total // 2)
    if kind == "impossible_hits":
        hits = int(g.integers(min(pages - total, most), most + 1))
    elif kind in ("exact_active", "short_inactive") and most >= 1:
        hits = int(g.integers(1, most + 1))
    else:
        hits = 0 if g.random() < 0.3 or most < 1 else int(g.integers(0, most + 1))
    if kind == "exact_active":
        active = int(g.integers(1, hits + 1)) if hits else 0
    elif kind == "short_inactive":
        active = int(g.integers(0, hits)) if hits else 0
    else:
        active = int(g.choice([0, hits, int(g.integers(0, hits + 1))]))
    r = AdmissionRequest(id=f"h{i}", scope="hidden", prompt_tokens=p, max_new_tokens=m,
                         page_tokens=pt, prefix_hit_pages=hits, prefix_hit_active=active)
    room = total - active                    # the most capacity the ledger can show
    want = need(r)
    if kind == "roomy":
        cap = int(g.integers(want, room + 1))
    elif kind in _EXACT:
        cap = want
    elif kind == "whole_pool":               # it fits the pool: now, or (every other time) later
        cap = want if (i // len(_KINDS)) % 2 == 0 else int(g.integers(0, want))
    elif kind in _SHORT:
        cap = want - 1
    elif kind == "busy":
        cap = int(g.integers(0, want))
    else:
        cap = int(g.integers(0, room + 1))
    lazy = inactive(r)
    low = max(0, lazy - cap, 1 if kind == "short_reserved" else 0)
    reserved = 0 if (low == 0 and g.random() < 0.3) else int(g.integers(low, max(low, room - cap) + 1))
    if kind in _CROWDED:                     # every page but the need promised, or held
        reserved = room - cap if kind == "crowded_promised" else low
    elif kind in _MANY:                      # the pages the free capacity leaves are held
        reserved = low
    evictable = int(g.integers(lazy, cap + reserved + 1))
    running = int(g.integers(1 if active or reserved or cap + reserved < total else 0, 65))
    if kind in _MANY:                        # log-uniform, each holding a page or more
        # Each of a stream's probes draws from its own slice of the range, so every secret
        # has some beside more than 256 and some beside fewer.
        k, n = part
        least, most = np.log(65), np.log(513)
        running = min(int(np.exp(least + (most - least) * (k + g.uniform()) / n)), total - cap - reserved)
    v = LedgerView(total_pages=total, unallocated_pages=cap + reserved - evictable,
                   evictable_pages=evictable, reserved_pages=reserved, running=running)
    label = (f"hidden probe {kind}: {request_words(r)}; ledger: total {total}, "
             f"{ledger_words(v)}")
    return _probe_case(f"probe#{i}", r, v, "hidden", label)


def hidden_probes(secret: bytes, count: int = 60) -> list[Case]:
    g = np.random.Generator(np.random.PCG64(derive_seed(secret, LESSON, "probes")))
    probes = [_hidden_probe(g, i, _KINDS[i % len(_KINDS)]) for i in range(count)]
    for stream, (kinds, n) in _APART.items():
        apart = np.random.Generator(np.random.PCG64(derive_seed(secret, LESSON, stream)))
        probes += [_hidden_probe(apart, len(probes) + k, kinds[k % len(kinds)], (k, n))
                   for k in range(n)]
    return probes


def _never_fit(s) -> bool:
    from grader.lessons.ledger_runs import fit_classes
    return bool(fit_classes(s)[0])


def hidden_cases(secret: bytes, course=None) -> list[Case]:
    from grader.course.scenario import Purpose, purposeful_scenarios
    # The never-fit family is liveness's run evidence: an instance whose draws all fit
    # would test nothing about it.
    purposes = {"never-fit": Purpose("a request that can never fit and reaches admission", _never_fit)}
    return purposeful_scenarios(course, LESSON, secret, purposes) + hidden_probes(secret)


# ---- probe answers (asked once per grading run) -----------------------------------------
def _probe_answers(ctx: CheckContext) -> list[Answer]:
    cases = ctx.family("probe")
    key = ("probes", tuple(c.name for c in cases))
    if key not in ctx.memo:
        ctx.memo[key] = ask(ctx, "admit", cases, lambda c: c.inputs, Admission)
    return ctx.memo[key]


def _asked_again(ctx: CheckContext) -> str:
    """The first probe admit answered otherwise when asked again with the same arguments, in
    words ("" when every answer was the same). The probes are asked a second time, in reverse
    order: a ledger that counts the calls per request (wait once, then admit whatever the
    capacity) answers a probe once as a ledger would, and in a run admits everything a call
    late. The decision and the promise are compared; the reason is free text."""
    # Both readings of a probe are kept by its name for the whole grade: a grade measures the
    # public probes first and every probe next, and the second measure replays the first's
    # public answers in the order they were asked, which a reading per measure would mix up.
    readings = ctx.memo.setdefault("probes read twice", {})
    first = _probe_answers(ctx)
    todo = [a for a in first if a.case.name not in readings]
    if todo:
        again = ask(ctx, "admit", [a.case for a in todo][::-1], lambda c: c.inputs, Admission)[::-1]
        readings.update((a.case.name, (a, b)) for a, b in zip(todo, again))

    def said(a: Answer) -> str:
        if a.value is None:
            return "no decision"
        adm = a.value
        return f"admit with {plural(adm.reserve_pages, 'page')}" if adm.decision == "admit" else adm.decision
    pairs = sorted((readings[a.case.name] for a in first), key=lambda ab: ab[0].case.visibility != "public")
    for a, b in pairs:                  # a public probe first: the learner can ask it again
        if said(a) != said(b):
            return (f"{a.case.label or a.case.name}: {said(a)}, and asked again with the same "
                    f"arguments, {said(b)}")
    return ""


def _not_implemented(ctx: CheckContext) -> Measure | None:
    """The stub, or an admit with no usable answer on any probe (it raises, hangs or returns
    no Admission): no worker run is worth doing, and a criterion that judged its runs anyway
    would describe a ledger that never decided ("admitted every request")."""
    answers = _probe_answers(ctx)
    problem = not_implemented(answers)
    if not problem and answers and all(a.value is None for a in answers):
        problem = f"admit gave no usable answer on any of the {len(answers)} probes; first: {answers[0].problem}"
    return Measure(0.0, problem) if problem else None


# ---- one worker run per scenario (learner) and its oracle --------------------------------
def _runs(ctx: CheckContext) -> list:
    """(case, LearnerRun) for every scenario case, run once per grading run. The learner
    edition has no scenario cases, so it never imports the run machinery."""
    scenarios = ctx.family("scenario")
    if not scenarios:
        return []
    from grader.lessons.ledger_runs import learner_run
    return [(case, learner_run(ctx, case)) for case in scenarios]


def _calls_note(runs: list) -> str:
    if not runs:
        return ""
    from grader.lessons.ledger_runs import calls_note
    return calls_note(runs)


# ---- safety -------------------------------------------------------------------------------
def _unsafe_probe(case: Case, adm: Admission) -> str:
    r, v = case.inputs
    if adm.decision not in DECISIONS:
        return f"decision {adm.decision!r} is not one of {', '.join(DECISIONS)}"
    if adm.decision != "admit":
        return ""
    if adm.reserve_pages < promise(r):
        return (f"admitted with {adm.reserve_pages} reserved pages; it may allocate "
                f"{promise(r)} ({request_words(r)})")
    took = adm.reserve_pages + inactive(r)
    if took > available(v):
        return (f"admitted taking {plural(took, 'page')} of capacity ({adm.reserve_pages} reserved + "
                f"{inactive(r)} inactive hits) with {ledger_words(v)}")
    return ""


@check("lesson2.safety")
def safety(ctx: CheckContext, params: dict) -> Measure:
    stub = _not_implemented(ctx)
    if stub:
        return stub
    runs = _runs(ctx)
    bad_runs = []
    for case, out in runs:
        unsafe = [v for v in out.run.violations if v.kind in UNSAFE]
        if unsafe or out.failures or out.book.under_promised:
            bad_runs.append((case, out, unsafe))
    answers = _probe_answers(ctx)
    probes = grade_answers(answers, _unsafe_probe, "probes")
    wrong_probes = sum(1 for a in answers if a.problem or _unsafe_probe(a.case, a.value))
    admitted = sum(len(o.book.admitted) for _, o in runs) + sum(
        1 for a in answers if a.value is not None and a.value.decision == "admit")
    if not admitted:
        # An answer the worker could not use is no admission: say so, or "admitted nothing"
        # reads as false to a ledger that meant to admit ("accept").
        unusable = [a.problem for a in answers if a.problem]
        why = (f" ({len(unusable)} of the {len(answers)} probes had no usable answer; first: {unusable[0]})"
               if unusable else "")
        return Measure(0.0, "your ledger admitted no request on any workload or probe, so it "
                            "kept no promise: safety is not shown by admitting nothing" + why)
    total = len(runs) + len(answers)
    clean = total - len(bad_runs) - wrong_probes
    evidence = tuple(c.cite for c, _, _ in bad_runs) + probes.evidence
    if not bad_runs and wrong_probes == 0:
        on = f"no broken promise and no over-commit on {len(runs)} workloads; " if runs else ""
        return Measure(1.0, on + probes.feedback)
    parts = []
    if bad_runs:
        from grader.lessons.ledger_runs import explain_under_promise, explain_violation
        case, out, unsafe = bad_runs[0]
        kinds = {k: sum(v.kind == k for v in unsafe) for k in UNSAFE}
        first = (f"first, {explain_violation(unsafe[0], out)}" if unsafe
                 else explain_under_promise(out) if out.book.under_promised
                 else "admit gave no usable decision" + _calls_note([out]))
        parts.append(f"{len(bad_runs)} of {len(runs)} workloads were not safe; "
                     f"{case.where}: {kinds['broken_promise']} broken promises, "
                     f"{kinds['over_commit']} over-commits; {first}")
    if wrong_probes:
        parts.append(probes.feedback)
    return Measure(clean / total, "; ".join(parts), evidence)


# ---- efficiency ---------------------------------------------------------------------------
@check("lesson2.efficiency")
def efficiency(ctx: CheckContext, params: dict) -> Measure:
    stub = _not_implemented(ctx)
    if stub:
        return stub
    changed = _asked_again(ctx)
    if changed:
        # A run shows a ledger only if admit is a function of its two arguments (README):
        # one that said wait once and admitted at the next call, whatever the capacity, told
        # requests to wait in every run and kept efficiency in full beside admitting everything.
        return Measure(0.0, f"admit answered {changed}: admit must be a function of its two "
                            "arguments, and a ledger whose decisions depend on the calls before them "
                            "shows its call history in a run, not its efficiency")
    runs = _runs(ctx)
    from grader.lessons.ledger_runs import good_requests, oracle_run
    # A never-fit workload measures liveness: an impossible request at the head of the
    # queue would make its SLO count a second penalty for the same mistake.
    graded = [(c, out) for c, out in runs if not oracle_run(c).impossible]
    if not graded:
        return Measure(0.0, "no workload where every request fits: nothing to measure")
    rows = []                                   # (share, case, learner good, oracle good, run)
    for case, out in graded:
        ref = oracle_run(case)
        good = good_requests(out.run.requests)
        # Efficiency is the other side of safety: admitting what fits. A ledger that admits
        # everything has it for free, as one that admits nothing has safety, so a run shows
        # it only where the ledger held something back when capacity was short. Judged on
        # each run it is measured on: a wait on a probe says nothing of a run (a ledger can
        # tell a probe from a workload's request, and hold back on the probes alone).
        share = (0.0 if out.book.never_held_back else 1.0 if ref.good == 0 or _only_over_admitted(out)
                 else min(1.0, good / ref.good))
        rows.append((share, case, good, ref.good, out))
    worst, case, good, ref_good, out = min(rows, key=lambda row: (row[0], not row[4].book.never_held_back))
    if out.book.never_held_back:
        return Measure(0.0, f"on {case.where} your ledger never held a request back: it made "
                            f"{out.book.beyond} admissions with less capacity available than the request "
                            "needed, and told none to wait: efficiency is not shown by admitting everything",
                       tuple(row[1].cite for row in rows if row[0] < 1.0))
    if worst >= 1.0:
        excused = sum(1 for _, _, good, ref_good, out in rows if good < ref_good)
        return Measure(1.0, f"on all {len(graded)} workloads where every request fits, as many "
                            f"requests met their SLO as under the oracle ledger, or more"
                       + (f", but for {excused} where your ledger told no request to wait that fit "
                          "and admitted some beyond capacity: what those admissions cost is "
                          "safety's to show" if excused else ""))
    line = (f"lowest on {case.where}: {good} requests met their SLO under your ledger, "
            f"{ref_good} under the oracle ledger ({100 * worst:.1f}%)")
    if out.book.overcautious is not None:
        r, v, adm = out.book.overcautious
        line += (f"; e.g. {r.id} was told {adm.decision} with {ledger_words(v)}, and it needed "
                 f"{need(r)} ({request_words(r)})")
    evidence = tuple(row[1].cite for row in rows if row[0] < 1.0)
    return Measure(worst, line + _calls_note([out]), evidence)


def _only_over_admitted(out) -> bool:
    """The run's ledger held back no request that fit, and admitted some beyond capacity.
    Any shortfall in its SLO count is then the over-admissions' doing (preempted or stalled
    requests), which safety charges; efficiency is the admitting of what fits, and it
    admitted all of that. (A safe ledger that holds back too much, by over-reserving for one,
    is still measured by its count.)"""
    return out.book.overcautious is None and out.book.beyond > 0


# ---- liveness -----------------------------------------------------------------------------
def _liveness_probe(case: Case, adm: Admission) -> str:
    r, v = case.inputs
    if footprint(r) > v.total_pages:
        if adm.decision == "reject":
            return ""
        return (f"{adm.decision} on a request that can never fit ({footprint(r)} pages > pool of "
                f"{v.total_pages}); it must be rejected")
    if adm.decision == "reject":
        return (f"rejected a request that fits the pool ({footprint(r)} of {v.total_pages} "
                f"pages); it must wait for capacity instead")
    return ""


@dataclass
class _Side:
    """One side of liveness: the requests or probes on it, those answered wrong, and of
    those the answers that could not be used (a failed call is no decision to explain)."""
    total: int = 0
    bad: int = 0
    unusable: int = 0

    def add(self, total: int, bad: int, unusable: int = 0) -> None:
        self.total, self.bad, self.unusable = self.total + total, self.bad + bad, self.unusable + unusable

    @property
    def share(self) -> float:
        return 1 - self.bad / self.total if self.total else 1.0


@check("lesson2.liveness")
def liveness(ctx: CheckContext, params: dict) -> Measure:
    stub = _not_implemented(ctx)
    if stub:
        return stub
    never, fits, waits, edge = _Side(), _Side(), _Side(), _Side()
    stories, evidence = [], []
    runs = _runs(ctx)
    if runs:
        from grader.lessons.ledger_runs import liveness_story, run_liveness
    for case, out in runs:
        stuck_imp, refused, n_imp, n_poss = run_liveness(case, out)
        never.add(n_imp, len(stuck_imp))
        fits.add(n_poss, len(refused))
        if stuck_imp or refused:
            evidence.append(case.cite)
            # The first failure in arrival order: a starved head explains what follows it.
            first = min(stuck_imp + refused, key=lambda x: (x.arrival_s, x.id))
            stories.append(liveness_story(case, out, first))
    answers = _probe_answers(ctx)
    for a in answers:
        r, v = a.case.inputs
        wrong = bool(a.problem or _liveness_probe(a.case, a.value))
        if footprint(r) > v.total_pages:
            never.add(1, wrong)
            continue
        fits.add(1, wrong)
        if need(r) > available(v):
            waits.add(1, wrong, bool(a.problem))
            if footprint(r) == v.total_pages:
                edge.add(1, wrong, bool(a.problem))
    probes = grade_answers(answers, _liveness_probe, "probes")
    # The probes that fit the pool and must wait are a side of their own: only there does a
    # wrong "can never fit" test show (one that fits now is admitted before that test is
    # asked), and among the thousands of run requests that fit, a test wrong on some pools
    # (the public pool's size written in) lost a few thousandths of the criterion.
    # The pool's edge is a side of its own within them: a test one page off rejects only
    # the footprints of exactly the pool, a handful of the probes that must wait (with those
    # that fit now, a hidden probe that landed on the edge by its draw once bought such a
    # test a seventh of the criterion).
    value = min(never.share, fits.share, waits.share, edge.share)
    if value >= 1.0:
        return Measure(1.0, f"all {never.total} requests that can never fit were rejected, and all "
                            f"{fits.total} that fit the pool were admitted in the end")
    parts = [f"{never.total - never.bad} of {never.total} requests that can never fit were rejected; "
             f"{fits.bad} of {fits.total} that fit the pool were rejected or never admitted"]
    if waits.bad > waits.unusable:
        parts.append(f"{waits.bad - waits.unusable} of the {waits.total} probes that fit the pool and "
                     "must wait were rejected: what fits the pool waits for capacity")
    if edge.bad > edge.unusable:
        parts.append(f"{edge.bad - edge.unusable} of the {edge.total} probes whose footprint is exactly "
                     "the whole pool and that must wait were rejected: a footprint equal to the pool fits it")
    parts += stories[:1]
    if probes.value < 1.0:
        parts.append(probes.feedback)
    return Measure(value, "; ".join(parts) + _calls_note([o for _, o in runs]),
                   tuple(evidence) + probes.evidence)


# ---- reservations -------------------------------------------------------------------------
def _inexact(r: AdmissionRequest, v: LedgerView, adm: Admission) -> str:
    """Why an answer to a request that fits now is not the exact admission ("" when it is)."""
    if adm.decision != "admit":
        exact = ", exactly enough" if need(r) == available(v) else ""
        return (f"returned {adm.decision!r} with {ledger_words(v)}, and it needs {need(r)}"
                f"{exact} ({request_words(r)}): it fits, so admit it")
    if adm.reserve_pages != promise(r):
        return (f"reserved {adm.reserve_pages} pages, expected {promise(r)} "
                f"({request_words(r)}: only the {promise(r)} pages it does not share)")
    return ""


def _reservation_probe(case: Case, adm: Admission) -> str:
    return _inexact(*case.inputs, adm)


@check("lesson2.reservations")
def reservations(ctx: CheckContext, params: dict) -> Measure:
    fits = [a for a in _probe_answers(ctx) if need(a.case.inputs[0]) <= available(a.case.inputs[1])]
    probes = grade_answers(fits, _reservation_probe, "probes whose need fits")
    runs = _in_runs(_runs(ctx))
    if runs is None or runs.value >= 1.0:
        return probes
    if probes.value >= 1.0:
        return runs
    return Measure(min(probes.value, runs.value), f"{probes.feedback}; {runs.feedback}",
                   probes.evidence + runs.evidence)


def _in_runs(runs: list) -> Measure | None:
    """The runs' admissions of requests that fit now, judged as the probes are: a ledger can
    tell a probe from a run's request (a probe's scope says public or hidden) and answer the
    probes alone exactly. The two sides of the fit, exact and with room to spare, weigh the
    same whatever their counts: a ledger that makes exact fits wait is wrong on a few calls
    of thousands. None when no run asked about a request that fit."""
    asked, wrong, first, cites = {}, {}, {}, []
    for case, out in runs:
        book = out.book
        for side, n in book.fits.items():
            asked[side] = asked.get(side, 0) + n
            wrong[side] = wrong.get(side, 0) + book.fits_wrong[side]
            if side in book.first_fit_wrong and side not in first:
                first[side] = (case, book.first_fit_wrong[side])
        if any(book.fits_wrong.values()):
            cites.append(case.cite)
    sides = [side for side in asked if asked[side]]
    if not sides:
        return None
    n, bad = sum(asked.values()), sum(wrong.values())
    if not bad:
        return Measure(1.0, f"all {n} admissions asked in the runs where the request fit were exact")
    value = sum(1 - wrong[side] / asked[side] for side in sides) / len(sides)
    side = next(side for side in sides if side in first)
    case, (r, v, adm) = first[side]
    by_side = ", ".join(f"{wrong[s]} of {asked[s]} {'on an' if s == 'exact fit' else 'with'} {s}" for s in sides)
    return Measure(value, f"in the runs, {bad} of {n} admissions asked where the request fit were "
                          f"not admitted with exactly its promise ({by_side}); first, on {case.where}: "
                          f"{r.id} {_inexact(r, v, adm)}", tuple(cites))
