"""Lesson 6's catalogue of changes: each fault a regressed release may carry, with its
mechanism, and each harmless change, as the incidents' changes.yaml words and sets them.

Instructor side (left out of the learner edition, like every module of this folder). An
incident's changes are drawn from this catalogue with these very summaries and diffs, so
the catalogue is every incident's answer key: a change's summary, looked up here, says
whether it is a root cause and with which mechanism, for a student's own incident as for
the public ones. It was a table of grader/course/incident.py, which ships; looked up there,
a learner's own incident was diagnosed with no evidence read (10 of 10 on the hidden grade).
grader/course/incident.py reads it only where an incident is drawn or built (the course):
the learner edition's incidents are recorded, sealed.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from grader.engine.codec import persistent


@persistent
@dataclass(frozen=True)
class Fault:
    name: str
    mechanism: str
    summary: str                       # the change's message, as its author wrote it
    diff: tuple[tuple[str, Any], ...]  # (sheet path, the value R42 sets)
    strong: bool                       # costs goodput on its own, so a fix demonstrably ships
    group: str                         # faults of one group are never drawn together


@persistent
@dataclass(frozen=True)
class Harmless:
    name: str
    summary: str
    diff: tuple[tuple[str, Any], ...]


FAULTS = {f.name: f for f in (
    Fault("inactive_free", "inactive_hits_as_free",
          "Count reactivated prefix-cache pages as free: they are already in memory",
          (("admission_ledger.inactive_hits", "free"),), False, "ledger"),
    Fault("attention_dropped", "attention_term_dropped",
          "Simpler chunk sizing: the step's slack divided by the per-token cost",
          (("chunk_rule.rule", "per_token_only"),), True, "chunk"),
    Fault("reclaim_at_cancel", "reclaim_before_fence",
          "Give a cancelled request's pages back at once instead of waiting for its step",
          (("cancellation.release", "at_cancel"),), False, "reclaim"),
    Fault("reclaim_never", "reclaim_never",
          "Keep a cancelled request's pages so that a client who retries can resume",
          (("cancellation.release", "never"),), True, "reclaim"),
    Fault("key_unscoped", "key_without_scope",
          "One copy of identical system prompts in the prefix cache, whichever tenant sent them",
          (("cancellation.with_scope", False),), True, "key"),
    Fault("stall_hidden", "stall_hidden_by_average",
          "Bigger prefill chunks for faster first tokens; the gate judges streams by their mean "
          "time per output token",
          (("chunk_rule.gap_budget_s", 0.3), ("release_criteria.qualification.token_deadline", "average_tpot")),
          True, "chunk"),
)}

HARMLESS = {h.name: h for h in (
    Harmless("min_chunk", "Raise the minimum prefill chunk to 128 tokens: fewer tiny chunks",
             (("chunk_rule.min_chunk_tokens", 128),)),
    Harmless("fixed_tokens", "Fixed chunks of 1,024 tokens for the benchmark configuration",
             (("chunk_rule.fixed_tokens", 1024),)),
    Harmless("key_encoding", "Document why the prefix keys are unambiguous, in the sheet's own words",
             (("cancellation.key_encoding",
               "no two (scope, parent, block) inputs share a key, whatever their characters; "
               "the same key in every process, under 512 characters"),)),
    Harmless("noise_k", "Widen the release gate's noise band: fewer false alarms",
             (("release_criteria.rule.noise_k", 2.5),)),
)}


# Faults whose evidence the other erases: a leak pins every cached prompt (no hit is ever
# inactive again), and prompts shared across tenants stay active; either way reactivating an
# inactive prompt, and so the inactive-hits fault, leaves no trace to diagnose.
CONFLICTS = {frozenset({"inactive_free", "reclaim_never"}), frozenset({"inactive_free", "key_unscoped"})}
