"""A serving policy: the six plug-in decisions of the course, bundled for the worker.

Each field has a lesson's signature. Where a policy comes from is not this module's
business: a run puts together the functions of the lesson under study (a learner's, in
the sandbox, or the reference's) and the course's baselines for the rest
(reference.baselines), and a design sheet's knobs then distort that core
(reference.knobs). The worker imports nothing else to know what to do.

``prefix_key`` and ``publishable`` may be None: the worker then keys prefix pages by
their true scope and tokens, and publishes a prompt page once it is full and written
(its own ground truth; see reference/worker/prefix_cache.py).
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any, Callable, Optional

DECISION_FIELDS = ("check_contract", "admit", "choose_chunk", "on_event", "prefix_key", "publishable")


@dataclass(frozen=True)
class Policy:
    check_contract: Callable    # (RequestView, ModelSpec, WorkerSpec) -> Verdict
    admit: Callable             # (AdmissionRequest, LedgerView) -> Admission
    choose_chunk: Callable      # (ChunkContext) -> ChunkPlan
    on_event: Callable          # (state, event, step_in_flight) -> Transition
    prefix_key: Optional[Callable] = None    # (scope, parent_key, block_tokens) -> str
    publishable: Optional[Callable] = None   # (tuple[PageInfo, ...]) -> tuple[int, ...]
    gap_budget_s: float = 0.1   # the chunk rule's token-gap budget
    min_chunk_tokens: int = 64
    prefix_cache: bool = True

    def with_(self, **changes: Any) -> "Policy":
        return replace(self, **changes)
