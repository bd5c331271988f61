"""What a run's summary says against the SLOs: the definitions lesson 5's README gives.

A request qualifies as good, late, slow, rejected, failed or excluded (lesson 5's
qualify, which a core supplies); these are the sums the release figures print over a
run's summary: goodput (good requests per second of the window), a class's SLO
attainment (good over the requests that count, every one but the excluded), and the
rejected share. Definitions, not the release rule: deciding a release is lesson 5's.
"""
from __future__ import annotations

from typing import Optional, Sequence

from reference.shapes import RunSummary


def run_goodput(run: RunSummary) -> float:
    return sum(c.good for c in run.classes) / run.window_s


def attainment(runs: Sequence[RunSummary], cls: str) -> Optional[float]:
    """Good over counted requests of one class, pooled over the runs (None if none counted)."""
    rows = [c for r in runs for c in r.classes if c.cls == cls]
    counted = sum(c.requests - c.excluded for c in rows)
    return sum(c.good for c in rows) / counted if counted else None


def rejected_share(runs: Sequence[RunSummary]) -> float:
    total = sum(c.requests for r in runs for c in r.classes)
    return sum(c.rejected for r in runs for c in r.classes) / total if total else 0.0
