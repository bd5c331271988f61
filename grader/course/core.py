"""The correct core a design is run on: six decisions and the gate that qualifies requests.

A *design* (a design sheet plus the worker it runs on) says which knobs distort the core
(reference.knobs); the core says what the undistorted decisions are, and how a run's
requests are qualified against their SLOs (lesson 5's qualify). In the course the core is
the reference's; in the learner edition ``grader sheet run`` and the experiments run a
learner's own functions as the core, with the course baselines for the lessons not yet
written. Runs of one core are cached under its identity, so two cores never share a run.
"""
from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from typing import Callable

from reference.policy import Policy


@dataclass(frozen=True)
class Core:
    identity: str            # what the decisions are: "reference", or a learner's files' digests
    policy: Policy           # the six decisions, before any knob
    qualify: Callable        # (RequestRecord, Slo | None) -> one of QUALIFICATIONS
    decide: Callable         # (baseline runs, candidate runs, ReleaseRule) -> ReleaseDecision
    note: str = ""           # how a report names it, when it is not the reference


@lru_cache(maxsize=1)
def reference() -> Core:
    """The reference's decisions and qualify. OracleMissing where the solutions are absent."""
    from grader.engine.oracle import reference_core, reference_solution
    gate = reference_solution("lesson5")
    return Core("reference", reference_core(), gate.qualify, gate.decide_release)
