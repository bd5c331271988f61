"""Lesson 5 reference solution: qualify requests against their SLO, and decide a release.

A valid submission as it stands. The keyword-only knobs with a default are the correct
policy; their other values are the mistakes the lesson discusses (an average TPOT for
the token deadline, cancels judged wrongly, rejections left out, a release shipped on
the mean or on total goodput alone), so the grader can replay them. ``stdev`` and
``pool`` are not mistakes: they are the other readings of the rule a correct solution
may take, and the grader keeps its release scenarios clear of where they disagree.

Deadlines (times in seconds since the run began; D1 = arrival_s + ttft_s):
- the first token must come at or before D1 (exactly at D1 is in time);
- every gap between consecutive tokens must be at most gap_s: the largest gap, not the
  average time per output token;
- a deadline is missed only once its time has passed without the token, so a client
  cancel at exactly D1 (or exactly gap_s after the last token) comes before the miss.
"""
from __future__ import annotations

import math
import operator
from typing import Optional, Sequence

from reference.shapes import (ClassSummary, ReleaseDecision, ReleaseRule, RequestRecord, RunSummary,
                              Slo)


# ---- qualifying one request ---------------------------------------------------------------
def _largest_gap(times: Sequence[float]) -> float:
    # max over (t[i+1] - t[i]); map(operator.sub) keeps it quick on long streams.
    return max(map(operator.sub, times[1:], times), default=0.0)


def _average_gap(times: Sequence[float]) -> float:
    return (times[-1] - times[0]) / (len(times) - 1) if len(times) >= 2 else 0.0


def qualify(record: RequestRecord, slo: Optional[Slo] = None, *,
            gaps: str = "largest",          # or "average" (faulty: the mean TPOT hides stalls)
            cancels: str = "by_deadline",   # or "as_completed" (faulty), "excluded" (faulty)
            rejections: str = "count",      # or "excluded" (faulty)
            ) -> str:
    """One of QUALIFICATIONS. ``slo`` overrides the record's own SLO when given."""
    slo = slo or record.slo
    if record.outcome == "rejected":
        return "excluded" if rejections == "excluded" else "rejected"
    if record.outcome in ("failed", "preempted"):
        return "failed"
    times = record.token_times
    first_due = record.arrival_s + slo.ttft_s
    gap = _average_gap(times) if gaps == "average" else _largest_gap(times)
    cancelled = record.outcome == "cancelled_by_client"
    if cancelled and cancels == "excluded":
        return "excluded"
    if not cancelled or cancels == "as_completed":
        # A completed request that never emitted a token never met its first-token deadline.
        if not times or times[0] > first_due:
            return "late_first_token"
        if gap > slo.gap_s:
            return "slow_tokens"
        return "good"
    # A cancel counts as the first deadline it came after; before any miss it says nothing
    # about the service, so it is left out of both sides of the ratio.
    cancel = record.cancel_s if record.cancel_s is not None else (times[-1] if times else record.arrival_s)
    if (times and times[0] > first_due) or (not times and cancel > first_due):
        return "late_first_token"
    if times and (gap > slo.gap_s or cancel - times[-1] > slo.gap_s):
        return "slow_tokens"
    return "excluded"


def goodput(records: Sequence[RequestRecord], slo: Optional[Slo], window_s: float, **knobs) -> float:
    """Good requests per second of the window."""
    return sum(1 for r in records if qualify(r, slo, **knobs) == "good") / window_s


# ---- deciding a release -------------------------------------------------------------------
def run_goodput(run: RunSummary) -> float:
    return sum(c.good for c in run.classes) / run.window_s


def _counted(c: ClassSummary) -> int:
    """Requests that count for the class's attainment: all but the excluded."""
    return c.requests - c.excluded


def attainment(runs: Sequence[RunSummary], cls: str, *, pool: str = "runs") -> Optional[float]:
    """Share of a class's counted requests that were good (None when it has none).

    pool="runs" sums over the runs first; pool="per_run" averages each run's share."""
    rows = [c for r in runs for c in r.classes if c.cls == cls]
    if pool == "per_run":
        shares = [c.good / _counted(c) for c in rows if _counted(c) > 0]
        return sum(shares) / len(shares) if shares else None
    counted = sum(_counted(c) for c in rows)
    return sum(c.good for c in rows) / counted if counted else None


def rejected_share(runs: Sequence[RunSummary], *, pool: str = "runs") -> float:
    if pool == "per_run":
        shares = [sum(c.rejected for c in r.classes) / max(1, sum(c.requests for c in r.classes))
                  for r in runs]
        return sum(shares) / len(shares) if shares else 0.0
    total = sum(c.requests for r in runs for c in r.classes)
    return sum(c.rejected for r in runs for c in r.classes) / total if total else 0.0


def paired(baseline_runs: Sequence[RunSummary], candidate_runs: Sequence[RunSummary]):
    """(baseline, candidate) runs on the same seed, in the baseline's order."""
    by_seed = {r.seed: r for r in candidate_runs}
    return [(b, by_seed[b.seed]) for b in baseline_runs if b.seed in by_seed]


def noise_band(diffs: Sequence[float], k: float, *, stdev: str = "sample") -> float:
    """k standard errors of the mean paired difference (infinite with fewer than 2 pairs)."""
    n = len(diffs)
    if n < 2:
        return math.inf
    mean = sum(diffs) / n
    ss = sum((d - mean) ** 2 for d in diffs)
    sd = math.sqrt(ss / (n if stdev == "population" else n - 1))
    return k * sd / math.sqrt(n)


def decide_release(baseline_runs: Sequence[RunSummary], candidate_runs: Sequence[RunSummary],
                   rule: ReleaseRule, *,
                   noise: str = "band",            # or "mean_only" (faulty: ships on the mean)
                   class_guard: bool = True,       # False (faulty): total goodput alone
                   rejection_guard: bool = True,   # False (faulty): rejections bought the gain
                   stdev: str = "sample",          # or "population": also a correct reading
                   pool: str = "runs",             # or "per_run": also a correct reading
                   ) -> ReleaseDecision:
    pairs = paired(baseline_runs, candidate_runs)
    if not pairs:
        return ReleaseDecision("inconclusive", ("no baseline and candidate runs share a seed",))
    base = [b for b, _ in pairs]
    cand = [c for _, c in pairs]
    diffs = [run_goodput(c) - run_goodput(b) for b, c in pairs]
    mean_diff = sum(diffs) / len(diffs)
    base_goodput = sum(run_goodput(b) for b in base) / len(base)
    band = 0.0 if noise == "mean_only" else noise_band(diffs, rule.noise_k, stdev=stdev)
    gain = mean_diff / base_goodput if base_goodput > 0 else (math.inf if mean_diff > 0 else 0.0)
    summary = (f"goodput {base_goodput:.3f} -> {base_goodput + mean_diff:.3f} req/s "
               f"({gain:+.1%}), noise band +-{band:.3f} req/s over {len(pairs)} paired seeds")

    rollback = []
    if class_guard:
        names = sorted({c.cls for r in base + cand for c in r.classes})
        for name in names:
            before, after = attainment(base, name, pool=pool), attainment(cand, name, pool=pool)
            if before is not None and after is not None and before - after > rule.max_class_drop:
                rollback.append(f"class {name}: SLO attainment fell {before:.1%} -> {after:.1%}, "
                                f"more than the {rule.max_class_drop:.1%} allowed")
    if rejection_guard:
        before, after = rejected_share(base, pool=pool), rejected_share(cand, pool=pool)
        if after - before > rule.max_rejection_rise:
            rollback.append(f"rejected share rose {before:.1%} -> {after:.1%}, more than the "
                            f"{rule.max_rejection_rise:.1%} allowed")
    if mean_diff < -band:
        rollback.append(f"goodput fell beyond the noise band: {summary}")
    if rollback:
        return ReleaseDecision("rollback", tuple(rollback))
    if gain >= rule.min_gain and mean_diff > band:
        return ReleaseDecision("ship", (summary,))
    why = (f"the gain is below the {rule.min_gain:.1%} minimum" if gain < rule.min_gain
           else "the gain is inside the noise band")
    return ReleaseDecision("inconclusive", (f"{why}: {summary}",))
