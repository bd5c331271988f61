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

    ``slo`` replaces ``record.slo`` when it is not None. The record's ``outcome`` is one of
    completed, cancelled_by_client, rejected, preempted, failed; ``token_times`` are its
    output tokens' times in order; ``cancel_s`` is set for a client cancel.

    Each verdict means what the README's table says ("Qualifying every outcome"). What
    the grader checks, on probes at every edge and on records of real runs:
    - the token deadline is per token: the largest gap between consecutive tokens
      decides, never the average time per output token;
    - a token exactly at its deadline is in time, and a deadline is missed only once its
      time has passed: a cancel exactly at a deadline comes before the miss;
    - a cancelled request counts as the first deadline it had already missed when the
      client cancelled (a deadline can pass with no token at all), else it is excluded;
    - when both deadlines were missed, the first-token deadline comes first;
    - zero output tokens, one output token (no gap), and an explicit ``slo``.
    """
    raise NotImplementedError("qualify is not implemented yet")


def goodput(records: Sequence[RequestRecord], slo: Optional[Slo], window_s: float) -> float:
    """Good requests per second: the records that qualify as "good" (under ``slo``, or each
    record's own SLO when it is None), per second of ``window_s``. No records -> 0.0."""
    raise NotImplementedError("goodput is not implemented yet")


def decide_release(baseline_runs: Sequence[RunSummary], candidate_runs: Sequence[RunSummary],
                   rule: ReleaseRule) -> ReleaseDecision:
    """Ship, roll back, or call it inconclusive, from runs of one workload on paired seeds.

    Each ``RunSummary`` is one seed's run: its ``seed``, ``window_s``, ``mean_tpot_s`` and
    per class a ``ClassSummary`` (how many requests, and how many qualified as each
    verdict). Pair the two sides' runs by seed.

    Returns ``ReleaseDecision(decision, reasons)``: ``decision`` one of RELEASE_DECISIONS,
    decided by the release rule of the README ("The release rule": its guards, the noise
    band of the paired differences, the minimum gain) under ``rule``'s four numbers;
    ``reasons`` one line per reason, for the people who read it (not graded).
    What the grader checks: the decision, on each kind of question (a real gain, a gain
    inside the noise, a gain bought by rejections, a class that pays, stalls that the
    mean time per output token hides), on the public suite and on hidden ones.
    ``mean_tpot_s`` is there to show how little it tells you, not to decide on.
    """
    raise NotImplementedError("decide_release is not implemented yet")
