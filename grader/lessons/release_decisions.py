"""Lesson 5's release decisions: a baseline against a candidate over paired seeds, by the rule.

A release case is the paired-seed summaries of two designs and the rule (ReleaseProbe).
Only a case whose decision is settled is fair to grade: the oracle decides as its kind
expects, the same under every correct reading of the rule, and unlike the mistake its kind
is about, so another correct rule is never marked wrong. Each kind of candidate (a real
gain, a gain inside the noise, one bought by rejections, one class regressing, an average
TPOT that hides stalls) is a criterion of its own, and so is each clause the rule probes
isolate (grader/lessons/rule_probes.py: min_gain, a fall, pairing by seed).

A decision criterion is judged on both sides of its decision (SIDES): it rolls back on a
class drop AND ships when the drop is inside the guard, and it scores the lower of its two
sides' shares, so a rule that always answers the same earns nothing.

A side judged only "does not ship" is one whose cases hold a mistake of another
criterion's: a stalls candidate rolls back on a class drop, on a goodput fall or on both,
and which of them fires depends on the secret's workload. The stalls criterion asks only
that the better average TPOT does not ship it; a rule missing the class guard or the
fall clause answers "inconclusive" there, and loses on the criterion that names that.
"""
from __future__ import annotations

import itertools
from dataclasses import dataclass, replace

from grader.engine.codec import persistent
from grader.engine.cases import Case
from grader.engine.checks import CheckContext, Measure, ask_once, check, grade_answers
from grader.course import slo
from grader.engine.oracle import reference_oracle, reference_solution
from reference.shapes import RELEASE_DECISIONS, ReleaseDecision, ReleaseRule, RunSummary

oracle = reference_oracle("lesson5")     # recorded for the public cases in the learner edition


@persistent
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
    """The oracle decides as the kind expects, robustly, and unlike the kind's mistake (asked
    while hidden cases are drawn, in the course: the reference's readings of the rule)."""
    reference = reference_solution("lesson5")
    b, c, rule = probe.baseline, probe.candidate, probe.rule
    decision = reference.decide_release(b, c, rule).decision
    if expect and decision != expect:
        return False
    if probe.kind in GAINS and mean_gain(probe) <= 0:
        return False
    if any(reference.decide_release(b, c, r, **kw).decision != decision for kw, r in _readings(rule)):
        return False
    mistake = MISTAKE.get(probe.kind)
    return mistake is None or reference.decide_release(b, c, rule, **mistake).decision != decision


def mean_gain(probe: ReleaseProbe) -> float:
    """The candidate's mean paired goodput difference, relative to the baseline's goodput."""
    by_seed = {c.seed: c for c in probe.candidate}
    diffs = [slo.run_goodput(by_seed[b.seed]) - slo.run_goodput(b) for b in probe.baseline if b.seed in by_seed]
    base = sum(slo.run_goodput(b) for b in probe.baseline) / len(probe.baseline)
    return (sum(diffs) / len(diffs)) / base if base > 0 else 0.0


def _decision_args(case: Case) -> tuple:
    return (case.inputs.baseline, case.inputs.candidate, case.inputs.rule)


def _show_runs(p: ReleaseProbe) -> str:
    """The figures the rule reads: over the paired runs only, as the README's rule computes
    them, with the seeds it leaves out named (figures over every run would disagree with
    the decision they explain)."""
    seeds = {r.seed for r in p.baseline} & {r.seed for r in p.candidate}
    base, cand = ([r for r in runs if r.seed in seeds] for runs in (p.baseline, p.candidate))
    parts = []
    if not base:
        return "no baseline and candidate runs share a seed"
    for name in [c.cls for c in base[0].classes]:
        before, after = slo.attainment(base, name), slo.attainment(cand, name)
        if before is not None and after is not None:
            parts.append(f"{name} attainment {before:.1%} -> {after:.1%}")
    parts.append(f"rejected {slo.rejected_share(base):.1%} -> {slo.rejected_share(cand):.1%}")
    tpot = [sum(r.mean_tpot_s for r in runs) / len(runs) * 1000 for runs in (base, cand)]
    parts.append(f"mean TPOT {tpot[0]:.1f} -> {tpot[1]:.1f} ms")
    alone = [f"{side} seed {r.seed}" for side, runs in (("baseline", p.baseline), ("candidate", p.candidate))
             for r in runs if r.seed not in seeds]
    if alone:
        parts.append(f"over the {len(seeds)} paired seeds; left out, without a pair: {', '.join(alone)}")
    return "; ".join(parts)


def _judge_decision(case: Case, got: ReleaseDecision) -> str:
    p: ReleaseProbe = case.inputs
    want = oracle.decide_release(p.baseline, p.candidate, p.rule)
    if got.decision not in RELEASE_DECISIONS:
        return f"decision {got.decision!r} is not one of {', '.join(RELEASE_DECISIONS)}"
    if got.decision == want.decision:
        return ""
    why = "; ".join(want.reasons)
    if got.decision == "rollback":
        # The reasons say why it ships or waits, which reads as agreement to a learner who
        # rolled back a small fall ("the gain is below the 2.0% minimum"): the mistake is a
        # rollback with no guard tripped, so name the guards, as the README states them.
        why = (f"no guard trips: no class's attainment falls by more than {p.rule.max_class_drop:.1%}, "
               f"the rejected share rises by no more than {p.rule.max_rejection_rise:.1%}, and goodput "
               f"does not fall beyond the noise band; {why}")
    return f"decided {got.decision}, expected {want.decision}: {why} [{_show_runs(p)}; rule {p.rule}]"


def _judge_not_ship(case: Case, got: ReleaseDecision) -> str:
    if got.decision == "ship":
        return _judge_decision(case, got)
    return "" if got.decision in RELEASE_DECISIONS else _judge_decision(case, got)


# Each release criterion (lesson5.release_<name>): its two sides, each the case families on
# it and how an answer is judged there (the oracle's decision, or only "does not ship").
EXACT, NOT_SHIP = _judge_decision, _judge_not_ship
SIDES = {
    "gain": ((("release-gain",), EXACT), (("rule-fall",), NOT_SHIP)),
    "noise": ((("release-noise", "rule-one-pair", "rule-gain-inside", "rule-gain-inside-near"), EXACT),
              (("rule-clear-gain", "rule-skewed", "rule-many-seeds", "rule-skewed-many"), EXACT)),
    "rejections": ((("release-rejections", "rule-rejections-flat"), EXACT),
                   (("rule-rejections-inside", "rule-rejections-one-class", "rule-rejections-fall",
                     "rule-rejections-high", "rule-rejections-near", "rule-rejections-one-seed"), EXACT)),
    "class": ((("release-class", "rule-class-rejected", "rule-class-zero", "rule-class-flat", "rule-class-failed"),
               EXACT),
              (("rule-class-inside", "rule-class-excluded", "rule-class-inside-low", "rule-class-rise",
                "rule-class-one-seed", "rule-class-near", "rule-classes-reordered"), EXACT)),
    "stalls": ((("release-stalls", "rule-tpot-better"), NOT_SHIP), (("rule-tpot-worse",), EXACT)),
    "min_gain": ((("rule-under-min-gain", "rule-gain-near-min", "rule-gain-unequal-base"), EXACT),
                 (("rule-clear-gain",), EXACT)),
    "fall": ((("rule-fall", "rule-fall-excluded"), EXACT), (("rule-clear-gain", "rule-fall-inside"), EXACT)),
    "pairing": ((("rule-paired", "rule-paired-stray", "rule-paired-windows", "rule-paired-stray-rejects"), EXACT),
                (("rule-paired-small", "rule-no-pair"), EXACT)),
}


def _release_check(sides):
    def measure(ctx: CheckContext, params: dict) -> Measure:
        every = [c for c in ctx.cases if c.family.startswith(("release-", "rule-"))]
        ask_once(ctx, "release", "decide_release", every, _decision_args, ReleaseDecision)
        side_of, judges, mine = {}, {}, []
        for n, (families, judge) in enumerate(sides):
            for case in (c for f in families for c in ctx.family(f)):
                side_of[case.name], judges[case.name] = n, judge
                mine.append(case)
        answers = ask_once(ctx, "release", "decide_release", mine, _decision_args, ReleaseDecision)
        return grade_answers(answers, lambda case, got: judges[case.name](case, got), "release scenarios",
                             by=lambda case: side_of[case.name], worst=True)
    return measure


for _name, _sides in SIDES.items():
    check(f"lesson5.release_{_name}")(_release_check(_sides))
