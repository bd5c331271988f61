"""What the side-by-side benchmarks (check.py, hidden_grade.py) share: the checkouts they
time in turn, and the dated line with the machine's load that heads their tables."""
from __future__ import annotations

import os
from datetime import date
from pathlib import Path


def checkouts(root: Path, baseline: Path | None) -> dict[str, Path]:
    """This checkout, and the baseline's when one is given: timed alternately, so a drift
    of the machine's load hits both alike."""
    return {"this": root, **({"baseline": baseline.resolve()} if baseline else {})}


def dated(what: str) -> str:
    load = os.getloadavg()
    return f"{date.today()}  load average {load[0]:.1f} {load[1]:.1f} {load[2]:.1f}  {what}"
