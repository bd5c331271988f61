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
  (grader.course.trials) and the rule; the kinds are a real gain, a gain inside the noise, a
  gain bought by rejections, one class regressing, and an average TPOT that hides stalls.
- ``rule-<kind>``: paired-seed summaries built so that one clause of the rule decides
  (grader/lessons/rule_probes.py): min_gain, a fall beyond the band, pairing by seed, a
  class whose rejected requests count against it, and the other side of every guard.

Public cases come from assignments/lesson5/public/ (records.yaml and the release suite);
hidden ones are drawn from the instructor secret: edge records with fresh numbers (under ids
that name nothing, as a run's do), records of hidden suite runs, and the hidden suites of grader/instructor/families/lesson5.yaml. A hidden
release case is kept only when the oracle's decision is the one its kind expects, stays the
same under every correct reading of the rule (sample or population deviation, pooled or
per-run shares, each threshold 10% either way) and differs from the decision of the mistake
its kind is about, so another correct rule is never marked wrong.

This module builds the cases; each kind is judged beside it, in verdicts (qualify),
goodput and release_decisions, and importing this module registers their checks.
"""
from __future__ import annotations

from dataclasses import replace
from typing import Optional

import numpy as np

from grader.engine.cases import Case
from grader.engine.layout import FAMILIES, read_sections, read_yaml
from reference.yaml_words import reading_problem
from grader.engine.errors import InputError
# Importing the judges registers their checks.
from grader.lessons import goodput, release_decisions, rule_probes, verdicts  # noqa: F401
from grader.lessons.release_decisions import ReleaseProbe, mean_gain, settled
from grader.lessons.verdicts import TOPICS, clear_of_edges, seconds, show_record, topic
from grader.course.scenario import RESERVE      # further instances, drawn only for a kind no instance settles
from grader.course.trials import Suite, Trial, hidden_suites, public_suites, run_design, window_of
from grader.engine.secret import derive_seed
from reference.shapes import ReleaseRule, RequestRecord, Slo

# The public cases are made of the reference's runs and verdicts: recorded in the learner edition.
PUBLIC_CASES_NEED = ("lesson1", "lesson2", "lesson3", "lesson4", "lesson5")
REAL_PER_TOPIC = {"deadlines": 24, "gaps": 16, "cancels": 16, "outcomes": 10}
GOODPUT_SET = 30         # records in a goodput probe cut from a real run


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


def smoothed(cases: list[Case], rename=lambda rid: f"{rid}-smooth") -> list[Case]:
    """The other side of the largest gap: each completed record whose stall the average
    hides, with the stall taken out (every gap at most half of gap_s), so it is good. A
    rule that calls every record of the gaps topic slow is right on one side only.
    ``rename`` gives a twin's id from its record's."""
    out = []
    for case in cases:
        record, slo = case.inputs
        if case.family != "qualify-gaps" or record.outcome != "completed" or len(record.token_times) < 2:
            continue
        limit = (slo or record.slo).gap_s / 2
        times = [record.token_times[0]]
        for a, b in zip(record.token_times, record.token_times[1:]):
            times.append(times[-1] + min(b - a, limit))
        twin = replace(record, id=rename(record.id), token_times=tuple(times), finish_s=times[-1])
        out.append(Case("qualify-gaps", f"{case.name} smoothed", case.visibility, (twin, slo),
                        f"{case.label.split(' record ')[0]} {show_record(twin, slo)}"))
    return out


def _slo_of(m, where: str) -> Slo:
    try:
        return Slo(float(m["ttft_s"]), float(m["gap_s"]))
    except (KeyError, TypeError, ValueError):
        raise InputError(where, "expected ttft_s and gap_s in seconds") from None


def public_records(course) -> list[Case]:
    path = course.assignment("lesson5") / "public" / "records.yaml"
    data = read_sections(path, {"slo": "mapping", "records": "records"})
    default = _slo_of(data["slo"], f"{path}: slo")
    cases = []
    for i, r in enumerate(data.get("records") or []):
        where = f"{path}: records.{r.get('id', i)}"
        try:
            slo = _slo_of(r["slo"], where) if "slo" in r else default
            record = probe_record(str(r["id"]), slo, r["arrival_s"], r["outcome"], r.get("token_times", ()),
                                  r.get("cancel_s"), cls=str(r.get("cls", "probe")))
            passed = _slo_of(r["passed_slo"], where) if "passed_slo" in r else None
        except (KeyError, TypeError, ValueError) as e:
            raise InputError(where, f"bad record probe: {reading_problem(e)}") from None
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
            # One token has no gap, but a client waiting for the second saw its deadline pass.
            probe_record(f"{p}-cancel-one-token", slo, a, "cancelled_by_client", (early,), early + gap / 2),
            probe_record(f"{p}-cancel-one-token-gap-missed", slo, a, "cancelled_by_client", (early,),
                         early + gap + tick),
            probe_record(f"{p}-rejected", slo, a, "rejected", ()),
            probe_record(f"{p}-failed-on-time", slo, a, "failed", stream(early, 3)),
            probe_record(f"{p}-preempted", slo, a, "preempted", stream(early, 2)),
        ]
        out += [(r, None) for r in made]
        # The same kind of record judged against an SLO passed explicitly: a stricter
        # what-if turns good into slow, a looser one turns late into good. Cancels are a code
        # path of their own, and every clause of their rule is decided here by the SLO passed,
        # against the record's own: a first token late only under a tighter ttft_s (tokens or
        # none), a gap open at the cancel or a largest gap over only a stricter gap_s, and,
        # under a looser one, a first token, an open gap and a largest gap that no longer miss
        # (excluded). A cancel path that reads the record's SLO in any clause gets one wrong.
        strict = Slo(slo.ttft_s, gap / 2)
        loose = Slo(slo.ttft_s * 2, gap)
        tight = Slo(slo.ttft_s / 4, gap)            # early - a >= ttft - 63/256 > ttft / 4
        named = {r.id: r for r in made}
        smooth = [early + gap / 4 * j for j in range(3)]
        open_gap = probe_record(f"{p}-cancel-open-gap-smooth", slo, a, "cancelled_by_client", smooth,
                                smooth[-1] + gap * 3 / 4)
        out += [(made[0], strict), (made[1], loose), (made[-2], strict),
                (named[f"{p}-cancel-streaming"], strict), (named[f"{p}-cancel-queued-late"], loose),
                (named[f"{p}-cancel-streaming"], tight), (named[f"{p}-cancel-queued"], tight),
                (open_gap, None), (open_gap, strict),
                (named[f"{p}-cancel-open-gap-missed"], Slo(slo.ttft_s, gap * 2)),
                (named[f"{p}-cancel-after-stall"], Slo(slo.ttft_s, gap * 3)),
                (named[f"{p}-cancel-after-late-first"], loose)]
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
        slo_note = (f", slo passed explicitly (ttft {seconds(slo.ttft_s)}, gap {seconds(slo.gap_s)})"
                    if slo else "")
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
            window = window_of(requests)
            add(f"{trial.name} seed {seed}", recs, None, window, f"records of {trial.name}, seed {seed}")
    return cases


# ---- release cases -----------------------------------------------------------------------------
def release_probe(trial: Trial, note: str) -> ReleaseProbe:
    base, cand = trial.runs()
    return ReleaseProbe(trial.name, trial.kind, note, base, cand, trial.rule)


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


def hidden_release_cases(course, secret: bytes, suites: list[Suite]) -> list[Case]:
    """The hidden release cases, at least one of every kind: a draw is kept only when it
    settles, and a secret whose instances settle no case of a kind would leave that kind's
    criterion without a hidden case. Reserve instances are drawn for the missing kinds only;
    when even they settle none, grading stops and says so rather than grade weaker."""
    notes = _notes(course)
    cases = release_cases(suites, "hidden", notes)
    kinds = lambda found: {c.family.removeprefix("release-") for c in found}
    missing = {t.kind for s in suites for t in s.trials} - kinds(cases)
    if not missing:
        return cases
    for extra in hidden_suites(course, secret, reserve=RESERVE):
        found = release_cases([Suite(tuple(t for t in extra.trials if t.kind in missing))], "hidden", notes)
        cases += found
        missing -= kinds(found)
        if not missing:
            return cases
    raise InputError(str(FAMILIES / "lesson5.yaml"),
                     f"families.release: under this secret none of {RESERVE} further instances settles a "
                     f"hidden {', '.join(sorted(missing))} case; raise instances or widen vary")


RULE_PROBES = 2           # hidden rule probes of each kind per secret


def rule_cases(g: np.random.Generator, rule: ReleaseRule, visibility: str, count: int = 1) -> list[Case]:
    """Rule probes of every kind: one clause of the rule decides each (rule_probes)."""
    cases = []
    for kind in rule_probes.KINDS:
        for i in range(count):
            base, cand = rule_probes.draw(kind, g, rule, seed0=int(g.integers(1, 10_000)))
            name = f"rule/{kind}" if visibility == "public" else f"rule-{kind}#{i}"
            probe = ReleaseProbe(name, kind, rule_probes.NOTES[kind], base, cand, rule)
            where = "" if visibility == "public" else "hidden "
            cases.append(Case(f"rule-{kind}", name, visibility, probe,
                              f"{where}rule probe {kind} ({probe.note})"))
    return cases


def _hidden_rule(g: np.random.Generator) -> ReleaseRule:
    """Another rule per secret: no threshold of the public rule can be written in as a number."""
    pick = lambda values: float(g.choice(values))
    return ReleaseRule(min_gain=pick([0.02, 0.03, 0.04]), noise_k=pick([2.0, 2.5, 3.0]),
                       max_class_drop=pick([0.04, 0.05, 0.08]), max_rejection_rise=pick([0.01, 0.02, 0.03]))


def _notes(course) -> dict[str, str]:
    """The candidates' one-line descriptions, from the public suite file."""
    notes = {}
    for path in sorted((course.assignment("lesson5") / "public").glob("*.suite.yaml")):
        data = read_yaml(path) or {}
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
    cases += smoothed(cases)
    cases += goodput_cases(_suite_records(edges), suites, g, "public")
    cases += release_cases(suites, "public", _notes(course))
    cases += rule_cases(np.random.Generator(np.random.PCG64(15)), suites[0].trials[0].rule, "public")
    return cases


def _unnamed(secret: bytes):
    """A hidden record's id as a run would give it (r and a number), drawn from the secret
    and the id it was built under. An edge record's own id names its edge
    (h0-first-at-deadline) and a twin's its stall taken out (-smooth): a qualify could answer
    those by name instead of by their times."""
    return lambda rid: f"r{derive_seed(secret, 'lesson5', 'record id', rid) % 1_000_000_000}"


def hidden_cases(secret: bytes, course=None) -> list[Case]:
    g = np.random.Generator(np.random.PCG64(derive_seed(secret, "lesson5", "records")))
    suites = hidden_suites(course, secret)
    unnamed = _unnamed(secret)
    edges = [record_case(replace(r, id=unnamed(r.id)), s, f"edge#{i}", "hidden", "hidden")
             for i, (r, s) in enumerate(edge_records(g, "h"))]
    cases = edges + real_records(suites, g, "hidden")
    cases += smoothed(cases, lambda rid: unnamed(f"{rid}-smooth"))
    cases += goodput_cases(_suite_records(edges), suites, g, "hidden")
    cases += hidden_release_cases(course, secret, suites)
    r = np.random.Generator(np.random.PCG64(derive_seed(secret, "lesson5", "rule probes")))
    cases += rule_cases(r, _hidden_rule(r), "hidden", RULE_PROBES)
    return cases
