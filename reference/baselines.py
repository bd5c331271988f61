"""The course's baselines: naive, safe decisions for the lessons a run is not about.

A worker run needs all six decisions. A lesson's run puts the lesson's own functions (the
learner's, or the reference's for the oracle run) beside these, in both editions of the
course, so a run never needs another lesson's answer and a public run gives the same
result wherever it is made. Each baseline is what a serving system did before the lesson's
idea, safe but wasteful, so it is never mistaken for that lesson's answer:

- the contract refuses only what the worker cannot hold at all (an empty prompt, no
  output budget, a context over the model's limit or over the whole pool); it knows
  nothing of deadlines;
- admission reserves every request's worst case as if nothing were shared, pays again for
  every cached prefix page it reuses, and waits (never rejects) until that fits;
- the chunk rule prefills fixed chunks, whatever the decode batch or the gap budget;
- cancellation is deferred to the request's end: the client is told at once and a queued
  request leaves the queue, but an admitted one runs to its end, and its pages come back
  then (after the last step that writes them);
- the prefix cache is the worker's own ground truth (keys by true scope and tokens,
  publishes full prompt pages once written): reference/worker/prefix_cache.py.
"""
from __future__ import annotations

from reference.policy import Policy
from reference.shapes import (Admission, AdmissionRequest, ChunkContext, ChunkPlan, LedgerView,
                              ModelSpec, RequestView, Transition, Verdict, WorkerSpec)
from reference.sizing import Geometry, pages_for

FIXED_CHUNK_TOKENS = 512
_STOP, _NOTIFY, _RELEASE = "stop_scheduling", "notify_client", "release_pages"


def baseline_contract(request: RequestView, model: ModelSpec, worker: WorkerSpec) -> Verdict:
    context = request.prompt_tokens + request.max_new_tokens
    for reason, broken in (
            ("empty_prompt", request.prompt_tokens == 0),
            ("no_output_budget", request.max_new_tokens == 0),
            ("over_max_context", context > model.max_context),
            ("over_pool", pages_for(context, worker.page_tokens) > Geometry.of(model, worker).pool_pages)):
        if broken:
            return Verdict(False, reason)
    return Verdict(True)


def baseline_admit(request: AdmissionRequest, ledger: LedgerView) -> Admission:
    worst = pages_for(request.prompt_tokens + request.max_new_tokens, request.page_tokens)
    # Every cached page it reuses is counted as capacity taken as well: no sharing is
    # assumed, so no reuse is ever counted on, and nothing it does can over-commit.
    taken = worst + request.prefix_hit_pages
    free = ledger.unallocated_pages + ledger.evictable_pages - ledger.reserved_pages
    if taken <= free:
        return Admission("admit", worst, "worst case, no sharing")
    return Admission("wait", 0, f"worst case {taken} pages, {free} free")


def baseline_chunk(ctx: ChunkContext) -> ChunkPlan:
    return ChunkPlan(min(FIXED_CHUNK_TOKENS, ctx.prefill_remaining), "ok")


# (state, event, a step in flight?) -> (next state, actions); None stands for either value
# of the flag. Anything not listed leaves the state as it is. A cancel only tells the
# client (and takes a request out of the queue); the request ends when it would have, and
# its pages come back then, after the last step that writes them.
_DEFERRED = {
    ("waiting", "admit", None): ("admitted", ()),
    ("admitted", "step_launched", None): ("running", ()),
    ("waiting", "cancel", None): ("done", (_STOP, _NOTIFY)),
    ("admitted", "cancel", None): ("admitted", (_NOTIFY,)),
    ("running", "cancel", None): ("running", (_NOTIFY,)),
    ("admitted", "finished", False): ("done", (_STOP, _RELEASE)),
    ("running", "finished", False): ("done", (_STOP, _RELEASE)),
    ("admitted", "finished", True): ("cancelling", (_STOP,)),
    ("running", "finished", True): ("cancelling", (_STOP,)),
    ("cancelling", "step_completed", False): ("done", (_RELEASE,)),
}


def baseline_on_event(state: str, event: str, step_in_flight: bool) -> Transition:
    entry = _DEFERRED.get((state, event, None)) or _DEFERRED.get((state, event, step_in_flight))
    return Transition(*entry) if entry else Transition(state)


def baseline_policy() -> Policy:
    return Policy(check_contract=baseline_contract, admit=baseline_admit,
                  choose_chunk=baseline_chunk, on_event=baseline_on_event)
