"""A serving policy: the six plug-in decisions of the course, bundled for the worker.

Each field has a lesson's signature. ``reference_policy(sheet)`` binds the reference
solutions to a design sheet's knobs; the grader swaps in one learner function (run
in the sandbox) and keeps the reference for the rest.
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from functools import partial
from typing import Any, Callable, Mapping

from reference.solutions import lesson1, lesson2, lesson3, lesson4
from reference.shapes import CONTRACT_REASONS, ModelSpec, RequestView, Verdict, WorkerSpec


@dataclass(frozen=True)
class Policy:
    check_contract: Callable    # (RequestView, ModelSpec, WorkerSpec) -> Verdict
    admit: Callable             # (AdmissionRequest, LedgerView) -> Admission
    choose_chunk: Callable      # (ChunkContext) -> ChunkPlan
    on_event: Callable          # (state, event, step_in_flight) -> Transition
    prefix_key: Callable        # (scope, parent_key, block_tokens) -> str
    publishable: Callable       # (tuple[PageInfo, ...]) -> tuple[int, ...]
    gap_budget_s: float = 0.1   # the chunk rule's token-gap budget
    min_chunk_tokens: int = 64
    prefix_cache: bool = True

    def with_(self, **changes: Any) -> "Policy":
        return replace(self, **changes)


def _enforced_contract(request: RequestView, model: ModelSpec, worker: WorkerSpec, *,
                       enforce: tuple[str, ...]) -> Verdict:
    reasons = [r for r in lesson1.contract_reasons(request, model, worker) if r in enforce]
    return Verdict(ok=not reasons, reason=reasons[0] if reasons else "")


def _section(sheet: Mapping | None, name: str) -> dict:
    return dict((sheet or {}).get(name) or {})


def reference_policy(sheet: Mapping | None = None) -> Policy:
    """The reference policy under a design sheet's knobs (defaults: the correct policy)."""
    contract = _section(sheet, "request_contract")
    ledger = _section(sheet, "admission_ledger")
    chunk = _section(sheet, "chunk_rule")
    cancel = _section(sheet, "cancellation")
    enforce = tuple(contract.get("enforce", CONTRACT_REASONS))
    return Policy(
        check_contract=partial(_enforced_contract, enforce=enforce),
        admit=partial(lesson2.admit, **{k: ledger[k] for k in
                                         ("reserve", "active_hits", "inactive_hits", "outstanding",
                                          "impossible") if k in ledger}),
        choose_chunk=partial(lesson3.choose_chunk, **{k: chunk[k] for k in ("rule", "fixed_tokens")
                                                       if k in chunk}),
        on_event=partial(lesson4.on_event, **{k: cancel[k] for k in ("release",) if k in cancel}),
        prefix_key=partial(lesson4.prefix_key, **{k: cancel[k] for k in ("with_scope", "with_parent")
                                                   if k in cancel}),
        publishable=partial(lesson4.publishable, **{k: cancel[k] for k in ("partial", "require_written")
                                                     if k in cancel}),
        gap_budget_s=float(chunk.get("gap_budget_s", 0.1)),
        min_chunk_tokens=int(chunk.get("min_chunk_tokens", 64)),
        prefix_cache=bool(ledger.get("prefix_cache", True)),
    )
