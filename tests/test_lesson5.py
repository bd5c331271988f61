"""Lesson 5 graded end to end: the verdicts' edges, the release suite, each mistake losing
where it is wrong, and the goodput experiment."""
import dataclasses
import json
import math
import re
import statistics
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

import mutants
from conftest import ROOT, SUBMISSIONS, full, grade, other_than, scores
from grader.course import experiments
from grader.engine.layout import find_course
from grader.engine.errors import InputError
from grader.lessons import lesson5, release_decisions, verdicts
from grader.engine.pipeline import build_cases
from grader.course.trials import KINDS, public_suites, suite_from
from reference.shapes import QUALIFICATIONS, RequestRecord, Slo
from reference.solutions import lesson5 as reference

L5 = SUBMISSIONS / "lesson5"
QUALIFY = {"completed", "largest-gap", "cancels", "rejected-failed"}
RELEASE = {"ship-real-gain", "noise-band", "rejection-guard", "class-guard", "hidden-stalls", "min-gain",
           "goodput-fall", "paired-seeds"}
REFERENCE = ROOT / "reference" / "solutions" / "lesson5.py"
COURSE = find_course(str(ROOT))
ALL = {"completed", "largest-gap", "cancels", "rejected-failed", "goodput", "ship-real-gain",
       "noise-band", "rejection-guard", "class-guard", "hidden-stalls", "min-gain", "goodput-fall",
       "paired-seeds"}


# ---- the verdicts at their edges -------------------------------------------------------------
SLO = Slo(ttft_s=1.0, gap_s=0.25)


def rec(outcome, times=(), cancel=None, arrival=2.0):
    return lesson5.probe_record("r", SLO, arrival, outcome, times, cancel)


@pytest.mark.parametrize("record,verdict", [
    (rec("completed", (3.0, 3.25)), "good"),                        # first token exactly at D1
    (rec("completed", (3.0078125, 3.25)), "late_first_token"),
    (rec("completed", (2.5, 2.75, 3.0)), "good"),                   # every gap exactly gap_s
    (rec("completed", (2.5, 2.5625, 2.625, 3.5, 3.5625)), "slow_tokens"),   # mean gap < gap_s
    (rec("completed", ()), "late_first_token"),                     # zero output tokens
    (rec("completed", (2.5,)), "good"),                             # one output token: no gap
    (rec("completed", (3.5,)), "late_first_token"),
    (rec("cancelled_by_client", (), 2.5), "excluded"),
    (rec("cancelled_by_client", (), 3.0), "excluded"),              # cancel at the moment of the miss
    (rec("cancelled_by_client", (), 3.0078125), "late_first_token"),
    (rec("cancelled_by_client", (2.5, 2.75), 3.0), "excluded"),     # open gap exactly gap_s
    (rec("cancelled_by_client", (2.5, 2.75), 3.0078125), "slow_tokens"),
    (rec("cancelled_by_client", (2.5, 3.0), 3.0625), "slow_tokens"),  # a closed gap missed first
    (rec("cancelled_by_client", (3.25,), 3.3), "late_first_token"),
    (rec("cancelled_by_client", (2.5,), 2.75), "excluded"),          # one token, then exactly gap_s
    (rec("cancelled_by_client", (2.5,), 2.7578125), "slow_tokens"),  # one token, the second late
    (rec("rejected"), "rejected"),
    (rec("failed", (2.5, 2.75)), "failed"),
    (rec("preempted", (2.5,)), "failed"),
])
def test_reference_verdicts_at_the_edges(record, verdict):
    assert reference.qualify(record, None) == verdict
    assert verdicts.explain(record, None, verdict)


def test_an_slo_passed_explicitly_replaces_the_records_own():
    r = rec("completed", (2.5, 2.75, 3.0))
    assert reference.qualify(r, Slo(1.0, 0.125)) == "slow_tokens"
    assert reference.qualify(rec("completed", (3.5,)), Slo(2.0, 0.25)) == "good"
    assert reference.goodput((r, r), Slo(1.0, 0.125), 4.0) == 0.0
    assert reference.goodput((r, r), None, 4.0) == 0.5
    assert reference.goodput((), None, 4.0) == 0.0


def test_hidden_edge_records_cover_every_verdict_and_topic():
    import numpy as np
    edges = lesson5.edge_records(np.random.Generator(np.random.PCG64(1)), "t")
    assert {reference.qualify(r, s) for r, s in edges} == set(QUALIFICATIONS)
    assert {verdicts.topic(r, s) for r, s in edges} == set(verdicts.TOPICS)
    # Dyadic times: the subtraction and the addition forms of every deadline agree.
    for r, s in edges:
        slo = s or r.slo
        if r.token_times:
            assert (r.token_times[0] - r.arrival_s > slo.ttft_s) == (r.token_times[0] > r.arrival_s + slo.ttft_s)



def test_hidden_edge_records_judge_cancels_under_an_explicit_slo_both_ways():
    """Cancels are a code path of their own: under a stricter SLO passed explicitly an
    excluded cancel turns slow, under a looser one a late cancel turns excluded."""
    import numpy as np
    edges = lesson5.edge_records(np.random.Generator(np.random.PCG64(1)), "t")
    moved = {(reference.qualify(r, None), reference.qualify(r, s)) for r, s in edges
             if s is not None and r.outcome == "cancelled_by_client"}
    assert {("excluded", "slow_tokens"), ("late_first_token", "excluded"), ("excluded", "late_first_token"),
            ("slow_tokens", "excluded")} <= moved, moved


# A qualify that reads the record's own SLO in one clause, and the passed SLO elsewhere, must
# lose that clause's criterion on the public probes and on the hidden edges of every secret:
# l5_cancel_tokens_own_slo (first token and open gap at the cancel) and its open-gap half kept
# 17 of 17 when the only cancel with tokens under an explicit SLO was decided by its largest gap.
OWN_SLO_CLAUSE = {"cancel_tokens_own_slo": "cancels", "cancel_open_gap_own_slo": "cancels",
                  "cancel_first_token_own_slo": "cancels", "cancel_largest_gap_own_slo": "cancels",
                  "cancel_queued_own_slo": "cancels", "completed_first_token_own_slo": "deadlines",
                  "completed_gap_own_slo": "deadlines"}


def _load(path: Path):
    import importlib.util
    spec = importlib.util.spec_from_file_location(path.stem, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("name", sorted(OWN_SLO_CLAUSE))
def test_a_clause_that_reads_the_records_own_slo_misjudges_public_and_hidden_edges(name, tmp_path, secret):
    """Expected verdicts are the oracle's: every clause of the cancel rule (and of the completed
    one) has an edge record whose SLO passed decides it otherwise than the record's own."""
    wrong = _load(wrong_file(name, tmp_path))
    public = [c for c in lesson5.public_records(COURSE)]
    hidden = [c for c in lesson5.hidden_cases(secret, COURSE) if c.name.startswith("edge#")]
    for where, cases in (("public", public), ("hidden", hidden)):
        missed = {c.family for c in cases if wrong.qualify(*c.inputs) != verdicts.oracle.qualify(*c.inputs)}
        assert missed == {f"qualify-{OWN_SLO_CLAUSE[name]}"}, (where, missed)


def test_a_cancel_path_on_the_records_own_slo_loses_cancels_on_the_check(tmp_path):
    report = grade("lesson5", wrong_file("cancel_tokens_own_slo", tmp_path), "check")
    got, top = scores(report), full(report)
    assert {k for k in got if got[k] < top[k]} == {"cancels"}
    feedback = next(c.feedback for c in report.criteria if c.id == "cancels")
    assert "expected" in feedback and "passed explicitly" in feedback, feedback

def test_hidden_records_are_named_as_a_runs_records_are(secret):
    """An edge record built as h0-first-at-deadline, or a twin as ...-smooth, would name what
    decides its verdict: a qualify could answer by the id instead of the times. Every hidden
    record is named r and a number, as a run names its requests, the edges' and twins' drawn
    from the secret (one record passed with and without an SLO keeps one name)."""
    hidden = [c.inputs for c in lesson5.hidden_cases(secret, COURSE)
              if c.family.startswith("qualify-") and c.visibility == "hidden"]
    assert hidden and all(re.fullmatch(r"r\d+", r.id) for r, _ in hidden), \
        sorted({r.id for r, _ in hidden if not re.fullmatch(r"r\d+", r.id)})[:5]
    edges = [c.inputs for c in lesson5.hidden_cases(secret, COURSE) if c.name.startswith("edge#")]
    by_id = {}
    for r, _ in edges:
        by_id.setdefault(r.id, set()).add(r)
    assert all(len(records) == 1 for records in by_id.values())
    others = {r.id for r, _ in (c.inputs for c in lesson5.hidden_cases(other_than(secret), COURSE)
                                if c.name.startswith("edge#"))}
    assert set(by_id) != others


# ---- the release suite -------------------------------------------------------------------------
@pytest.fixture(scope="module")
def public_cases():
    return lesson5.public_cases(COURSE)


def test_public_release_suite_is_settled(public_cases):
    """Every public scenario decides as its kind expects, under every correct reading of the
    rule, and differently from the mistake it is about."""
    release = [c for c in public_cases if c.family.startswith("release-")]
    assert sorted(c.inputs.kind for c in release) == sorted(KINDS)
    expect = {t.kind: t.expect for t in public_suites(COURSE)[0].trials}
    for c in release:
        assert release_decisions.settled(c.inputs, expect[c.inputs.kind]), c.name
        # ... and a case is never settled for a decision the oracle does not make.
        for other in ("ship", "inconclusive", "rollback"):
            if other != expect[c.inputs.kind]:
                assert not release_decisions.settled(c.inputs, other), (c.name, other)


def test_the_correct_readings_of_a_rule_are_each_threshold_ten_percent_either_way():
    """A case is settled when it decides alike under both deviations, both poolings, and each
    threshold at 0.9 and 1.1 times its value, the others as given (the README's latitude)."""
    from reference.shapes import ReleaseRule
    rule = ReleaseRule(min_gain=0.02, noise_k=2.0, max_class_drop=0.05, max_rejection_rise=0.04)
    moved = {("min_gain", 0.018), ("min_gain", 0.022), ("noise_k", 1.8), ("noise_k", 2.2),
             ("max_class_drop", 0.045), ("max_class_drop", 0.055),
             ("max_rejection_rise", 0.036), ("max_rejection_rise", 0.044)}
    as_given = dataclasses.astuple(rule)
    seen = {}
    for kw, r in release_decisions._readings(rule):
        changed = [(f.name, round(v, 9)) for f, v, g in zip(dataclasses.fields(r), dataclasses.astuple(r), as_given)
                   if v != g]
        assert len(changed) <= 1, changed
        seen.setdefault((kw["stdev"], kw["pool"]), set()).add(changed[0] if changed else None)
    assert seen == {(s, p): moved | {None} for s in ("sample", "population") for p in ("runs", "per_run")}


def test_a_gain_a_hair_over_min_gain_is_not_settled():
    """Goodput 100 -> 102.1 req/s on every seed (no noise): +2.1% ships under min_gain 2%
    and waits under 2.2%, a correct reading, so the case would mark a correct rule wrong."""
    from reference.shapes import ClassSummary, ReleaseRule, RunSummary
    runs = lambda good: tuple(RunSummary(s, 10.0, (ClassSummary("chat", 2000, good=good),))   # noqa: E731
                              for s in range(4))
    edge = release_decisions.ReleaseProbe("t", "gain", "", runs(1000), runs(1021), ReleaseRule())
    assert reference.decide_release(edge.baseline, edge.candidate, edge.rule).decision == "ship"
    assert not release_decisions.settled(edge, "ship")
    assert release_decisions.settled(dataclasses.replace(edge, candidate=runs(1050)), "ship")   # +5%


def test_a_candidates_mean_gain_is_over_paired_seeds_relative_to_the_baselines_goodput():
    from reference.shapes import ClassSummary, ReleaseRule, RunSummary
    run = lambda seed, good: RunSummary(seed, 10.0, (ClassSummary("a", 20, good=good),))   # noqa: E731
    # Goodputs 0.4 and 0.6 against 0.5 and 0.9 on the same seeds; seed 3 has no pair.
    probe = release_decisions.ReleaseProbe("t", "gain", "", (run(1, 4), run(2, 6)),
                                           (run(1, 5), run(2, 9), run(3, 20)), ReleaseRule())
    assert release_decisions.mean_gain(probe) == pytest.approx(((0.1 + 0.3) / 2) / 0.5)
    # A baseline that served nothing gains nothing measurable (and is not divided by).
    nothing = dataclasses.replace(probe, baseline=(run(1, 0), run(2, 0)))
    assert release_decisions.mean_gain(nothing) == 0.0
    assert not release_decisions.settled(nothing, "")


def test_stalls_scenario_improves_the_mean_tpot_it_should_not_trust(public_cases):
    probe = next(c.inputs for c in public_cases if c.family == "release-stalls")
    tpot = lambda runs: sum(r.mean_tpot_s for r in runs) / len(runs)
    assert tpot(probe.candidate) < tpot(probe.baseline)
    assert sum(c.slow_tokens for r in probe.candidate for c in r.classes) > 0
    assert reference.decide_release(probe.baseline, probe.candidate, probe.rule).decision == "rollback"


def test_readme_numbers_are_the_reference_s(public_cases):
    """The lesson's worked decision and its tables are computed, not typed in."""
    readme = (ROOT / "assignments" / "lesson5" / "README.md").read_text()
    probes = {c.inputs.kind: c.inputs for c in public_cases if c.family.startswith("release-")}
    gain = probes["gain"]
    for b, c in zip(gain.baseline, gain.candidate):
        good = lambda r: sum(k.good for k in r.classes)
        row = (f"| {b.seed} | {b.window_s:.3f} | {good(b)} | {reference.run_goodput(b):.3f} | {good(c)} | "
               f"{reference.run_goodput(c):.3f} | {reference.run_goodput(c) - reference.run_goodput(b):+.3f} |")
        assert row in readme, row
    for kind, probe in probes.items():
        decision = reference.decide_release(probe.baseline, probe.candidate, probe.rule)
        base = sum(reference.run_goodput(r) for r in probe.baseline) / 4
        cand = sum(reference.run_goodput(r) for r in probe.candidate) / 4
        line = f"| `{kind}` |"
        row = next(l for l in readme.splitlines() if l.startswith(line))
        gain = release_decisions.mean_gain(probe)
        assert f"{base:.3f} → {cand:.3f} ({gain:+.1%})".replace("-", "−") in row, row
        assert f"| {decision.decision} |" in row, row
    # The worked records' table alone: the table of verdicts above it has rows that begin
    # `rejected` and `failed` too, and a row may name several records (`failed`, `preempted`).
    table = readme[readme.index("## Worked records"):readme.index("## Goodput")]
    verdict_of = {name: row.split(" | ")[2] for row in table.splitlines() if row.startswith("| `")
                  for name in re.findall(r"`([^`]+)`", row.split(" | ")[0])}
    records = {c.inputs[0].id: c.inputs for c in lesson5.public_records(COURSE)}
    assert verdict_of and verdict_of.keys() <= records.keys(), verdict_of.keys() - records.keys()
    for name, verdict in verdict_of.items():
        assert verdict == f"`{reference.qualify(*records[name])}`", (name, verdict)


def nearest_edge_s(r) -> float:
    """How close a record's deciding times come to their deadlines, worked out here: the
    first token against arrival + ttft, each gap against the gap deadline, and a client's
    cancel against both."""
    due, gap = r.arrival_s + r.slo.ttft_s, r.slo.gap_s
    t = r.token_times
    near = ([t[0] - due] if t else []) + [b - a - gap for a, b in zip(t, t[1:])]
    if r.outcome == "cancelled_by_client" and r.cancel_s is not None:
        near += [r.cancel_s - due] + ([r.cancel_s - t[-1] - gap] if t else [])
    return min((abs(x) for x in near), default=math.inf)


def test_public_and_hidden_records_reach_every_topic_clear_of_edges(public_cases, secret):
    families = {c.family for c in public_cases}
    assert {f"qualify-{t}" for t in verdicts.TOPICS} <= families
    hidden = [c for c in build_cases("lesson5", COURSE, secret) if c.visibility == "hidden"]
    real = [c.inputs[0] for c in [*public_cases, *hidden]
            if c.family.startswith("qualify-") and c.inputs[0].scope != "probe"]
    assert len(real) > 20 and {r.outcome for r in real} >= {"completed", "cancelled_by_client"}
    # A microsecond from every deadline: float rounding never decides a real record's verdict.
    assert min(nearest_edge_s(r) for r in real) > 1e-6


def test_clear_of_edges_refuses_a_record_a_hair_from_a_deadline():
    slo = Slo(ttft_s=1.0, gap_s=0.1)
    def record(times, **kw):
        return RequestRecord("r", "s", "c", slo, 10.0, kw.pop("outcome", "completed"), 8, 4, len(times),
                             tuple(times), **kw)
    assert verdicts.clear_of_edges(record([10.5, 10.55, 10.6]))
    assert not verdicts.clear_of_edges(record([11.0 + 5e-7, 11.05]))          # the first token
    assert not verdicts.clear_of_edges(record([10.5, 10.6 - 5e-7]))           # a gap
    assert verdicts.clear_of_edges(record([11.0 + 2e-6, 11.05]))
    assert not verdicts.clear_of_edges(record([10.5], outcome="cancelled_by_client", cancel_s=10.6 + 5e-7))
    assert not verdicts.clear_of_edges(record([], outcome="cancelled_by_client", cancel_s=11.0 - 5e-7))
    assert verdicts.clear_of_edges(record([], outcome="cancelled_by_client", cancel_s=10.9))


def test_hidden_cases_depend_on_the_secret(secret):
    one = build_cases("lesson5", COURSE, secret)
    again = build_cases("lesson5", COURSE, secret)
    hidden = lambda cases: [c.digest for c in cases if c.visibility == "hidden"]
    assert hidden(one) == hidden(again)
    for kind in KINDS:
        assert any(c.family == f"release-{kind}" and c.visibility == "hidden" for c in one), kind
    # Another secret draws other workloads and other edge records (no worker runs needed).
    from grader.engine.cases import digest_of
    from grader.course.trials import hidden_suites

    # The edge records as the grade draws them (not drawn again here from a seed of this
    # test's making, which would hold whatever seed the lesson used).
    def drawn(secret, cases):
        trials = [digest_of(t.identity()) for s in hidden_suites(COURSE, secret) for t in s.trials]
        return set(trials), {c.digest for c in cases if c.visibility == "hidden" and c.name.startswith("edge#")}
    other = build_cases("lesson5", COURSE, other_than(secret))
    (t1, e1), (t2, e2) = drawn(secret, one), drawn(other_than(secret), other)
    assert e1 and t1.isdisjoint(t2) and e1.isdisjoint(e2)


def test_a_suite_with_an_unknown_candidate_kind_is_an_input_error(tmp_path):
    src = (ROOT / "assignments" / "lesson5" / "public" / "release.suite.yaml").read_text()
    bad = tmp_path / "bad.suite.yaml"
    bad.write_text(src.replace("  gain:\n", "  gains:\n").replace(
        "workload: release.yaml", f"workload: {ROOT / 'assignments/lesson5/public/release.yaml'}"))
    with pytest.raises(InputError, match="candidates.gains"):
        suite_from(bad, COURSE)


# ---- the rule probes ---------------------------------------------------------------------------------
def _module(path: Path):
    import importlib.util
    spec = importlib.util.spec_from_file_location(path.stem, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


# Each rule that kept full marks before the rule probes, and the probes its clause decides.
ISOLATED = {"ignores_min_gain": "under-min-gain", "no_fall_rollback": "fall", "pairs_by_position": "paired",
            "unpaired_band": "paired", "attainment_without_rejected": "class-rejected",
            "attainment_counts_excluded": "class-excluded", "band_one_pair_zero": "one-pair",
            "base_goodput_all_runs": "paired-stray", "class_guard_truthy": "class-zero",
            "class_guard_relative": "class-inside-low", "class_guard_goodput": "class-inside-low",
            "rejection_per_class": "rejections-one-class", "rollback_any_fall": "fall-inside",
            "band_over_n": "gain-inside", "pairs_by_sorted_seed": "paired",
            "rejection_guard_both_ways": "rejections-fall", "goodput_per_request": "paired-windows",
            "rejection_guard_vs_allowance": "rejections-high", "class_guard_per_seed": "class-one-seed",
            "median_difference": "skewed",
            # Guards read only beside a gain, or on one class by its name or its size: right
            # on every probe above, whose guards all trip beside a clear gain in the small class.
            "guards_when_rose": "class-flat", "guards_gate_ship": "class-flat",
            "class_guard_interactive_only": "class-flat", "class_guard_smallest_class": "class-flat",
            # Outcomes no probe above moved: failed requests, and excluded ones in goodput.
            "attainment_without_failed": "class-failed", "goodput_counts_excluded": "fall-excluded",
            "tpot_breaks_ties": "tpot-better",
            # A run by its seed and a class by its name, in the guards too: kept 17 of 17 before
            # paired-stray-rejects and classes-reordered (every probe's strays rejected nothing,
            # every run listed interactive, then batch).
            "rejection_guard_all_runs": "paired-stray-rejects", "class_guard_by_position": "classes-reordered",
            # Every probe and suite paired four seeds (or one): a band over four kept 17 of 17.
            "band_over_four_seeds": "many-seeds",
            # A rejection guard read seed by seed, as class_guard_per_seed reads the class guard:
            # every probe's rejections were alike on every seed (17 of 17 before rejections-one-seed).
            "rejection_guard_per_seed": "rejections-one-seed",
            # Two sides that share no seed: no probe had them (17 of 17 before no-pair).
            "no_pair_raises": "no-pair", "no_pair_by_position": "no-pair",
            # The extreme seeds trimmed from nine, and the gain as the mean of the seeds' own
            # ratios: kept 17 of 17 before skewed-many and gain-unequal-base.
            "trim_extreme": "skewed-many", "gain_mean_of_ratios": "gain-unequal-base"}
# Kinds about the same clause as another: a pairing mistake may decide either wrongly, and
# a class guard measured on another quantity may misjudge any shape of class change. A rule
# that rolls back on any fall also rolls back where the paired differences average to a
# hair below zero (paired-small's).
SAME_CLAUSE = {"paired": ("paired-small", "paired-stray", "one-pair", "paired-windows", "paired-stray-rejects",
                          "no-pair"),
               "class-inside-low": ("class-excluded", "class-zero", "class-rejected", "class-near", "class-failed"),
               "fall-inside": ("paired-small",),
               # The same clause near its threshold: a mistake about min_gain, the band or the
               # per-class rejections misjudges the near probe too.
               "under-min-gain": ("gain-near-min", "gain-unequal-base"), "gain-inside": ("gain-inside-near",),
               # The median, and a band over four seeds, misjudge nine skewed seeds too.
               "skewed": ("skewed-many",), "many-seeds": ("skewed-many",),
               "rejections-one-class": ("rejections-near",), "fall": ("fall-excluded",)}
# A class guard on each class's goodput fires on any fall of a class's goodput, and a fall
# inside the band is one (no probe can fall overall and keep every class's goodput): it
# may also misjudge the fall-inside probes, as a random secret showed (d750f7f225ae1bf8).
ALSO_MISJUDGES = {"class_guard_goodput": ("fall-inside",),
                  # A band half as wide misjudges a fall inside the band as a gain inside it.
                  "band_over_n": ("fall-inside",),
                  # Guards read only beside a gain miss the rejection guard's flat probe too.
                  "guards_when_rose": ("rejections-flat",), "guards_gate_ship": ("rejections-flat",),
                  # Good requests over the counted ones for goodput: fall-excluded's cancels shrink
                  # what it divides by, and its fall reads as a rise.
                  "goodput_per_request": ("fall-excluded",)}


def test_rule_probes_decide_as_built_and_each_catches_its_mistake(secret, tmp_path):
    """Under any secret: every hidden rule probe is decided as its kind says, under every
    correct reading; alt_correct agrees; each of the five wrong rules misses every probe of
    the clause it gets wrong."""
    from grader.lessons import rule_probes
    # The probes a grade draws, not drawn again here from a seed of this test's making.
    cases = [c for c in lesson5.hidden_cases(secret, COURSE) if c.family.startswith("rule-")]
    assert {c.inputs.kind for c in cases} == set(rule_probes.KINDS) >= set(ISOLATED.values())
    assert len(cases) == len(rule_probes.KINDS) * lesson5.RULE_PROBES
    alt = _module(L5 / "alt_correct.py")
    for c in cases:
        p = c.inputs
        assert rule_probes.robust(p.baseline, p.candidate, p.rule, rule_probes.EXPECT[p.kind]), c.name
        assert alt.decide_release(p.baseline, p.candidate, p.rule).decision == rule_probes.EXPECT[p.kind]
    for name, kind in ISOLATED.items():
        wrong = _module(wrong_file(name, tmp_path))
        for c in cases:
            p = c.inputs
            try:
                decided = wrong.decide_release(p.baseline, p.candidate, p.rule).decision
            except statistics.StatisticsError:
                decided = None      # an unpaired band has no spread with one run a side
            if p.kind == kind:
                assert decided != rule_probes.EXPECT[kind], (name, c.name)
            elif p.kind not in SAME_CLAUSE.get(kind, ()) + ALSO_MISJUDGES.get(name, ()):
                # Only where it is wrong: another kind's probe, decided by another clause.
                assert decided == rule_probes.EXPECT[p.kind], (name, c.name)


def test_a_change_an_unpaired_band_swallows_is_kept_only_as_a_pairing_probe():
    """A paired probe's gain is beyond its paired band and inside the band of two
    independent samples: drawn as any other kind it would let the pairing mistake lose
    that kind's criterion too, so it is kept only where pairing is the point."""
    import numpy as np
    from grader.lessons import rule_probes
    rule = lesson5._hidden_rule(np.random.Generator(np.random.PCG64(3)))
    g = np.random.Generator(np.random.PCG64(4))
    for _ in range(5):
        base, cand = rule_probes.draw("paired", g, rule, seed0=int(g.integers(1, 10_000)))
        assert rule_probes.isolates("paired", base, cand, rule)
        for kind in ("clear-gain", "class-inside", "rejections-inside", "tpot-worse", "class-excluded",
                     "class-zero", "class-inside-low", "rejections-one-class"):
            assert not rule_probes.isolates(kind, base, cand, rule), kind
        assert not rule_probes.isolates("fall", cand, base, rule)   # the same change, as a fall


def test_every_rule_probes_class_counts_add_up_to_its_requests():
    """A learner may count a class's requests from its verdicts: in every run of every kind,
    good, late, slow, rejected, failed and excluded are none negative and add up to it."""
    import numpy as np
    from grader.lessons import rule_probes
    rule = lesson5._hidden_rule(np.random.Generator(np.random.PCG64(3)))
    g = np.random.Generator(np.random.PCG64(6))
    for kind in rule_probes.KINDS:
        for runs in rule_probes.draw(kind, g, rule, seed0=int(g.integers(1, 10_000))):
            for c in (c for r in runs for c in r.classes):
                counts = (c.good, c.late_first_token, c.slow_tokens, c.rejected, c.failed, c.excluded)
                assert min(counts) >= 0 and sum(counts) == c.requests, (kind, c)


def test_a_stray_baseline_run_is_kept_only_where_the_baselines_mean_is_the_point():
    """paired-stray's gain is beyond the band and min_gain, paired; only the stray run, in
    the baseline's mean, takes it under min_gain. Without the stray the mistake would ship
    it too: that probe says nothing of the mistake and is not kept."""
    import numpy as np
    from grader.lessons import rule_probes
    rule = lesson5._hidden_rule(np.random.Generator(np.random.PCG64(3)))
    g = np.random.Generator(np.random.PCG64(4))
    for _ in range(5):
        base, cand = rule_probes.draw("paired-stray", g, rule, seed0=int(g.integers(1, 10_000)))
        assert rule_probes.isolates("paired-stray", base, cand, rule)
        assert {b.seed for b in base} - {c.seed for c in cand} == {base[-1].seed}
        assert not rule_probes.isolates("paired-stray", base[:-1], cand, rule)


def test_an_excluded_probe_keeps_its_class_attainment_among_the_requests_that_count():
    """class-excluded's class loses a quarter of its requests to client cancels, taken from
    its good and its other requests alike: good / (requests - excluded) stays within the
    rounding of one request of what it was (the mistake, counting the excluded, sees it fall)."""
    import numpy as np
    from grader.lessons import rule_probes
    rule = lesson5._hidden_rule(np.random.Generator(np.random.PCG64(3)))
    g = np.random.Generator(np.random.PCG64(5))
    for _ in range(5):
        base, cand = rule_probes.draw("class-excluded", g, rule, seed0=int(g.integers(1, 10_000)))
        before, after = ([next(c for c in r.classes if c.cls == "interactive") for r in runs]
                         for runs in (base, cand))
        assert all(c.excluded == 0 for c in before) and all(c.excluded >= c.requests // 4 for c in after)
        counted = after[0].requests - after[0].excluded
        assert abs(after[0].good / counted - before[0].good / before[0].requests) <= 0.5 / counted


def test_constant_decisions_and_verdicts_earn_nothing(tmp_path, secret):
    """A decision criterion is judged on both sides and a verdict criterion weighs each
    verdict alike: always "rollback" (3 of 14 before) and always "inconclusive" (2 of 14)
    earn nothing, nor does one verdict for every record."""
    source = (L5 / "alt_correct.py").read_text()
    for decision in ("rollback", "inconclusive", "ship"):
        path = tmp_path / f"always_{decision}.py"
        path.write_text(source + f"\n\ndef decide_release(baseline_runs, candidate_runs, rule):\n"
                                 f"    return ReleaseDecision({decision!r})\n")
        got = scores(grade("lesson5", path, "grade", secret))
        release = {k: v for k, v in got.items() if k in RELEASE}
        assert release.keys() == RELEASE and not any(release.values()), (decision, release)
    for verdict in ("good", "slow_tokens", "late_first_token", "excluded", "rejected", "failed"):
        path = tmp_path / f"always_{verdict}.py"
        path.write_text(source + f"\n\ndef qualify(record, slo):\n    return {verdict!r}\n")
        got = scores(grade("lesson5", path, "check"))
        qualify = {k: v for k, v in got.items() if k in QUALIFY}
        assert qualify.keys() == QUALIFY and not any(qualify.values()), (verdict, qualify)


# ---- grading ----------------------------------------------------------------------------------------
# Every expectation of a grade holds under each of conftest's secrets (the `secret` fixture).
@pytest.fixture(scope="module")
def reference_grade(secret):
    return grade("lesson5", REFERENCE, "grade", secret)


def test_reference_full_marks_public_and_hidden(reference_grade):
    assert reference_grade.score == reference_grade.max_score == 17
    assert any(c["visibility"] == "hidden" for c in reference_grade.cases)
    public = grade("lesson5", REFERENCE, "check")
    assert public.score == public.max_score
    assert {c.id for c in public.criteria} == ALL


@pytest.mark.parametrize("name", ["alt_correct", "alt_events"])
def test_different_correct_solution_keeps_full_marks(name, reference_grade, secret):
    report = grade("lesson5", L5 / f"{name}.py", "grade", secret)
    assert report.score == report.max_score, [c.feedback for c in report.criteria if not c.passed]


def wrong_file(name: str, folder) -> Path:
    """A wrong solution: alt_correct.py with the mutations tests/submissions/lesson5/mutants.yaml lists."""
    return mutants.wrong_file("lesson5", name, folder)


# Which criterion each wrong solution must lose; every other criterion keeps full marks.
WRONG = {
    "average_tpot": "largest-gap",
    "cancel_as_good": "cancels",
    "cancel_excluded": "cancels",
    # A deadline passed with no token: the gap still open when the client cancelled.
    "cancel_open_gap_ignored": "cancels",
    "rejections_excluded": "rejected-failed",
    "mean_only": "noise-band",
    "no_class_guard": "class-guard",
    "no_rejection_guard": "rejection-guard",
    "first_token_strict": "completed",
    "own_slo_only": "completed",
    "goodput_completed": "goodput",
    # Five rules that kept full marks before the rule probes isolated their clause.
    "ignores_min_gain": "min-gain",
    "no_fall_rollback": "goodput-fall",
    "pairs_by_position": "paired-seeds",
    "unpaired_band": "paired-seeds",
    "attainment_without_rejected": "class-guard",
    # Rules right on every probe above, each wrong on a rule probe of its own clause.
    "attainment_counts_excluded": "class-guard",
    "band_one_pair_zero": "noise-band",
    "base_goodput_all_runs": "paired-seeds",
    "class_guard_truthy": "class-guard",
    "class_guard_relative": "class-guard",
    "class_guard_goodput": "class-guard",
    "rejection_per_class": "rejection-guard",
    "rollback_any_fall": "goodput-fall",
    # An explicit SLO honoured on completed records and not on cancelled ones.
    "cancel_own_slo": "cancels",
    # The record's own SLO for a cancel's first token and open gap, or the open gap alone:
    # kept 17 of 17 before the edges passed an SLO that decides each cancel clause.
    "cancel_tokens_own_slo": "cancels",
    "cancel_open_gap_own_slo": "cancels",
    "cancel_first_token_own_slo": "cancels",
    # Rules right on every probe above, each wrong on a rule probe drawn for it: a band of
    # s / n, the runs paired by sorted position, a rejection guard that trips on a fall too
    # or on the candidate's share alone, a run's goodput taken per request instead of per
    # second of its window.
    "band_over_n": "noise-band",
    "pairs_by_sorted_seed": "paired-seeds",
    "rejection_guard_both_ways": "rejection-guard",
    "rejection_guard_vs_allowance": "rejection-guard",
    "goodput_per_request": "paired-seeds",
    # A class guard read seed by seed: lost noise-band alone before class-one-seed.
    "class_guard_per_seed": "class-guard",
    # The median of the paired differences for their mean: kept 17 of 17 before skewed.
    "median_difference": "noise-band",
    # Guards read only where goodput rose, or only to stop a ship: kept 17 of 17 (the first)
    # before class-flat and rejections-flat; and a class guard on one class, chosen by its name
    # or as the smallest: kept 17 of 17 before class-flat, whose larger class pays.
    "guards_when_rose": "class-guard",
    "guards_gate_ship": "class-guard",
    "class_guard_interactive_only": "class-guard",
    "class_guard_smallest_class": "class-guard",
    # One token read as no gap on a cancel too: kept 17 of 17 before the one-token cancels.
    "cancel_one_token_no_gap": "cancels",
    # Failed requests left out of a class's attainment, and excluded ones counted in a run's
    # goodput: kept 17 of 17 before class-failed and fall-excluded (no probe had either move).
    "attainment_without_failed": "class-guard",
    "goodput_counts_excluded": "goodput-fall",
    # The mean TPOT breaking a tie: no inconclusive probe had a better TPOT before tpot-better.
    "tpot_breaks_ties": "hidden-stalls",
    # An unpaired run counted in the rejection guard, and classes compared by their place in
    # the summary: kept 17 of 17 on the check and the grade before paired-stray-rejects and
    # classes-reordered.
    "rejection_guard_all_runs": "paired-seeds",
    "class_guard_by_position": "class-guard",
    # The standard error over four seeds whatever their number: kept 17 of 17 before many-seeds.
    "band_over_four_seeds": "noise-band",
    # The rejection guard seed by seed: kept 17 of 17 before rejections-one-seed.
    "rejection_guard_per_seed": "rejection-guard",
    # Two sides that share no seed paired by position: kept 17 of 17 before no-pair (so did a
    # rule that raises there, no_pair_raises: its feedback names the exception, not a decision).
    "no_pair_by_position": "paired-seeds",
    # The extreme seeds trimmed, and the mean of the seeds' ratios: kept 17 of 17 before
    # skewed-many and gain-unequal-base.
    "trim_extreme": "noise-band",
    "gain_mean_of_ratios": "min-gain",
}
# What else a wrong solution may lose: an unpaired band is as wide as the seeds' spread,
# which swamps the real suite's gain and a fall alike; and, under some secrets and not
# others, a cancelled record whose largest gap misses while its mean gap does not lands in
# the gaps topic (its verdict hinges on the gap reading), and excluding every cancel gets it
# wrong there too.
# A rule that ships on the mean alone also ships a paired probe's gain inside its band where
# a secret's rule leaves min_gain below that gain.
# An unpaired band has no spread with one run a side: it fails on the one-pair probe. A rule
# that rolls back on any fall rolls back paired-small's differences, which average to a hair
# below zero under some secrets. A rule with no band at all rolls back a fall inside the band
# (fall-inside) as surely as it ships a gain inside it; and a class guard taken as a share of
# the attainment fires on a real suite's noise candidate whose interactive class is low and
# dips a few points.
MAY_ALSO = {"unpaired_band": {"ship-real-gain", "goodput-fall", "noise-band"}, "cancel_excluded": {"largest-gap"},
            "mean_only": {"paired-seeds", "goodput-fall"}, "rollback_any_fall": {"paired-seeds"},
            "class_guard_relative": {"noise-band"},
            # A class's good requests per second held to a guard in attainment points: a real
            # noise candidate's class can lose more than 0.05 req/s by its seeds alone (secret
            # fad15ba097c9771f: release#2/noise rolled back, batch attainment 73.4% -> 72.3%).
            "class_guard_goodput": {"goodput-fall", "noise-band"},
            # An explicit SLO ignored everywhere is ignored on the cancels passed one too.
            "own_slo_only": {"cancels"},
            # A band half as wide rolls back a fall inside the band as it ships a gain inside it.
            "band_over_n": {"goodput-fall"},
            # A class guard read seed by seed rolls back a real noise candidate whose class dips
            # on one seed, and, by the secret, a real gain's.
            "class_guard_per_seed": {"noise-band", "ship-real-gain"},
            # Goodput per request for per second: real runs' windows differ from seed to seed,
            # so under some secrets a real noise candidate's gain, so reckoned, clears its band
            # (secret 1cbe031001d818c3: release#0/noise shipped), and a real gain's stays
            # inside it (secret cbccab4e6e3a2456: release#1/gain, +26% per second, left
            # inconclusive).
            "goodput_per_request": {"noise-band", "ship-real-gain", "goodput-fall"},
            # The median of the differences: a real suite's seeds can be skewed too (secret
            # a1b2c3d4e5f60718: release#1/gain's median inside its band, left inconclusive).
            "median_difference": {"ship-real-gain"},
            # A guard left unread where goodput does not rise: the rejection guard's too.
            "guards_when_rose": {"rejection-guard"}, "guards_gate_ship": {"rejection-guard"},
            # The excluded counted as good: a real candidate's clients cancel more or fewer
            # requests than the baseline's, which moves its goodput so reckoned (secret
            # 4aa5f649a5d89892: a real noise candidate's gain so reckoned cleared its band).
            "goodput_counts_excluded": {"noise-band", "ship-real-gain"}}


@pytest.mark.parametrize("name", sorted(WRONG))
def test_wrong_solution_loses_exactly_where_it_is_wrong(name, reference_grade, tmp_path, secret):
    report = grade("lesson5", wrong_file(name, tmp_path), "grade", secret)
    got, top = scores(report), full(report)
    lost = {k for k in got if got[k] < top[k]}
    assert WRONG[name] in lost and lost <= {WRONG[name]} | MAY_ALSO.get(name, set()), f"{name} lost {lost}"
    feedback = next(c.feedback for c in report.criteria if c.id == WRONG[name])
    assert "expected" in feedback, feedback


def test_a_class_guard_that_trips_on_a_rise_loses_class_guard(public_cases, tmp_path, secret):
    """A class guard on any change of attainment rolls back a class that rises beyond the
    guard (the class-rise probe, on class-guard's quiet side). Every gain raises some class's
    attainment, so where a scenario's gain raises one beyond the guard the mistake costs that
    scenario's criterion too: only class-guard is asserted."""
    wrong = _module(wrong_file("class_guard_both_ways", tmp_path))
    rises = [c.inputs for c in public_cases if c.family == "rule-class-rise"]
    assert rises and all(wrong.decide_release(p.baseline, p.candidate, p.rule).decision == "rollback"
                         and reference.decide_release(p.baseline, p.candidate, p.rule).decision == "ship"
                         for p in rises)
    report = grade("lesson5", wrong_file("class_guard_both_ways", tmp_path), "grade", secret)
    assert scores(report)["class-guard"] < full(report)["class-guard"]
    feedback = next(c.feedback for c in report.criteria if c.id == "class-guard")
    assert "expected ship" in feedback, feedback


# A secret whose hidden suite holds a stalls candidate that rolls back on its interactive
# class alone (its goodput fall stays inside the band): found by a random-secret run, when
# the stalls criterion still asked for the oracle's exact decision and so charged a missing
# class guard twice.
STALLS_BY_CLASS_ONLY = bytes.fromhex("97a613a1aaf54df6")


def test_hidden_stalls_asks_only_that_the_better_tpot_does_not_ship(tmp_path):
    cases = [c for c in build_cases("lesson5", COURSE, STALLS_BY_CLASS_ONLY) if c.family == "release-stalls"]
    unguarded = [reference.decide_release(c.inputs.baseline, c.inputs.candidate, c.inputs.rule,
                                          class_guard=False).decision for c in cases]
    assert "inconclusive" in unguarded                                  # the premise of this secret
    for name, loses in (("no_class_guard", "class-guard"), ("no_fall_rollback", "goodput-fall")):
        report = grade("lesson5", wrong_file(name, tmp_path), "grade", STALLS_BY_CLASS_ONLY)
        got, top = scores(report), full(report)
        assert got["hidden-stalls"] == top["hidden-stalls"] and got[loses] < top[loses], name
    # Trusting the dashboard's TPOT over a rollback ships the stalls candidate: that costs it
    # (every stalls case; the tpot-better probes on the same side, which it leaves
    # inconclusive, keep it above 0).
    report = grade("lesson5", wrong_file("trusts_mean_tpot", tmp_path), "grade", STALLS_BY_CLASS_ONLY)
    assert scores(report)["hidden-stalls"] < full(report)["hidden-stalls"] / 2
    feedback = next(c.feedback for c in report.criteria if c.id == "hidden-stalls")
    assert "decided ship, expected rollback" in feedback, feedback


def test_reasons_given_as_one_string_are_read_as_one_reason(tmp_path, secret):
    """The reasons are for people and no criterion grades them: ReleaseDecision("ship", "a
    gain") instead of a tuple of reasons was refused, and every release criterion lost the
    right decision it came with (8 of 17). A reason of another type than text is still
    refused, saying so."""
    source = (L5 / "alt_correct.py").read_text()
    one = re.compile(r'\(("[^"]*"),\)\)')       # ("not enough evidence",)) -> "not enough evidence")
    assert source.count(", tuple(reasons))") == 1 and len(one.findall(source)) == 3
    path = tmp_path / "reasons_as_str.py"
    path.write_text(one.sub(r"\1)", source.replace(", tuple(reasons))", ', "; ".join(reasons))')))
    for mode in ("check", "grade"):
        report = grade("lesson5", path, mode, secret)
        assert scores(report) == full(report), (mode, [c.feedback for c in report.criteria if not c.passed])
    path = tmp_path / "reasons_as_numbers.py"
    path.write_text(source.replace(", tuple(reasons))", ", tuple(len(r) for r in reasons))"))
    report = grade("lesson5", path, "check")
    feedback = next(c.feedback for c in report.criteria if c.id == "class-guard")
    assert scores(report)["class-guard"] < full(report)["class-guard"]
    assert "ReleaseDecision.reasons[0]: expected str, got int" in feedback, feedback


# A `>=` where the README says a time exactly at its deadline is in time (old, new, the
# criterion it costs): each kept 16.7 to 16.8 of 17, the records on a deadline counting one
# record each among the many of their verdict.
AT_THE_DEADLINE = {
    "cancel_at_first_deadline_late": ("waited > slo.ttft_s else", "waited >= slo.ttft_s else", "cancels"),
    "cancel_at_gap_deadline_late": ("record.cancel_s - times[-1] > slo.gap_s",
                                    "record.cancel_s - times[-1] >= slo.gap_s", "cancels"),
    "gap_at_limit_slow": ('_worst_gap(times) > slo.gap_s else "good"', '_worst_gap(times) >= slo.gap_s else "good"',
                          "completed"),
}


@pytest.mark.parametrize("name", sorted(AT_THE_DEADLINE))
def test_a_time_exactly_at_its_deadline_weighs_as_a_clause_of_its_verdict(name, tmp_path, secret):
    old, new, loses = AT_THE_DEADLINE[name]
    source = (L5 / "alt_correct.py").read_text()
    assert source.count(old) == 1
    path = tmp_path / f"{name}.py"
    path.write_text(source.replace(old, new))
    for mode in ("check", "grade"):
        report = grade("lesson5", path, mode, secret)
        got, top = scores(report), full(report)
        assert {k for k in got if got[k] < top[k]} == {loses}, (mode, got)
        assert top[loses] - got[loses] >= 0.5, (mode, got[loses])
        feedback = next(c.feedback for c in report.criteria if c.id == loses)
        assert "expected" in feedback and ("in time" in feedback or "before any deadline" in feedback), feedback


def test_goodput_that_calls_a_wrong_qualify_is_not_charged_twice(reference_grade, tmp_path):
    report = grade("lesson5", wrong_file("average_tpot", tmp_path), "check")
    assert scores(report)["goodput"] == full(report)["goodput"]
    wrong = grade("lesson5", wrong_file("goodput_completed", tmp_path), "check")
    feedback = next(c.feedback for c in wrong.criteria if c.id == "goodput")
    assert "your qualify counts" in feedback and "good requests /" in feedback


def test_a_qualify_that_fails_on_zero_tokens_costs_completed_alone(tmp_path, secret):
    """Its goodput, built on it, raises on every set that holds a record with no tokens: it
    raised what its qualify raised, and matches its qualify's count elsewhere, so goodput is
    not charged for it (it lost its point as well as completed's share before)."""
    path = tmp_path / "zero_tokens_crash.py"
    path.write_text((L5 / "alt_correct.py").read_text()
                    + "\n\n_qualify = qualify\n\n\ndef qualify(record, slo):\n"
                    + "    if record.outcome == 'completed' and record.token_times[0] - record.arrival_s > 1e9:\n"
                    + "        return 'late_first_token'\n    return _qualify(record, slo)\n")
    for mode in ("check", "grade"):
        report = grade("lesson5", path, mode, secret)
        got, top = scores(report), full(report)
        assert {k for k in got if got[k] < top[k]} == {"completed"}, (mode, got)
        assert "qualify raised IndexError" in next(c.feedback for c in report.criteria if c.id == "completed")


# (qualify, goodput): a qualify that judges every record of each set alike (good spelt as a
# miss; every record good, but none under an explicit SLO), and a goodput that ignores it.
ALIKE = {
    "never-good": ("    got = _qualify(record, slo)\n    return 'late_first_token' if got == 'good' else got\n",
                   "0.0"),
    "never-good-slow": ("    got = _qualify(record, slo)\n    return 'slow_tokens' if got == 'good' else got\n",
                        "0.0"),
    "all-or-none": ("    return 'good' if slo is None else 'late_first_token'\n",
                    "len(records) / window_s if slo is None else 0.0"),
}


@pytest.mark.parametrize("name", sorted(ALIKE))
def test_goodput_that_ignores_the_verdicts_is_not_paid_by_a_qualify_that_judges_sets_alike(
        name, tmp_path, secret):
    """A goodput built on the learner's own qualify is paid by that qualify's count. Where the
    qualify calls every record of a set good, or none, a goodput that ignores the verdicts
    (0.0, every record) matches that count too: 0.0 beside a qualify that never said good
    earned goodput in full. Matching is paid only once the goodput matches the count on a
    set the qualify splits."""
    qualify, goodput = ALIKE[name]
    path = tmp_path / f"{name}.py"
    path.write_text((L5 / "alt_correct.py").read_text()
                    + "\n\n_qualify = qualify\n\n\ndef qualify(record, slo):\n" + qualify
                    + f"\n\ndef goodput(records, slo, window_s):\n    return {goodput}\n")
    for mode in ("check", "grade"):
        report = grade("lesson5", path, mode, secret)
        feedback = next(c.feedback for c in report.criteria if c.id == "goodput")
        assert scores(report)["goodput"] == 0, (mode, feedback)
        assert "a goodput that ignores the verdicts would match it too" in feedback, feedback


# ---- the goodput experiment ----------------------------------------------------------------------
def test_goodput_experiment_table_decisions_and_plot(tmp_path):
    png = tmp_path / "goodput.png"
    p = subprocess.run([sys.executable, "-m", "grader.cli", "experiment", "goodput", "--set", "rates=2",
                        "--set", "rate_from=3", "--set", "rate_to=8", "--set", "candidates=gain,rejections",
                        "--json", "--plot", str(png)], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    out = json.loads(p.stdout)
    assert out["plot"] == str(png) and png.stat().st_size > 10_000
    rows = {(r["rate"], r["design"]): r for r in out["rows"]}
    assert set(rows) == {(r, d) for r in (3.0, 8.0) for d in ("baseline", "gain", "rejections")}
    # Under light load the bigger card changes nothing; overloaded, it is a real gain.
    assert rows[3.0, "gain"]["decision"] == "inconclusive"
    assert rows[8.0, "gain"]["decision"] == "ship"
    assert rows[8.0, "rejections"]["decision"] == "rollback"
    assert rows[8.0, "rejections"]["rejected"] > 0.05
    assert any("rejected share rose" in n for n in out["notes"])


def test_goodput_experiment_plot_shows_the_decision_the_target_and_the_rejected_share():
    outcome = experiments.run("goodput", ["rates=2", "rate_from=3", "rate_to=8", "seeds=3",
                                          "candidates=gain,rejections"], COURSE)
    rows = {(r["rate"], r["design"]): r for r in outcome.table.rows}
    plot = outcome.plot
    names = [p.ylabel for p in plot.panels]
    assert names == ["goodput (good requests / s)", "release decision\nagainst baseline",
                     "interactive SLO attainment (%)", "batch SLO attainment (%)", "rejected share (%)"]
    goodput, decision, interactive, batch, rejected = plot.panels
    assert sorted(line.label for line in goodput.lines) == ["baseline", "gain", "rejections"]
    for line in goodput.lines:            # each design's mean goodput, banded by its own spread
        assert line.y == tuple(rows[x, line.label]["goodput"] for x in line.x)
        assert line.band[1] == tuple(rows[x, line.label]["goodput"] + rows[x, line.label]["band"]
                                     for x in line.x)
    # The decision at each rate for each candidate, as the table has it.
    assert {(m.x, m.row): m.text for m in decision.marks} == {
        k: r["decision"] for k, r in rows.items() if k[1] != "baseline"}
    assert {(m.x, m.row): m.text for m in decision.marks}[8.0, "rejections"] == "rollback"
    for panel in (interactive, batch):
        assert panel.hlines == ((90.0, "90% attainment"),)
    *shares, limit = rejected.lines
    assert {l.label: l.y for l in shares} == {
        d: tuple(rows[x, d]["rejected"] * 100 for x in (3.0, 8.0)) for d in ("baseline", "gain", "rejections")}
    assert limit.style == "dashed" and limit.y == tuple((rows[x, "baseline"]["rejected"] + 0.02) * 100
                                                         for x in (3.0, 8.0))
    assert all(y > l for y, l in zip(dict((l.label, l.y) for l in shares)["rejections"], limit.y))
    assert "each design's own spread over its 3 seeds (±2 standard errors)" in plot.title
    assert "not the paired noise band" in plot.title
    # Without a candidate that rejects, there is no rejected-share panel.
    plain = experiments.run("goodput", ["rates=1", "rate_from=3", "seeds=2", "requests=20", "candidates=gain"],
                            COURSE)
    assert "rejected share (%)" not in [p.ylabel for p in plain.plot.panels]
    # One rate is rate_from's: the settings line still shows rate_to (9), so a note says so.
    assert {r["rate"] for r in plain.table.rows} == {3.0}
    assert "rates=1: only rate_from (3/s) is run; rate_to (9) is read only with 2 rates or more" in plain.notes
    assert not any(n.startswith("rates=1") for n in experiments.run(
        "goodput", ["rates=1", "rate_from=3", "rate_to=3", "seeds=2", "requests=20", "candidates=gain"],
        COURSE).notes)


def test_goodput_experiment_defaults_show_goodput_inviting_a_rollback():
    """The plain command makes the lesson's point (docs/experiments.md): at 8 and 9 requests
    per second two candidates raise goodput beyond the paired band and still roll back,
    while the gain candidate ships."""
    outcome = experiments.run("goodput", [], COURSE)
    rows = {(r["rate"], r["design"]): r for r in outcome.table.rows}
    assert {d for _, d in rows} == {"baseline", "gain", "class", "rejections"}
    tempting = sorted(k for k, r in rows.items() if k[1] != "baseline"
                      and r["diff"] - r["diff_band"] > 0 and r["decision"] == "rollback")
    assert {(8.0, "class"), (8.0, "rejections"), (9.0, "class"), (9.0, "rejections")} <= set(tempting)
    assert rows[8.0, "gain"]["decision"] == rows[9.0, "gain"]["decision"] == "ship"
    # The page quotes the rejections candidate's turned-away share at those rates.
    page = " ".join((ROOT / "docs" / "experiments.md").read_text(encoding="utf-8").split())
    shares = {f"{100 * rows[rate, 'rejections']['rejected']:.1f}%" for rate in (8.0, 9.0)}
    assert len(shares) == 1 and f"{shares.pop()} of requests are turned away" in page


def test_goodput_experiment_with_one_seed_knows_no_band():
    """One seed: no spread is known, and lesson 5's band is infinite. The table shows "-"
    (not a band of 0.00), the JSON null, and the plot draws no band around the line."""
    outcome = experiments.run("goodput", ["rates=1", "rate_from=3", "seeds=1", "requests=20"], COURSE)
    rows = outcome.to_dict()["rows"]
    assert rows and all(r["band"] is None and r["att_band_interactive"] is None for r in rows)
    assert all(r["diff_band"] is None for r in rows if r["design"] != "baseline")
    lines = [l for p in outcome.plot.panels for l in p.lines if l.band is not None]
    assert lines and all(lo == hi for l in lines for lo, hi in zip(*l.band))
    from grader.course.experiments.common import _cell
    assert all(_cell(r["band"], ".2f") == "-" for r in outcome.table.rows)


def test_goodput_experiment_refuses_settings_whose_product_is_too_much_work():
    """Each size within its bound, together 1,600,000 requests to run: refused before any
    run, saying how the product came about. Just at the bound is allowed."""
    with pytest.raises(InputError) as e:
        experiments.run("goodput", ["rates=100", "seeds=100", "candidates=gain"], COURSE)
    assert str(e.value) == ("--set rates, seeds, requests: 100 rates x 100 seeds x 2 designs is 20,000 runs "
                            "of 80 requests, 1,600,000 in all; at most 500,000 (each setting is within its "
                            "bound, but they multiply)")
    from grader.course.experiments import goodput
    at = {"rates": 50, "seeds": 50, "requests": 100, "candidates": ("gain",)}       # 500,000 exactly
    goodput._within_work(at)
    with pytest.raises(InputError):
        goodput._within_work({**at, "requests": 101})


def test_goodput_experiment_rejects_a_bad_setting():
    with pytest.raises(InputError, match="candidates"):
        experiments.run("goodput", ["candidates=nonsense"], COURSE)
    with pytest.raises(InputError, match="rate_to"):
        experiments.run("goodput", ["rate_from=5", "rate_to=4"], COURSE)


# A secret under which none of the family's three instances settles a noise case (found by
# a random-secret run): the reserve instances must supply one, and when they cannot either,
# grading stops with a line naming the family file.
UNSETTLED_NOISE = bytes.fromhex("bd508417e9901b0f")


def test_a_kind_no_drawn_instance_settles_is_drawn_from_the_reserve():
    from grader.course.trials import hidden_suites
    suites = hidden_suites(COURSE, UNSETTLED_NOISE)
    notes = lesson5._notes(COURSE)
    first = lesson5.release_cases(suites, "hidden", notes)
    assert not any(c.family == "release-noise" for c in first)      # the premise of this secret
    cases = lesson5.hidden_release_cases(COURSE, UNSETTLED_NOISE, suites)
    noise = [c for c in cases if c.family == "release-noise"]
    drawn = {s.trials[0].name.split("/")[0] for s in suites}
    assert noise and all(c.name.split("/")[0] not in drawn for c in noise)
    assert cases[:len(first)] == first and {c.family for c in cases} >= {f"release-{k}" for k in KINDS}


def test_a_kind_even_the_reserve_cannot_settle_stops_the_grade(monkeypatch):
    from grader.course.trials import hidden_suites
    suites = hidden_suites(COURSE, UNSETTLED_NOISE)
    real = lesson5.settled
    monkeypatch.setattr(lesson5, "settled", lambda probe, expect: probe.kind != "noise" and real(probe, expect))
    with pytest.raises(InputError, match=r"lesson5\.yaml.*families\.release.*noise"):
        lesson5.hidden_release_cases(COURSE, UNSETTLED_NOISE, suites)


def test_a_release_probe_crosses_boundaries_frozen_and_is_read_back_as_itself(public_cases):
    from grader.engine import codec
    probe = next(c.inputs for c in public_cases if isinstance(c.inputs, release_decisions.ReleaseProbe))
    assert codec.loads(codec.dumps(probe)) == probe
    with pytest.raises(dataclasses.FrozenInstanceError):
        probe.kind = "gain"


def test_a_decisions_feedback_shows_the_paired_figures_the_rule_read_and_names_the_run_left_out(public_cases):
    """paired-small's candidate has a run on a seed the baseline lacks. The rule leaves it
    out of everything (README: "pair them by seed"), so the feedback's attainment is over
    the paired runs, as the oracle's decision is, and the stray seed is named."""
    from reference.shapes import ReleaseDecision
    probe = next(c.inputs for c in public_cases
                 if isinstance(c.inputs, release_decisions.ReleaseProbe) and c.inputs.kind == "paired-small")
    base_seeds = {r.seed for r in probe.baseline}
    [stray] = [r for r in probe.candidate if r.seed not in base_seeds]
    paired = [r for r in probe.candidate if r.seed in base_seeds]

    def pooled(runs, cls):          # good over counted requests, summed over the runs
        rows = [c for r in runs for c in r.classes if c.cls == cls]
        return sum(c.good for c in rows) / sum(c.requests - c.excluded for c in rows)
    case = next(c for c in public_cases if c.inputs is probe)
    said = release_decisions._judge_decision(case, ReleaseDecision("rollback", ("x",)))
    assert said.startswith("decided rollback, expected inconclusive")
    assert f"left out, without a pair: candidate seed {stray.seed}" in said
    for cls in (c.cls for c in probe.baseline[0].classes):
        assert f"{cls} attainment {pooled(probe.baseline, cls):.1%} -> {pooled(paired, cls):.1%}" in said
    # The mean TPOT quoted is the mean of the paired runs' own means, in milliseconds.
    tpot = [statistics.mean(r.mean_tpot_s for r in runs) * 1000 for runs in (probe.baseline, paired)]
    assert len(paired) > 1 and f"mean TPOT {tpot[0]:.1f} -> {tpot[1]:.1f} ms" in said, said
    # At hundreds of ms a slip of 0.1% shows in the last place; the stray run's TPOT is left out.
    slow = dataclasses.replace(
        probe, baseline=tuple(dataclasses.replace(r, mean_tpot_s=0.5 + 0.1 * i) for i, r in enumerate(probe.baseline)),
        candidate=tuple(dataclasses.replace(r, mean_tpot_s=0.9 if r is stray else 0.25) for r in probe.candidate))
    n = len(probe.baseline)
    assert f"mean TPOT {500 + 50 * (n - 1):.1f} -> 250.0 ms" in release_decisions._show_runs(slow)
    # Over every run the figures differ, so the test tells the two apart.
    assert any(f"{pooled(probe.candidate, c.cls):.1%}" != f"{pooled(paired, c.cls):.1%}"
               for c in probe.baseline[0].classes)


def test_a_class_with_nothing_counted_on_one_side_is_left_out_of_the_figures():
    """A class whose every baseline request was excluded has no attainment there (README:
    attainment is over the requests that count): the figures name the others only."""
    from reference.shapes import ClassSummary, ReleaseRule, RunSummary
    base = RunSummary(1, 10.0, (ClassSummary("chat", 10, good=5), ClassSummary("batch", 4, excluded=4)))
    cand = RunSummary(1, 10.0, (ClassSummary("chat", 10, good=8), ClassSummary("batch", 4, good=2)))
    probe = release_decisions.ReleaseProbe("t", "class", "", (base,), (cand,), ReleaseRule())
    said = release_decisions._show_runs(probe)
    assert said.startswith("chat attainment 50.0% -> 80.0%; rejected"), said
    assert "batch" not in said


def test_a_rollback_where_no_guard_trips_is_told_so(public_cases):
    """fall-inside: goodput falls inside the noise band, no guard trips: inconclusive. Its
    reason ("the gain is below the 2.0% minimum") explains why it does not ship; a learner
    who rolled it back on the fall read it as agreement. The feedback names the guards."""
    from reference.shapes import ReleaseDecision
    case = next(c for c in public_cases if isinstance(c.inputs, release_decisions.ReleaseProbe)
                and c.inputs.kind == "fall-inside")
    said = release_decisions._judge_decision(case, ReleaseDecision("rollback", ("goodput fell",)))
    assert said.startswith("decided rollback, expected inconclusive: no guard trips: no class's attainment "
                           "falls by more than 5.0%, the rejected share rises by no more than 2.0%, and "
                           "goodput does not fall beyond the noise band; the gain is below"), said
    # A learner who shipped it is told why it does not ship, and nothing about guards.
    said = release_decisions._judge_decision(case, ReleaseDecision("ship", ()))
    assert said.startswith("decided ship, expected inconclusive: the gain is below"), said
    # Nor is one who waited where a guard trips: that is no rollback without a guard.
    case = next(c for c in public_cases if c.family == "release-class")
    said = release_decisions._judge_decision(case, ReleaseDecision("inconclusive", ()))
    assert said.startswith("decided inconclusive, expected rollback: ") and "no guard trips" not in said, said


def test_the_readme_states_each_criterions_credit_as_the_rubric_sets_it():
    """A learner reads how a share right becomes points in the README: it must be the rubric's."""
    rubric = yaml.safe_load((ROOT / "rubrics" / "lesson5.yaml").read_text())
    credit = {c["id"]: (c["credit"]["rule"], c["credit"].get("floor"), c["credit"].get("target"))
              for c in rubric["criteria"]}
    verdicts = ("completed", "largest-gap", "cancels", "rejected-failed", "goodput")
    assert {credit[c] for c in verdicts} == {("linear", 0.8, 1.0)}
    assert {credit[c] for c in credit if c not in verdicts} == {("linear", 0.0, 1.0)}
    assert len(credit) == len(verdicts) + 8
    text = " ".join((ROOT / "assignments" / "lesson5" / "README.md").read_text().split())
    assert "linear between a share right of 80% (no points) and 100% (all)" in text
    assert "The eight release criteria are linear from 0" in text


# The public rule's four numbers (the README's), and for each, values the hidden rules may
# draw that are far enough from it for a probe near the threshold to tell them apart under
# every correct reading (a noise_k of 2.5 against 2 is not: the population deviation's band
# alone is 13% narrower).
WRITTEN_IN = {"min_gain": 0.02, "noise_k": 2.0, "max_class_drop": 0.05, "max_rejection_rise": 0.02}
TOLD_APART = {"min_gain": (0.03, 0.04), "noise_k": (3.0,), "max_class_drop": (0.04, 0.08),
              "max_rejection_rise": (0.01, 0.03)}


@pytest.mark.parametrize("name", sorted(TOLD_APART))
def test_a_threshold_written_in_as_the_readmes_number_misjudges_a_probe_near_it(name):
    """A rule whose one threshold differs from the README's: some rule probe drawn under it
    is decided otherwise by a rule that reads the README's number instead. The guards' probes
    near their thresholds (1.2 times beyond, 0.75 times inside), min_gain's at 0.7 to 0.8 of
    it and the band's at three quarters of it each catch the number written in on one side."""
    import numpy as np
    from reference.shapes import ReleaseRule
    from grader.lessons import rule_probes
    for value in TOLD_APART[name]:
        rule = ReleaseRule(**{**WRITTEN_IN, name: value})
        g = np.random.Generator(np.random.PCG64(int(value * 1000)))
        missed = set()
        for kind in rule_probes.KINDS:
            base, cand = rule_probes.draw(kind, g, rule, seed0=int(g.integers(1, 10_000)))
            assert reference.decide_release(base, cand, rule).decision == rule_probes.EXPECT[kind]
            if reference.decide_release(base, cand, ReleaseRule(**WRITTEN_IN)).decision != rule_probes.EXPECT[kind]:
                missed.add(kind)
        assert missed, (name, value)


def test_a_rule_written_in_loses_where_the_hidden_rule_differs(tmp_path):
    """The README's rule written in, the rule passed never read: 17 of 17 before the probes
    near each threshold. Under a secret whose hidden rule differs in min_gain, the class guard
    and the rejection allowance (0.03, 0.08, 0.03; its noise_k is the README's), it loses
    each of their criteria, and the feedback quotes the rule's own threshold."""
    import numpy as np
    from grader.engine.secret import derive_seed
    secret = b"another secret"
    r = np.random.Generator(np.random.PCG64(derive_seed(secret, "lesson5", "rule probes")))
    rule = lesson5._hidden_rule(r)
    assert (rule.min_gain, rule.max_class_drop, rule.max_rejection_rise) == (0.03, 0.08, 0.03)  # the premise
    report = grade("lesson5", wrong_file("rule_written_in", tmp_path), "grade", secret)
    got, top = scores(report), full(report)
    assert {k for k in got if got[k] < top[k]} == {"min-gain", "class-guard", "rejection-guard"}, got
    feedback = next(c.feedback for c in report.criteria if c.id == "class-guard")
    assert "no class's attainment falls by more than 8.0%" in feedback, feedback
    # The public check's rule is the README's: written in, it is right there.
    assert grade("lesson5", wrong_file("rule_written_in", tmp_path), "check").score == 17
