"""Lesson 5, qualify and release: verdicts, goodput and release decisions against the oracle.

Cases:
- ``qualify-<topic>``: one RequestRecord (and an SLO passed explicitly, or None). Records
  are the edges the lesson names, built with times that are exact in binary floating
  point (so ``first - arrival > ttft`` and ``first > arrival + ttft`` agree), plus records
  of real worker runs. Each lands in the topic its verdict hinges on: ``gaps`` when the
  largest gap and the average time per token disagree, else by outcome (``outcomes`` for
  rejected and failed, ``cancels``, ``deadlines`` for completed requests). So a mistake
  about one idea costs the criterion that names that idea.
- ``goodput``: a set of records, an SLO or None, and a window.
- ``release-<kind>``: the paired-seed summaries of a baseline and a candidate design
  (grader.trials) and the rule; the kinds are a real gain, a gain inside the noise, a
  gain bought by rejections, one class regressing, and an average TPOT that hides stalls.

Public cases come from assignments/lesson5/public/ (records.yaml and the release suite);
hidden ones are drawn from the instructor secret: edge records with fresh numbers, records
of hidden suite runs, and the hidden suites of grader/families/lesson5.yaml. A hidden
release case is kept only when the oracle's decision is the one its kind expects, stays the
same under every correct reading of the rule (sample or population deviation, pooled or
per-run shares, each threshold 10% either way) and differs from the decision of the mistake
its kind is about, so another correct rule is never marked wrong.
"""
from __future__ import annotations

import itertools
import math
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Optional

import numpy as np
import yaml

from grader.cases import Case
from grader.checks import Answer, CheckContext, Measure, ask, check, grade_answers
from grader.errors import InputError
from grader.trials import KINDS, Suite, Trial, hidden_suites, public_suites, run_design
from grader.secret import derive_seed
from reference.shapes import (QUALIFICATIONS, RELEASE_DECISIONS, ReleaseDecision, ReleaseRule,
                              RequestRecord, RunSummary, Slo)
from reference.solutions import lesson5 as oracle

TOPICS = ("deadlines", "gaps", "cancels", "outcomes")
EDGE_S = 1e-6            # real records keep every deciding time this far from its deadline
REAL_PER_TOPIC = {"deadlines": 24, "gaps": 16, "cancels": 16, "outcomes": 10}
GOODPUT_SET = 30         # records in a goodput probe cut from a real run
REL_TOL = 1e-9


# ---- the oracle's view of a record ------------------------------------------------------------
def topic(record: RequestRecord, slo: Optional[Slo]) -> str:
    """The idea a record's verdict hinges on."""
    if oracle.qualify(record, slo) != oracle.qualify(record, slo, gaps="average"):
        return "gaps"
    if record.outcome in ("rejected", "failed", "preempted"):
        return "outcomes"
    return "cancels" if record.outcome == "cancelled_by_client" else "deadlines"


def _gaps(times) -> list[float]:
    return [b - a for a, b in zip(times, times[1:])]


def clear_of_edges(record: RequestRecord) -> bool:
    """No deciding time of a real record within EDGE_S of its deadline."""
    slo, times = record.slo, record.token_times
    due = record.arrival_s + slo.ttft_s
    near = []
    if times:
        near.append(times[0] - due)
        near += [g - slo.gap_s for g in _gaps(times)]
    if record.outcome == "cancelled_by_client" and record.cancel_s is not None:
        near.append(record.cancel_s - due)
        if times:
            near.append(record.cancel_s - times[-1] - slo.gap_s)
    return all(abs(x) > EDGE_S for x in near)


def _s(x: float) -> str:
    return f"{x:.6g} s"


def show_record(record: RequestRecord, slo: Optional[Slo]) -> str:
    """The record as feedback shows it: what decides its verdict."""
    own = record.slo
    use = slo or own
    times = record.token_times
    parts = [f"{record.outcome}", f"arrival {_s(record.arrival_s)}",
             f"slo ttft {_s(use.ttft_s)} gap {_s(use.gap_s)}"
             + (f" (passed explicitly; the record's own is ttft {_s(own.ttft_s)} gap {_s(own.gap_s)})"
                if slo else ""),
             f"first-token deadline {_s(record.arrival_s + use.ttft_s)}"]
    if times:
        gaps = _gaps(times)
        parts.append(f"{len(times)} token{'s' if len(times) != 1 else ''}, first at {_s(times[0])}")
        if gaps:
            parts.append(f"largest gap {_s(max(gaps))}, mean gap {_s(sum(gaps) / len(gaps))}, "
                         f"last token {_s(times[-1])}")
    else:
        parts.append("no tokens")
    if record.cancel_s is not None:
        parts.append(f"cancelled at {_s(record.cancel_s)}")
    return f"record {record.id} ({'; '.join(parts)})"


def explain(record: RequestRecord, slo: Optional[Slo], verdict: str) -> str:
    """Why the oracle's verdict is what it is, in the lesson's words."""
    use = slo or record.slo
    times, due = record.token_times, record.arrival_s + use.ttft_s
    cancel = record.cancel_s
    if verdict == "rejected":
        return "a rejection counts against the service"
    if verdict == "failed":
        return f"a request that ends {record.outcome} counts against the service"
    if verdict == "late_first_token":
        if not times and record.outcome == "completed":
            return "it completed without ever emitting a first token"
        if not times:
            return f"the client cancelled at {_s(cancel)}, after the first-token deadline {_s(due)} had passed"
        return f"the first token came at {_s(times[0])}, after the deadline {_s(due)}"
    if verdict == "slow_tokens":
        gaps = _gaps(times)
        if gaps and max(gaps) > use.gap_s:
            return (f"its largest gap {_s(max(gaps))} exceeds gap_s {_s(use.gap_s)} (the mean gap "
                    f"{_s(sum(gaps) / len(gaps))} does not matter: the deadline is per token)")
        return (f"the client cancelled {_s(cancel - times[-1])} after the last token, when the next "
                f"token was already more than gap_s {_s(use.gap_s)} late")
    if verdict == "excluded":
        return "the client cancelled before any deadline was missed (a cancel exactly at a deadline comes before the miss)"
    edge = ["the first token came exactly at the deadline, which is in time"] if times and times[0] == due else []
    if times and _gaps(times) and max(_gaps(times)) == use.gap_s:
        edge.append("its largest gap equals gap_s, which is in time")
    return "; ".join(edge) or "every deadline was met"


# ---- building record cases ------------------------------------------------------------------
def probe_record(rid: str, slo: Slo, arrival: float, outcome: str, times=(), cancel=None,
                 cls: str = "probe", prompt: int = 512) -> RequestRecord:
    times = tuple(float(t) for t in times)
    finished = outcome == "completed"
    return RequestRecord(
        id=rid, scope="probe", cls=cls, slo=slo, arrival_s=float(arrival), outcome=outcome,
        prompt_tokens=prompt, max_new_tokens=max(64, len(times)), tokens_out=len(times),
        token_times=times, admitted_s=None if outcome == "rejected" else float(arrival),
        first_token_s=times[0] if times else None,
        finish_s=(times[-1] if times else float(arrival) + slo.ttft_s / 2) if finished else None,
        cancel_s=None if cancel is None else float(cancel),
        reason={"rejected": "rejected at admission", "failed": "its pages were released while it was running"}
        .get(outcome, ""))


def record_case(record: RequestRecord, slo: Optional[Slo], name: str, visibility: str,
                where: str) -> Case:
    return Case(f"qualify-{topic(record, slo)}", name, visibility, (record, slo),
                f"{where} {show_record(record, slo)}")


def _slo_of(m, where: str) -> Slo:
    try:
        return Slo(float(m["ttft_s"]), float(m["gap_s"]))
    except (KeyError, TypeError, ValueError):
        raise InputError(where, "expected ttft_s and gap_s in seconds") from None


def public_records(course) -> list[Case]:
    path = course.assignment("lesson5") / "public" / "records.yaml"
    try:
        data = yaml.safe_load(Path(path).read_text(encoding="utf-8")) or {}
    except (OSError, yaml.YAMLError) as e:
        raise InputError(str(path), f"cannot read the public records: {e}") from None
    default = _slo_of(data.get("slo") or {}, f"{path}: slo")
    cases = []
    for i, r in enumerate(data.get("records") or []):
        where = f"{path}: records.{r.get('id', i)}"
        try:
            slo = _slo_of(r["slo"], where) if "slo" in r else default
            record = probe_record(str(r["id"]), slo, r["arrival_s"], r["outcome"], r.get("token_times", ()),
                                  r.get("cancel_s"), cls=str(r.get("cls", "probe")))
            passed = _slo_of(r["passed_slo"], where) if "passed_slo" in r else None
        except (KeyError, TypeError, ValueError) as e:
            raise InputError(where, f"bad record probe ({e})") from None
        cases.append(record_case(record, passed, f"record {record.id}", "public", "public"))
    return cases


def _dyadic(g: np.random.Generator, lo: int, hi: int, denom: int) -> float:
    return int(g.integers(lo, hi + 1)) / denom


def edge_records(g: np.random.Generator, prefix: str) -> list[tuple[RequestRecord, Optional[Slo]]]:
    """Every edge the lesson names, with fresh numbers: dyadic times, exact sums."""
    out = []
    for i in range(2):
        slo = Slo(_dyadic(g, 16, 96, 32), _dyadic(g, 16, 96, 256))         # 0.5-3 s, 62-375 ms
        a = _dyadic(g, 0, 64 * 60, 64)
        due, gap = a + slo.ttft_s, slo.gap_s
        tick = 1 / 256

        def stream(first: float, n: int, stall_at: int = -1, stall: float = 0.0) -> list[float]:
            times, t = [first], first
            for k in range(1, n):
                t += stall if k == stall_at else gap - tick * int(g.integers(1, 8))
                times.append(t)
            return times

        n = int(g.integers(4, 40))
        early = due - tick * int(g.integers(1, 64))
        k = int(g.integers(1, n))
        p = f"{prefix}{i}"
        made = [
            probe_record(f"{p}-first-at-deadline", slo, a, "completed", stream(due, n)),
            probe_record(f"{p}-first-just-late", slo, a, "completed", stream(due + tick, n)),
            probe_record(f"{p}-gap-at-limit", slo, a, "completed", stream(early, n, k, gap)),
            probe_record(f"{p}-gap-just-over", slo, a, "completed", stream(early, n, k, gap + tick)),
            probe_record(f"{p}-stall", slo, a, "completed", stream(early, n + 20, k, gap * 3)),
            probe_record(f"{p}-late-and-stalled", slo, a, "completed", stream(due + tick * 8, n, k, gap * 4)),
            probe_record(f"{p}-zero-tokens", slo, a, "completed", ()),
            probe_record(f"{p}-one-token", slo, a, "completed", (early,)),
            probe_record(f"{p}-one-token-at-deadline", slo, a, "completed", (due,)),
            probe_record(f"{p}-one-token-late", slo, a, "completed", (due + tick,)),
            probe_record(f"{p}-cancel-queued", slo, a, "cancelled_by_client", (), due - tick * 16),
            probe_record(f"{p}-cancel-queued-at-deadline", slo, a, "cancelled_by_client", (), due),
            probe_record(f"{p}-cancel-queued-late", slo, a, "cancelled_by_client", (), due + tick),
        ]
        late, stalled, s = stream(due + tick * 4, 3), stream(early, 3, 1, gap * 2), stream(early, n)
        # A cancelled record's tokens all come before its cancel.
        made += [
            probe_record(f"{p}-cancel-streaming", slo, a, "cancelled_by_client", s, s[-1] + gap / 2),
            probe_record(f"{p}-cancel-at-gap-deadline", slo, a, "cancelled_by_client", s, s[-1] + gap),
            probe_record(f"{p}-cancel-open-gap-missed", slo, a, "cancelled_by_client", s, s[-1] + gap + tick),
            probe_record(f"{p}-cancel-after-late-first", slo, a, "cancelled_by_client", late, late[-1] + tick),
            probe_record(f"{p}-cancel-after-stall", slo, a, "cancelled_by_client", stalled, stalled[-1] + tick),
            probe_record(f"{p}-rejected", slo, a, "rejected", ()),
            probe_record(f"{p}-failed-on-time", slo, a, "failed", stream(early, 3)),
            probe_record(f"{p}-preempted", slo, a, "preempted", stream(early, 2)),
        ]
        out += [(r, None) for r in made]
        # The same kind of record judged against an SLO passed explicitly: a stricter
        # what-if turns good into slow, a looser one turns late into good.
        strict = Slo(slo.ttft_s, gap / 2)
        loose = Slo(slo.ttft_s * 2, gap)
        out += [(made[0], strict), (made[1], loose), (made[-2], strict)]
    return out


def real_records(suites: list[Suite], g: np.random.Generator, visibility: str) -> list[Case]:
    """A sample of records from the suites' runs, per topic, clear of knife edges."""
    rows = []
    seen = set()
    for suite in suites:
        for trial in suite.trials:
            for design in (trial.baseline, trial.candidate):
                for seed in trial.seeds:
                    key = (trial.name.rsplit("/", 1)[0], design.name, seed)
                    if key not in seen:
                        seen.add(key)
                        _, run = run_design(trial.model, design, trial.workload, seed)
                        rows += [(r, f"{key[0]} {design.name} seed {seed}") for r in run.requests]
    # Visit the records in a random order and fill each topic's quota as they come.
    picked: dict[str, list] = {t: [] for t in TOPICS}
    for i in g.permutation(len(rows)):
        r, where = rows[int(i)]
        t = topic(r, None)
        if len(picked[t]) < REAL_PER_TOPIC[t] and clear_of_edges(r):
            picked[t].append((r, where))
        if all(len(picked[t]) == REAL_PER_TOPIC[t] for t in TOPICS):
            break
    cases = []
    for t in TOPICS:
        for r, where in picked[t]:
            name = f"{where} {r.id}" if visibility == "public" else f"real#{t}.{len(cases)}"
            cases.append(record_case(r, None, name, visibility, f"run {where}:"))
    return cases


# ---- goodput cases ---------------------------------------------------------------------------
def goodput_cases(records: list[tuple[RequestRecord, Optional[Slo]]], suites: list[Suite],
                  g: np.random.Generator, visibility: str) -> list[Case]:
    cases = []
    own = tuple(r for r, s in records if s is None)

    def add(name, recs, slo, window, what):
        slo_note = f", slo passed explicitly (ttft {_s(slo.ttft_s)}, gap {_s(slo.gap_s)})" if slo else ""
        where = "" if visibility == "public" else "hidden "
        cases.append(Case("goodput", where + name, visibility, (tuple(recs), slo, float(window)),
                          f"{where}{what}: {len(recs)} records over a {window:g} s window{slo_note}"))

    add("edge records", own, None, 16.0, "the edge records")
    add("edge records, strict slo", own, Slo(1.0, 0.0625), 16.0, "the edge records")
    add("no records", (), None, float(g.integers(1, 65)) / 4, "an empty set")
    for suite in suites[:2]:
        for trial in (suite.trials[0], suite.trials[-1]):
            seed = trial.seeds[0]
            requests, run = run_design(trial.model, trial.candidate, trial.workload, seed)
            idx = sorted(g.choice(len(run.requests), size=min(GOODPUT_SET, len(run.requests)), replace=False))
            recs = tuple(run.requests[int(i)] for i in idx)
            window = max(r.arrival_s for r in requests)
            add(f"{trial.name} seed {seed}", recs, None, window, f"records of {trial.name}, seed {seed}")
    return cases


# ---- release cases -----------------------------------------------------------------------------
@dataclass(frozen=True)
class ReleaseProbe:
    trial: str
    kind: str
    note: str
    baseline: tuple[RunSummary, ...]
    candidate: tuple[RunSummary, ...]
    rule: ReleaseRule


MISTAKE = {"noise": {"noise": "mean_only"}, "rejections": {"rejection_guard": False},
           "class": {"class_guard": False}}
GAINS = {"gain", "noise", "rejections", "class"}     # kinds whose candidate raises mean goodput


def _readings(rule: ReleaseRule):
    """Every correct reading of the rule: deviations, pooling, thresholds 10% either way."""
    for stdev, pool in itertools.product(("sample", "population"), ("runs", "per_run")):
        yield {"stdev": stdev, "pool": pool}, rule
        for name in ("min_gain", "noise_k", "max_class_drop", "max_rejection_rise"):
            for f in (0.9, 1.1):
                yield {"stdev": stdev, "pool": pool}, replace(rule, **{name: getattr(rule, name) * f})


def settled(probe: ReleaseProbe, expect: str) -> bool:
    """The oracle decides as the kind expects, robustly, and unlike the kind's mistake."""
    b, c, rule = probe.baseline, probe.candidate, probe.rule
    decision = oracle.decide_release(b, c, rule).decision
    if expect and decision != expect:
        return False
    if probe.kind in GAINS and mean_gain(probe) <= 0:
        return False
    if any(oracle.decide_release(b, c, r, **kw).decision != decision for kw, r in _readings(rule)):
        return False
    mistake = MISTAKE.get(probe.kind)
    return mistake is None or oracle.decide_release(b, c, rule, **mistake).decision != decision


def release_probe(trial: Trial, note: str) -> ReleaseProbe:
    base, cand = trial.runs()
    return ReleaseProbe(trial.name, trial.kind, note, base, cand, trial.rule)


def mean_gain(probe: ReleaseProbe) -> float:
    """The candidate's mean paired goodput difference, relative to the baseline's goodput."""
    diffs = [oracle.run_goodput(c) - oracle.run_goodput(b) for b, c in oracle.paired(probe.baseline, probe.candidate)]
    base = sum(oracle.run_goodput(b) for b in probe.baseline) / len(probe.baseline)
    return (sum(diffs) / len(diffs)) / base if base > 0 else 0.0


def _sharpen_noise(probe: ReleaseProbe) -> ReleaseProbe:
    """A gain inside the noise but under min_gain says nothing about the band: lower the bar."""
    gain = mean_gain(probe)
    if 0 < gain < probe.rule.min_gain:
        return replace(probe, rule=replace(probe.rule, min_gain=round(gain / 2, 4)))
    return probe


def release_cases(suites: list[Suite], visibility: str, notes: dict[str, str]) -> list[Case]:
    cases = []
    for suite in suites:
        for trial in suite.trials:
            probe = release_probe(trial, notes.get(trial.kind, ""))
            if visibility == "hidden":
                if trial.kind == "noise":
                    probe = _sharpen_noise(probe)
                if not settled(probe, trial.expect):
                    continue
            cases.append(Case(f"release-{trial.kind}", trial.name, visibility, probe,
                              f"scenario {trial.name} ({probe.note})" if probe.note else f"scenario {trial.name}"))
    return cases


def _notes(course) -> dict[str, str]:
    """The candidates' one-line descriptions, from the public suite file."""
    notes = {}
    for path in sorted((course.assignment("lesson5") / "public").glob("*.suite.yaml")):
        data = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
        for kind, change in (data.get("candidates") or {}).items():
            if isinstance(change, dict) and "note" in change:
                notes.setdefault(kind, str(change["note"]))
    return notes


# ---- the lesson's cases --------------------------------------------------------------------------
def _suite_records(cases: list[Case]) -> list[tuple[RequestRecord, Optional[Slo]]]:
    return [c.inputs for c in cases]


def public_cases(course) -> list[Case]:
    suites = public_suites(course)
    edges = public_records(course)
    g = np.random.Generator(np.random.PCG64(5))
    cases = edges + real_records(suites, g, "public")
    cases += goodput_cases(_suite_records(edges), suites, g, "public")
    cases += release_cases(suites, "public", _notes(course))
    return cases


def hidden_cases(secret: bytes, course=None) -> list[Case]:
    g = np.random.Generator(np.random.PCG64(derive_seed(secret, "lesson5", "records")))
    suites = hidden_suites(course, secret)
    edges = [record_case(r, s, f"edge#{i}", "hidden", "hidden") for i, (r, s) in enumerate(edge_records(g, "h"))]
    cases = edges + real_records(suites, g, "hidden")
    cases += goodput_cases(_suite_records(edges), suites, g, "hidden")
    cases += release_cases(suites, "hidden", _notes(course))
    return cases


# ---- checks ----------------------------------------------------------------------------------------
def _asked(ctx: CheckContext, key: str, function: str, cases: list[Case], args, returns) -> list[Answer]:
    """Each case asked once per run, whichever criterion needs it first (memo by case name)."""
    memo = ctx.memo.setdefault(key, {})
    todo = [c for c in cases if c.name not in memo]
    if todo:
        memo.update((a.case.name, a) for a in ask(ctx, function, todo, args, returns))
    return [memo[c.name] for c in cases]


def _judge_verdict(case: Case, got: str) -> str:
    record, slo = case.inputs
    want = oracle.qualify(record, slo)
    if got not in QUALIFICATIONS:
        return f"returned {got!r}, which is not one of {', '.join(QUALIFICATIONS)}"
    return "" if got == want else f"returned {got!r}, expected {want!r}: {explain(record, slo, want)}"


def _qualify_check(name: str):
    def measure(ctx: CheckContext, params: dict) -> Measure:
        # Every topic's records go in one batch the first time any topic is graded.
        every = [c for c in ctx.cases if c.family.startswith("qualify-")]
        _asked(ctx, "qualify", "qualify", every, lambda c: c.inputs, str)
        mine = _asked(ctx, "qualify", "qualify", ctx.family(f"qualify-{name}"), lambda c: c.inputs, str)
        return grade_answers(mine, _judge_verdict, "records")
    return measure


for _topic in TOPICS:
    check(f"lesson5.qualify_{_topic}")(_qualify_check(_topic))


def _own_goodput(ctx: CheckContext, cases: list[Case]) -> dict[str, float]:
    """goodput as the learner's own qualify counts it, for the given record sets. A goodput
    that calls a wrong qualify is consistent: that mistake is charged to the qualify criteria."""
    probes = [Case("own", f"{c.name}/{i}", "public", (r, c.inputs[1]))
              for c in cases for i, r in enumerate(c.inputs[0])]
    answers = _asked(ctx, "own-qualify", "qualify", probes, lambda c: c.inputs, str)
    own = {}
    for c in cases:
        mine = [a for a in answers if a.case.name.rsplit("/", 1)[0] == c.name]
        if all(not a.problem for a in mine):
            own[c.name] = sum(1 for a in mine if a.value == "good") / c.inputs[2]
    return own


def _close(a: float, b: float) -> bool:
    return math.isclose(a, b, rel_tol=REL_TOL, abs_tol=1e-12)


@check("lesson5.goodput")
def goodput(ctx: CheckContext, params: dict) -> Measure:
    cases = ctx.family("goodput")
    answers = ask(ctx, "goodput", cases, lambda c: c.inputs, float)
    off = [a.case for a in answers if not a.problem
           and not _close(a.value, oracle.goodput(*a.case.inputs))]
    own = _own_goodput(ctx, off) if off else {}

    def judge(case: Case, got: float) -> str:
        records, slo, window = case.inputs
        want = oracle.goodput(records, slo, window)
        if _close(got, want) or (case.name in own and _close(got, own[case.name])):
            return ""
        good = round(want * window)
        return (f"returned {got:.6g} req/s, expected {want:.6g} ({good} good requests / {window:g} s)"
                + (f"; your qualify counts {round(own[case.name] * window)} good, which would give "
                   f"{own[case.name]:.6g}" if case.name in own else ""))
    return grade_answers(answers, judge, "record sets")


def _decision_args(case: Case) -> tuple:
    return (case.inputs.baseline, case.inputs.candidate, case.inputs.rule)


def _show_runs(p: ReleaseProbe) -> str:
    names = [c.cls for c in p.baseline[0].classes]
    parts = []
    for name in names:
        before, after = oracle.attainment(p.baseline, name), oracle.attainment(p.candidate, name)
        if before is not None and after is not None:
            parts.append(f"{name} attainment {before:.1%} -> {after:.1%}")
    parts.append(f"rejected {oracle.rejected_share(p.baseline):.1%} -> {oracle.rejected_share(p.candidate):.1%}")
    tpot = [sum(r.mean_tpot_s for r in runs) / len(runs) * 1000 for runs in (p.baseline, p.candidate)]
    parts.append(f"mean TPOT {tpot[0]:.1f} -> {tpot[1]:.1f} ms")
    return "; ".join(parts)


def _judge_decision(case: Case, got: ReleaseDecision) -> str:
    p: ReleaseProbe = case.inputs
    want = oracle.decide_release(p.baseline, p.candidate, p.rule)
    if got.decision not in RELEASE_DECISIONS:
        return f"decision {got.decision!r} is not one of {', '.join(RELEASE_DECISIONS)}"
    if got.decision == want.decision:
        return ""
    return (f"decided {got.decision}, expected {want.decision}: {'; '.join(want.reasons)} "
            f"[{_show_runs(p)}; rule {p.rule}]")


def _release_check(kind: str):
    def measure(ctx: CheckContext, params: dict) -> Measure:
        every = [c for c in ctx.cases if c.family.startswith("release-")]
        _asked(ctx, "release", "decide_release", every, _decision_args, ReleaseDecision)
        mine = _asked(ctx, "release", "decide_release", ctx.family(f"release-{kind}"), _decision_args,
                      ReleaseDecision)
        return grade_answers(mine, _judge_decision, "release scenarios")
    return measure


for _kind in KINDS:
    check(f"lesson5.release_{_kind}")(_release_check(_kind))
