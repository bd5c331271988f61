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

Each entry is a *public form* (the demo and the practice incidents are drawn from these)
or a *students' form* (a student's own incident is drawn from these alone). A students'
form never repeats a public form's words, nor a harmless one its diff; students' faults
include mechanisms on knobs no public fault moves and the stall at another value, and
students' harmless changes include knobs a fault moves. So what the public incidents
taught, change by change, is no answer key to a student's own: which change is at fault
is read from the taxonomy and the evidence. Every combination a student may draw is
settled in tests/test_lesson6_students_forms.py.
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
    public: bool = True                # a form the demo and practice incidents draw from


@persistent
@dataclass(frozen=True)
class Harmless:
    name: str
    summary: str
    diff: tuple[tuple[str, Any], ...]
    public: bool = True
    masks: tuple[str, ...] = ()        # never drawn with faults of these groups (it hides their evidence)


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
    # Students' forms: no public incident shows them. The same mechanisms under other words,
    # other values and other knobs, so that what the public incidents taught about one
    # summary or one diff answers nothing about a student's own incident.
    Fault("cached_pages_uncharged", "inactive_hits_as_free",
          "Admission stops charging for prompt pages it finds in the prefix cache",
          (("admission_ledger.inactive_hits", "free"),), False, "ledger", False),
    Fault("ledger_forgets_running", "outstanding_ignored",
          "Admit against the pages free right now: running requests hand theirs back as they finish",
          (("admission_ledger.outstanding", "ignore"),), False, "ledger", False),
    Fault("reserve_prompt_only", "output_not_reserved",
          "Reserve pages for the prompt alone; most replies stop well short of their output budget",
          (("admission_ledger.reserve", "prompt_only"),), False, "ledger", False),
    Fault("chunks_by_token_rate", "attention_term_dropped",
          "Size prefill chunks from the measured cost per prompt token",
          (("chunk_rule.rule", "per_token_only"),), True, "chunk", False),
    Fault("long_steps_mean_gate", "stall_hidden_by_average",
          "Allow 400 ms prefill steps to drain the queue; qualify streams on their mean token interval",
          (("chunk_rule.gap_budget_s", 0.4), ("release_criteria.qualification.token_deadline", "average_tpot")),
          True, "chunk", False),
    Fault("free_on_hangup", "reclaim_before_fence",
          "Return memory the moment a client hangs up",
          (("cancellation.release", "at_cancel"),), False, "reclaim", False),
    Fault("keep_for_reconnect", "reclaim_never",
          "Hold a cancelled request's cache so that a reconnecting client skips its prefill",
          (("cancellation.release", "never"),), True, "reclaim", False),
    Fault("shared_system_prompts", "key_without_scope",
          "Share cached system prompts between tenants to raise the hit rate",
          (("cancellation.with_scope", False),), True, "key", False),
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
    # Students' forms, some on knobs a fault moves: which knob a change touches says
    # nothing of whether it is at fault.
    Harmless("gap_headroom", "Keep 10 ms of headroom under the prefill step budget",
             (("chunk_rule.gap_budget_s", 0.09),), False),
    Harmless("fixed_chunks", "Fixed prefill chunks of 384 tokens: every step's length known in advance",
             (("chunk_rule.rule", "fixed"), ("chunk_rule.fixed_tokens", 384)), False,
             # fixed chunks never read the budget a chunk fault bends, and with a leak beside a
             # ledger fault they left it no broken promise to show (settled on 2026-12-07)
             ("chunk", "ledger")),
    Harmless("min_chunk_small", "Lower the minimum prefill chunk to 32 tokens",
             (("chunk_rule.min_chunk_tokens", 32),), False),
    Harmless("gain_bar", "Ask a release for a 3% gain before it ships",
             (("release_criteria.rule.min_gain", 0.03),), False),
    Harmless("fence_words", "Say in the sheet when a cancelled client hears back and when its pages do",
             (("cancellation.fence", "the client hears at once; its pages return when the step that writes "
                                     "them completes"),), False),
)}


# Mechanisms whose evidence the other erases: a leak pins every cached prompt (no hit is ever
# inactive again), and prompts shared across tenants stay active; either way reactivating an
# inactive prompt, and so the inactive-hits fault, leaves no trace to diagnose.
CONFLICTS = {frozenset({"inactive_hits_as_free", "reclaim_never"}),
             frozenset({"inactive_hits_as_free", "key_without_scope"})}
