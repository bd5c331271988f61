"""Which edition this is: the full course, or the learner edition built by `grader release`.

The learner edition carries grader/learner_edition.json; there the instructor commands
(grade, export, feedback, report, gradebook, gradescope, incident, release) do not exist,
since what they need was left out.
"""
from __future__ import annotations

import json
from pathlib import Path

MARKER = Path(__file__).resolve().parent.parent / "learner_edition.json"


def learner_edition() -> dict | None:
    """The release's manifest in the learner edition, else None."""
    try:
        return json.loads(MARKER.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return None

