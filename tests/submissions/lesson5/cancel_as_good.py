"""Wrong on purpose (tests): a cancelled request that met its deadlines so far counts as good."""
import math
import statistics
from typing import Optional, Sequence

from reference.shapes import ReleaseDecision, ReleaseRule, RequestRecord, RunSummary, Slo


def _worst_gap(times) -> float:
    worst = 0.0
    for i in range(1, len(times)):
        worst = max(worst, times[i] - times[i - 1])
    return worst


def qualify(record: RequestRecord, slo: Optional[Slo]) -> str:
    if slo is None:
        slo = record.slo
    outcome = record.outcome
    if outcome == "rejected":
        return "rejected"
    if outcome in ("failed", "preempted"):
        return "failed"
    times = list(record.token_times)
    if outcome == "completed":
        if len(times) == 0 or times[0] - record.arrival_s > slo.ttft_s:
            return "late_first_token"
        return "slow_tokens" if _worst_gap(times) > slo.gap_s else "good"
    waited = record.cancel_s - record.arrival_s
    if times:
        if times[0] - record.arrival_s > slo.ttft_s:
            return "late_first_token"
        if _worst_gap(times) > slo.gap_s or record.cancel_s - times[-1] > slo.gap_s:
            return "slow_tokens"
        return "good"
    return "late_first_token" if waited > slo.ttft_s else "excluded"


def goodput(records: Sequence[RequestRecord], slo: Optional[Slo], window_s: float) -> float:
    good = [r for r in records if qualify(r, slo) == "good"]
    return len(good) / window_s


def _goodput(run: RunSummary) -> float:
    return sum(c.good for c in run.classes) / run.window_s


def _mean(values):
    values = list(values)
    return sum(values) / len(values) if values else None


def _attainment(runs, cls):
    return _mean(c.good / (c.requests - c.excluded) for r in runs for c in r.classes
                 if c.cls == cls and c.requests > c.excluded)


def _rejected(runs):
    return _mean(sum(c.rejected for c in r.classes) / sum(c.requests for c in r.classes)
                 for r in runs if sum(c.requests for c in r.classes))


def decide_release(baseline_runs: Sequence[RunSummary], candidate_runs: Sequence[RunSummary],
                   rule: ReleaseRule) -> ReleaseDecision:
    cand = {r.seed: r for r in candidate_runs}
    pairs = [(b, cand[b.seed]) for b in baseline_runs if b.seed in cand]
    if not pairs:
        return ReleaseDecision("inconclusive", ("nothing to compare",))
    base = [b for b, _ in pairs]
    new = [c for _, c in pairs]
    diffs = [_goodput(c) - _goodput(b) for b, c in pairs]
    mean_diff = statistics.fmean(diffs)
    band = rule.noise_k * statistics.stdev(diffs) / math.sqrt(len(diffs)) if len(diffs) > 1 else math.inf
    reasons = []
    for cls in {c.cls for r in base + new for c in r.classes}:
        before, after = _attainment(base, cls), _attainment(new, cls)
        if before is not None and after is not None and after < before - rule.max_class_drop:
            reasons.append(f"{cls} regressed")
    before, after = _rejected(base) or 0.0, _rejected(new) or 0.0
    if after > before + rule.max_rejection_rise:
        reasons.append("more rejections")
    if mean_diff < -band:
        reasons.append("goodput fell")
    if reasons:
        return ReleaseDecision("rollback", tuple(reasons))
    base_goodput = statistics.fmean(_goodput(b) for b in base)
    if mean_diff > band and mean_diff >= rule.min_gain * base_goodput:
        return ReleaseDecision("ship", ("a gain beyond the noise",))
    return ReleaseDecision("inconclusive", ("not enough evidence",))
