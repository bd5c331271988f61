"""Another correct solution (tests): each deadline judged by the moment it is missed, compared
with the moment the request ended; the population deviation for the band (also a correct
reading), pairs sorted by seed."""
import math
from typing import Optional, Sequence

from reference.shapes import ReleaseDecision, ReleaseRule, RequestRecord, RunSummary, Slo


def _first_miss(record: RequestRecord, slo: Slo, end: float):
    """(time, verdict) of the first deadline missed before ``end``, or None."""
    times = record.token_times
    due = record.arrival_s + slo.ttft_s
    if not times:
        return (due, "late_first_token") if end > due else None
    if times[0] > due:
        return (due, "late_first_token")
    for prev, nxt in zip(times, times[1:]):
        if nxt - prev > slo.gap_s:
            return (prev + slo.gap_s, "slow_tokens")
    if end - times[-1] > slo.gap_s:
        return (times[-1] + slo.gap_s, "slow_tokens")
    return None


def qualify(record: RequestRecord, slo: Optional[Slo]) -> str:
    slo = slo if slo is not None else record.slo
    if record.outcome == "rejected":
        return "rejected"
    if record.outcome != "completed" and record.outcome != "cancelled_by_client":
        return "failed"
    if record.outcome == "completed":
        if not record.token_times:
            return "late_first_token"
        miss = _first_miss(record, slo, record.token_times[-1])
        return miss[1] if miss else "good"
    miss = _first_miss(record, slo, record.cancel_s)
    return miss[1] if miss else "excluded"


def goodput(records: Sequence[RequestRecord], slo: Optional[Slo], window_s: float) -> float:
    n = 0
    for r in records:
        n += qualify(r, slo) == "good"
    return n / window_s if records else 0.0


def _tot(runs, field, cls=None):
    return sum(getattr(c, field) for r in runs for c in r.classes if cls is None or c.cls == cls)


def decide_release(baseline_runs: Sequence[RunSummary], candidate_runs: Sequence[RunSummary],
                   rule: ReleaseRule) -> ReleaseDecision:
    base_by = {r.seed: r for r in baseline_runs}
    pairs = sorted((s, base_by[s], c) for s, c in ((c.seed, c) for c in candidate_runs) if s in base_by)
    if not pairs:
        return ReleaseDecision("inconclusive", ("no shared seeds",))
    base = [b for _, b, _ in pairs]
    cand = [c for _, _, c in pairs]
    gp = lambda r: _tot([r], "good") / r.window_s
    d = [gp(c) - gp(b) for b, c in zip(base, cand)]
    n = len(d)
    m = math.fsum(d) / n
    # population deviation: also a correct reading
    band = rule.noise_k * math.sqrt(math.fsum((x - m) ** 2 for x in d) / n) / math.sqrt(n) if n > 1 else math.inf
    why = []
    for cls in sorted({c.cls for r in base + cand for c in r.classes}):
        att = []
        for runs in (base, cand):
            counted = _tot(runs, "requests", cls) - _tot(runs, "excluded", cls)
            att.append(_tot(runs, "good", cls) / counted if counted else None)
        if None not in att and att[0] - att[1] > rule.max_class_drop:
            why.append(f"class {cls} dropped")
    share = [(_tot(rs, "rejected") / _tot(rs, "requests")) if _tot(rs, "requests") else 0.0 for rs in (base, cand)]
    if share[1] - share[0] > rule.max_rejection_rise:
        why.append("rejections rose")
    if m < -band:
        why.append("goodput fell")
    if why:
        return ReleaseDecision("rollback", tuple(why))
    g0 = math.fsum(gp(b) for b in base) / n
    rel = m / g0 if g0 > 0 else (math.inf if m > 0 else 0.0)
    if m > band and rel >= rule.min_gain:
        return ReleaseDecision("ship", ("gain",))
    return ReleaseDecision("inconclusive", ("not shown",))
