"""The design sheet's knobs: distortions around a correct core, never alternative answers.

A faulty knob (admission that forgets outstanding promises, a chunk rule without the
attention term, release at the cancel, keys without the scope, ...) is written here as a
change to what a decision is asked or to what it answers, so it applies to any
implementation of the decision: the reference's in the course, a learner's own in the
learner edition, a baseline. ``with_knobs(core, sheet)`` returns the core under the sheet's
knobs; the defaults change nothing.

The knobs, per design-sheet section (the sheet's own keys; a scenario file may give the
contract's rules as ``enforce`` instead of ``reasons``):

    request_contract  reasons            a rule left out is not enforced: the core is asked
                                         again with that rule's limit lifted (empty_prompt
                                         and no_output_budget cannot be lifted: the worker
                                         cannot run such a request)
    admission_ledger  reserve            prompt_only: asked as if max_new were 0
                      active_hits        as_new: active hits shown as pages it must allocate
                      inactive_hits      free: inactive hits shown as active (no capacity)
                      outstanding        ignore: the ledger shows no outstanding promise
                      impossible         wait: a rejection becomes a wait
                      prefix_cache       false: no lookups, no publishing
    chunk_rule        rule               per_token_only: asked under a cost model without
                                         the attention term; fixed: fixed_tokens, always ok
                      gap_budget_s, min_chunk_tokens   passed to the rule
    cancellation      release            at_cancel: asked as if no step were in flight;
                                         never: release_pages removed from every answer
                      with_scope         false: every key asked with the scope ""
                      with_parent        false: every key asked with the parent ""
                      partial            true: partial prompt pages shown as full pages
                      require_written    false: every page shown as written
    load_shedding     max_prompt_tokens  longer prompts rejected at arrival
"""
from __future__ import annotations

from dataclasses import replace
from typing import Any, Callable, Mapping

from reference.policy import Policy
from reference.shapes import (CONTRACT_REASONS, AdmissionRequest, ChunkContext, ChunkPlan,
                              LedgerView, ModelSpec, PageInfo, RequestView, Transition, Verdict,
                              WorkerSpec)

_HUGE = 1 << 50                                # a limit no request reaches
_UNLIFTABLE = ("empty_prompt", "no_output_budget")
# How the limit of each contract rule is lifted for a core that should not enforce it: on
# the model and worker specs, or on the request.
_LIFT_SPECS: dict[str, Callable] = {
    "over_max_context": lambda m, w: (replace(m, max_context=_HUGE), w),
    "over_pool": lambda m, w: (m, replace(w, device_bytes=w.device_bytes + _HUGE * w.page_tokens
                                          * 2 * m.layers * m.kv_heads * m.head_dim * m.dtype_bytes)),
}
_LIFT_REQUEST: dict[str, Callable] = {
    "ttft_unreachable": lambda r: replace(r, slo=replace(r.slo, ttft_s=float(_HUGE))),
    "gap_unreachable": lambda r: replace(r, slo=replace(r.slo, gap_s=float(_HUGE))),
}


# Each section's knobs and what each takes: a tuple of choices (the first the default),
# or a kind. A scenario's sheet is held to it (knob_problem), so a misspelt knob or value
# is an error naming it rather than the default in silence.
KNOBS: dict[str, dict[str, tuple[str, ...] | str]] = {
    "request_contract": {"enforce": "reasons", "reasons": "reasons"},
    "admission_ledger": {"reserve": ("prompt_and_output", "prompt_only"),
                         "active_hits": ("shared", "as_new"), "inactive_hits": ("consume", "free"),
                         "outstanding": ("count", "ignore"), "impossible": ("reject", "wait"),
                         "prefix_cache": "bool"},
    "chunk_rule": {"rule": ("budget", "per_token_only", "fixed"), "fixed_tokens": "count",
                   "gap_budget_s": "seconds", "min_chunk_tokens": "tokens"},
    "cancellation": {"release": ("at_fence", "at_cancel", "never"), "with_scope": "bool",
                     "with_parent": "bool", "partial": "bool", "require_written": "bool"},
    "load_shedding": {"max_prompt_tokens": "count"},
}


def knob_problem(section: str, knob: str | None = None, value: Any = None) -> str:
    """Why ``section`` (or its ``knob``, set to ``value``) is not one the knobs know, in a
    course author's words; "" when it is."""
    if section not in KNOBS:
        return f"not a section with knobs (known: {', '.join(KNOBS)})"
    if knob is None:
        return ""
    takes = KNOBS[section].get(knob)
    if takes is None:
        return f"not a knob of {section} (known: {', '.join(KNOBS[section])})"
    number = isinstance(value, (int, float)) and not isinstance(value, bool)
    if isinstance(takes, tuple):
        return "" if value in takes else f"expected one of {', '.join(takes)}; got {value!r}"
    if takes == "bool":
        return "" if isinstance(value, bool) else f"expected true or false; got {value!r}"
    if takes == "reasons":
        if isinstance(value, list) and all(isinstance(r, str) and r in CONTRACT_REASONS for r in value):
            return ""
        return f"expected a list of contract rules from {', '.join(CONTRACT_REASONS)}; got {value!r}"
    if takes == "seconds":
        return "" if number and 0 < value < float("inf") else f"expected seconds > 0; got {value!r}"
    least = 1 if takes == "count" else 0
    return "" if isinstance(value, int) and not isinstance(value, bool) and value >= least \
        else f"expected an integer >= {least}; got {value!r}"


def _section(sheet: Mapping | None, name: str) -> dict:
    return dict((sheet or {}).get(name) or {})


def _lifted(lifts: list[Callable], last: list, model: ModelSpec, worker: WorkerSpec) -> tuple:
    # A run asks the contract with the same two specs at every arrival: their lifted copies
    # are made once (``last`` holds the specs themselves, so an identity test is sound).
    if last and last[0] is model and last[1] is worker:
        return last[2]
    out = model, worker
    for lift in lifts:
        out = lift(*out)
    last[:] = [model, worker, out]
    return out


# ---- the contract -----------------------------------------------------------------------
def enforcing(core: Callable, enforce: tuple[str, ...]) -> Callable:
    lifted = [r for r in CONTRACT_REASONS if r not in enforce]
    on_specs = [_LIFT_SPECS[r] for r in lifted if r in _LIFT_SPECS]
    on_request = [_LIFT_REQUEST[r] for r in lifted if r in _LIFT_REQUEST]
    if not on_specs and not on_request:
        return core
    last: list = []

    def check_contract(request: RequestView, model: ModelSpec, worker: WorkerSpec) -> Verdict:
        for lift in on_request:
            request = lift(request)
        return core(request, *_lifted(on_specs, last, model, worker))
    return check_contract


def shedding(core: Callable, max_prompt_tokens: int) -> Callable:
    def check_contract(request: RequestView, model: ModelSpec, worker: WorkerSpec) -> Verdict:
        if request.prompt_tokens > max_prompt_tokens:
            return Verdict(False, "load_shedding")
        return core(request, model, worker)
    return check_contract


# ---- admission ------------------------------------------------------------------------------
def ledger_knobs(core: Callable, *, reserve: str = "prompt_and_output", active_hits: str = "shared",
                 inactive_hits: str = "consume", outstanding: str = "count",
                 impossible: str = "reject") -> Callable:
    def admit(request: AdmissionRequest, ledger: LedgerView):
        if reserve == "prompt_only":
            request = replace(request, max_new_tokens=0)
        if active_hits == "as_new":
            request = replace(request, prefix_hit_pages=request.prefix_hit_pages - request.prefix_hit_active,
                              prefix_hit_active=0)
        if inactive_hits == "free":
            request = replace(request, prefix_hit_active=request.prefix_hit_pages)
        if outstanding == "ignore":
            ledger = replace(ledger, reserved_pages=0)
        answer = core(request, ledger)
        if impossible == "wait" and getattr(answer, "decision", None) == "reject":
            return replace(answer, decision="wait", reserve_pages=0)
        return answer
    return admit


# ---- the chunk rule ---------------------------------------------------------------------------
def chunk_knobs(core: Callable, *, rule: str = "budget", fixed_tokens: int = 512) -> Callable:
    if rule == "fixed":
        def fixed(ctx: ChunkContext) -> ChunkPlan:
            return ChunkPlan(min(fixed_tokens, ctx.prefill_remaining), "ok")
        return fixed
    if rule == "per_token_only":
        def per_token_only(ctx: ChunkContext):
            return core(replace(ctx, cost=replace(ctx.cost, per_attention_pair=0.0)))
        return per_token_only
    return core


# ---- cancellation and prefix ownership ------------------------------------------------------------
def release_knobs(core: Callable, *, release: str = "at_fence") -> Callable:
    if release == "at_cancel":
        return lambda state, event, step_in_flight: core(state, event, False)
    if release == "never":
        def on_event(state, event, step_in_flight):
            tr = core(state, event, step_in_flight)
            if isinstance(tr, Transition) and isinstance(tr.actions, tuple) and "release_pages" in tr.actions:
                return replace(tr, actions=tuple(a for a in tr.actions if a != "release_pages"))
            return tr
        return on_event
    return core


def key_knobs(core: Callable | None, *, with_scope: bool = True, with_parent: bool = True) -> Callable | None:
    if core is None or (with_scope and with_parent):
        return core
    return lambda scope, parent_key, block_tokens: core(scope if with_scope else "",
                                                        parent_key if with_parent else "", block_tokens)


def publish_knobs(core: Callable | None, *, partial: bool = False,
                  require_written: bool = True) -> Callable | None:
    if core is None or (not partial and require_written):
        return core

    def shown(p: PageInfo) -> PageInfo:
        if partial and p.prompt_tokens < p.page_tokens:
            p = replace(p, page_tokens=p.prompt_tokens, written_tokens=min(p.written_tokens, p.prompt_tokens))
        if not require_written:
            p = replace(p, written_tokens=p.page_tokens)
        return p
    return lambda pages: core(tuple(shown(p) for p in pages))


# ---- the whole sheet ---------------------------------------------------------------------------------
def _pick(section: dict, names: tuple[str, ...]) -> dict[str, Any]:
    return {k: section[k] for k in names if k in section}


def with_knobs(core: Policy, sheet: Mapping | None = None) -> Policy:
    """``core`` under the design sheet's knobs (a sheet, or a scenario's sheet section)."""
    contract = _section(sheet, "request_contract")
    ledger = _section(sheet, "admission_ledger")
    chunk = _section(sheet, "chunk_rule")
    cancel = _section(sheet, "cancellation")
    shed = _section(sheet, "load_shedding")
    enforce = tuple(contract.get("enforce", contract.get("reasons", CONTRACT_REASONS)))
    enforce += tuple(r for r in _UNLIFTABLE if r not in enforce)
    check = enforcing(core.check_contract, enforce)
    if "max_prompt_tokens" in shed:
        check = shedding(check, int(shed["max_prompt_tokens"]))
    policy = core.with_(
        check_contract=check,
        admit=ledger_knobs(core.admit, **_pick(ledger, ("reserve", "active_hits", "inactive_hits",
                                                       "outstanding", "impossible"))),
        choose_chunk=chunk_knobs(core.choose_chunk, **_pick(chunk, ("rule", "fixed_tokens"))),
        on_event=release_knobs(core.on_event, **_pick(cancel, ("release",))),
        prefix_key=key_knobs(core.prefix_key, **_pick(cancel, ("with_scope", "with_parent"))),
        publishable=publish_knobs(core.publishable, **_pick(cancel, ("partial", "require_written"))))
    changes = {}
    if "gap_budget_s" in chunk:
        changes["gap_budget_s"] = float(chunk["gap_budget_s"])
    if "min_chunk_tokens" in chunk:
        changes["min_chunk_tokens"] = int(chunk["min_chunk_tokens"])
    if "prefix_cache" in ledger:
        changes["prefix_cache"] = bool(ledger["prefix_cache"])
    return policy.with_(**changes) if changes else policy
