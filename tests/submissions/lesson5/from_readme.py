"""Lesson 5, written from the README alone (without reading the reference solution): an
alternative correct solution that must keep full marks."""
import math
import statistics
from typing import Optional, Sequence

from reference.shapes import ReleaseDecision, ReleaseRule, RequestRecord, RunSummary, Slo


def qualify(record: RequestRecord, slo: Optional[Slo]) -> str:
    slo = slo or record.slo
    if record.outcome == "rejected":
        return "rejected"
    if record.outcome in ("failed", "preempted"):
        return "failed"
    deadline = record.arrival_s + slo.ttft_s
    t = list(record.token_times)
    gaps = [b - a for a, b in zip(t, t[1:])]
    if record.outcome == "completed":
        if not t or t[0] > deadline:
            return "late_first_token"
        return "slow_tokens" if any(g > slo.gap_s for g in gaps) else "good"
    # cancelled by the client: the first deadline already missed at the cancel, if any
    end = record.cancel_s
    if (t and t[0] > deadline) or (not t and end > deadline):
        return "late_first_token"
    if any(g > slo.gap_s for g in gaps) or (t and end - t[-1] > slo.gap_s):
        return "slow_tokens"
    return "excluded"


def goodput(records: Sequence[RequestRecord], slo: Optional[Slo], window_s: float) -> float:
    if not records:
        return 0.0
    return sum(qualify(r, slo) == "good" for r in records) / window_s


def _goodput(run: RunSummary) -> float:
    return sum(c.good for c in run.classes) / run.window_s


def _attainment(runs, name):
    rows = [c for r in runs for c in r.classes if c.cls == name]
    counted = sum(c.requests - c.excluded for c in rows)
    return sum(c.good for c in rows) / counted if counted else None


def _rejected(runs):
    total = sum(c.requests for r in runs for c in r.classes)
    return sum(c.rejected for r in runs for c in r.classes) / total if total else 0.0


def decide_release(baseline_runs: Sequence[RunSummary], candidate_runs: Sequence[RunSummary],
                   rule: ReleaseRule) -> ReleaseDecision:
    before = {r.seed: r for r in baseline_runs}
    pairs = [(before[r.seed], r) for r in candidate_runs if r.seed in before]
    d = [_goodput(c) - _goodput(b) for b, c in pairs]
    n = len(d)
    mean = statistics.mean(d) if d else 0.0
    band = rule.noise_k * statistics.stdev(d) / math.sqrt(n) if n >= 2 else math.inf
    base = statistics.mean(_goodput(b) for b, _ in pairs) if pairs else 0.0
    gain = mean / base if base else 0.0
    reasons = []
    names = sorted({c.cls for r in list(baseline_runs) + list(candidate_runs) for c in r.classes})
    for name in names:
        a, b = _attainment([p[0] for p in pairs], name), _attainment([p[1] for p in pairs], name)
        if a is not None and b is not None and a - b > rule.max_class_drop:
            reasons.append(f"{name} attainment fell {a:.1%} -> {b:.1%}")
    rise = _rejected([p[1] for p in pairs]) - _rejected([p[0] for p in pairs])
    if rise > rule.max_rejection_rise:
        reasons.append(f"rejected share rose by {rise:.1%}")
    if mean < -band:
        reasons.append(f"goodput fell {mean:+.3f} beyond the band {band:.3f}")
    if reasons:
        return ReleaseDecision("rollback", tuple(reasons))
    if gain >= rule.min_gain and mean > band:
        return ReleaseDecision("ship", (f"gain {gain:+.1%}, beyond the band {band:.3f}",))
    return ReleaseDecision("inconclusive", (f"gain {gain:+.1%}, band {band:.3f}",))
