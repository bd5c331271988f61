"""Lesson 5 exercise: qualify requests against their SLO, and decide a release.

Implement the three functions below. Read assignments/lesson5/README.md first: it
defines every verdict precisely, works through records and a release decision with real
numbers, and says what the grader checks.

Your file runs in a sandbox. You may import the standard library and
``reference.shapes``, nothing else from the course. Every argument is a frozen dataclass
of plain values (or a tuple of them, or None).

Times are float seconds since the run began. Compare with the deadlines as the README
says: a token exactly at its deadline is in time.

Check your work with:  grader check lesson5
"""
from typing import Optional, Sequence

from reference.shapes import ReleaseDecision, ReleaseRule, RequestRecord, RunSummary, Slo

# The verdict strings of qualify, in reference.shapes.QUALIFICATIONS:
#   "good", "late_first_token", "slow_tokens", "rejected", "failed", "excluded"
# The decisions of decide_release, in reference.shapes.RELEASE_DECISIONS:
#   "ship", "rollback", "inconclusive"


def qualify(record: RequestRecord, slo: Optional[Slo]) -> str:
    """What this request counts as against its SLO: one of QUALIFICATIONS.

    ``slo`` replaces ``record.slo`` when it is not None. With D1 = arrival_s + ttft_s:

    - outcome "rejected"              -> "rejected" (it counts against the service)
    - outcome "failed" or "preempted" -> "failed"
    - outcome "completed":
        no token at all, or token_times[0] > D1         -> "late_first_token"
        some gap between consecutive tokens > gap_s      -> "slow_tokens"
        otherwise                                        -> "good"
      The token deadline is per token: compare the LARGEST gap with gap_s, never the
      average time per output token. A token exactly at its deadline is in time.
    - outcome "cancelled_by_client", cancelled at cancel_s: the first deadline it had
      already missed when the client cancelled, if any:
        the first token came after D1, or no token came and cancel_s > D1
                                                         -> "late_first_token"
        a gap between tokens exceeded gap_s, or the client waited more than gap_s after
        the last token (cancel_s - last token > gap_s)   -> "slow_tokens"
        otherwise (no deadline missed yet)               -> "excluded"
      A deadline is missed only once its time has passed, so a cancel exactly at a
      deadline comes before the miss.
    """
    raise NotImplementedError("qualify: judge the record's first token and its largest gap against the SLO")


def goodput(records: Sequence[RequestRecord], slo: Optional[Slo], window_s: float) -> float:
    """Good requests per second: how many records qualify as "good" (under ``slo``, or each
    record's own SLO when it is None), divided by ``window_s``. No records -> 0.0."""
    raise NotImplementedError("goodput: count the good records and divide by the window")


def decide_release(baseline_runs: Sequence[RunSummary], candidate_runs: Sequence[RunSummary],
                   rule: ReleaseRule) -> ReleaseDecision:
    """Ship, roll back, or call it inconclusive, from runs of one workload on paired seeds.

    Pair the runs by seed. For each pair, the goodput difference d = candidate - baseline
    (a run's goodput: its classes' good requests / window_s). With n pairs, mean d and
    sample standard deviation s (n - 1 in the denominator):

        noise band = rule.noise_k * s / sqrt(n)      (infinite when n < 2)
        gain       = mean d / the baseline runs' mean goodput

    Roll back ("rollback") when any of these holds, even if total goodput rose:
      - a class's SLO attainment fell by more than rule.max_class_drop, where attainment
        = good / (requests - excluded), summed over the runs of one side;
      - the rejected share of requests (summed over the runs) rose by more than
        rule.max_rejection_rise;
      - goodput fell beyond the noise band: mean d < -band.
    Otherwise ship ("ship") when gain >= rule.min_gain and mean d > band, and call it
    "inconclusive" when not. Put one line per reason in ``reasons``.
    """
    raise NotImplementedError("decide_release: guards first (classes, rejections), then the gain against the noise band")
