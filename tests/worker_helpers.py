"""Small machines, hand-built requests, workloads and faulty policies for the worker's tests.

The worker's books are checked on small pools (tens to hundreds of pages) so that every
event can be audited (``check_invariants=True``) and the whole suite stays quick.
"""
from __future__ import annotations

import copy
from collections import Counter

import numpy as np

from grader.engine.oracle import reference_policy
from reference.policy import Policy
from reference.records import Run
from reference.request import Request
from reference.shapes import (OUTCOMES, Admission, CostModel, ModelSpec, Slo, Transition,
                              WorkerSpec)
from reference.solutions import lesson4
from reference.solutions.lesson1 import pages_for, pool_pages
from reference.workload import generate, parse_workload
from reference.worker import simulate

STOP, NOTIFY, RELEASE = "stop_scheduling", "notify_client", "release_pages"
LOOSE = Slo(ttft_s=1000.0, gap_s=1000.0)   # no request breaks its contract on time


# ---- machines --------------------------------------------------------------------------
def machine(pages: int, *, page_tokens: int = 16, max_running: int = 64,
            max_context: int = 32768, cost: CostModel = CostModel()) -> tuple[ModelSpec, WorkerSpec]:
    """A tiny model (256 B of KV per token) on a worker whose pool holds exactly ``pages``."""
    model = ModelSpec("tiny", layers=1, kv_heads=1, head_dim=64, dtype_bytes=2,
                      max_context=max_context, weight_bytes=1 << 20)
    page_bytes = 256 * page_tokens
    worker = WorkerSpec(device_bytes=model.weight_bytes + (1 << 16) + pages * page_bytes,
                        reserved_bytes=1 << 16, page_tokens=page_tokens, max_running=max_running,
                        cost=cost)
    assert pool_pages(model, worker) == pages
    return model, worker


# ---- hand-built requests ------------------------------------------------------------------
def request(index: int, arrival_s: float, prompt, output: int, *, max_new: int | None = None,
            scope: str = "a", cancel_at_s: float | None = None, slo: Slo = LOOSE) -> Request:
    """``prompt`` is a token count (tokens unique to this request) or the token ids."""
    if isinstance(prompt, int):
        tokens = np.arange(100_000 * (index + 1), 100_000 * (index + 1) + prompt, dtype=np.int32)
    else:
        tokens = np.asarray(prompt, dtype=np.int32)
    tokens.setflags(write=False)
    return Request(index=index, id=f"r{index}", scope=scope, cls="default", arrival_s=arrival_s,
                   prompt=tokens, max_new_tokens=max_new or output, output_tokens=output,
                   slo=slo, cancel_at_s=cancel_at_s)


# ---- generated workloads ------------------------------------------------------------------
BASE = {
    "name": "worker-test",
    "seed": 1,
    "requests": 150,
    "arrival": {"process": "poisson", "rate": 20.0},
    "prompt": {"dist": "lognormal", "median": 200, "sigma": 0.6, "min": 1, "max": 1200},
    "output": {"dist": "lognormal", "median": 40, "sigma": 0.8, "min": 1, "max": 400},
    "max_new": {"slack": [1.0, 3.0]},
    "scopes": [{"name": "acme", "weight": 3}, {"name": "globex"}],
    "classes": [{"name": "loose", "weight": 1, "ttft_s": 1000.0, "gap_s": 1000.0}],
}

PREFIX_SCOPES = [
    {"name": "acme", "weight": 3, "prefix_groups": 2, "prefix_share": 0.8,
     "prefix_tokens": {"dist": "fixed", "value": 256}},
    {"name": "globex", "weight": 2, "prefix_groups": 2, "prefix_share": 0.7,
     "prefix_tokens": {"dist": "fixed", "value": 256}},
    {"name": "initech", "prefix_groups": 1, "prefix_share": 0.5,
     "prefix_tokens": {"dist": "choice", "values": [128, 256]}},
]


def workload(**changes) -> dict:
    mapping = copy.deepcopy(BASE)
    mapping.update(copy.deepcopy(changes))
    return mapping


# name -> (workload mapping, machine keyword arguments)
WORKLOADS = {
    "heavy": (workload(), {"pages": 200}),
    "prefix-multiscope": (workload(
        requests=120, arrival={"process": "gamma", "rate": 30.0, "cv": 2.0},
        prompt={"dist": "lognormal", "median": 64, "sigma": 0.7, "min": 1, "max": 512},
        output={"dist": "lognormal", "median": 32, "sigma": 0.7, "min": 1, "max": 256},
        scopes=PREFIX_SCOPES, shared_text_across_scopes=True,
        cancel={"probability": 0.1, "after_s": {"dist": "uniform", "min": 0.0, "max": 1.0}}),
        {"pages": 150}),
    "cancel-heavy": (workload(
        requests=150, scopes=PREFIX_SCOPES[:1],
        cancel={"probability": 0.5, "after_s": {"dist": "uniform", "min": 0.0, "max": 0.6}}),
        {"pages": 200}),
    "long-outputs": (workload(
        requests=60, arrival={"process": "poisson", "rate": 10.0},
        prompt={"dist": "lognormal", "median": 64, "sigma": 0.5, "min": 1, "max": 400},
        output={"dist": "lognormal", "median": 300, "sigma": 0.5, "min": 50, "max": 1500},
        max_new={"slack": [1.0, 1.5]}), {"pages": 300}),
    "page-tokens-1": (workload(
        requests=100, arrival={"process": "poisson", "rate": 40.0},
        prompt={"dist": "lognormal", "median": 12, "sigma": 0.6, "min": 1, "max": 60},
        output={"dist": "lognormal", "median": 8, "sigma": 0.6, "min": 1, "max": 60},
        scopes=[dict(s, prefix_tokens={"dist": "fixed", "value": 8}) for s in PREFIX_SCOPES],
        shared_text_across_scopes=True,
        cancel={"probability": 0.2, "after_s": {"dist": "uniform", "min": 0.0, "max": 0.3}}),
        {"pages": 120, "page_tokens": 1}),
    "max-running-1": (workload(
        requests=40, arrival={"process": "poisson", "rate": 10.0},
        scopes=PREFIX_SCOPES[:2],
        cancel={"probability": 0.3, "after_s": {"dist": "uniform", "min": 0.0, "max": 2.0}}),
        {"pages": 100, "max_running": 1}),
}


def requests_of(mapping: dict, seed: int | None = None) -> tuple[Request, ...]:
    spec = parse_workload(mapping, "worker-test")
    return generate(spec, spec.seed if seed is None else seed)


def scenario(name: str, seed: int | None = None):
    """(model, worker, requests) of a named test workload."""
    mapping, machine_kw = WORKLOADS[name]
    model, worker = machine(**machine_kw)
    return model, worker, requests_of(mapping, seed)


def run(model, worker, policy: Policy | None, requests, **kw) -> Run:
    """The worker with its books audited after every event."""
    return simulate(model, worker, policy or reference_policy(), requests,
                    check_invariants=True, **kw)


def nonzero(run: Run) -> dict[str, int]:
    return {k: v for k, v in run.counts().items() if v}


def outcomes(run: Run) -> Counter:
    return Counter(r.outcome for r in run.requests)


# ---- faulty state machines (lesson 4's on_event, altered) ------------------------------------
def double_release_on_event(state: str, event: str, step_in_flight: bool) -> Transition:
    """Releases on cancel at once, and again at the fence: pages released twice."""
    if event == "cancel" and state in ("admitted", "running"):
        return Transition("cancelling" if step_in_flight else "done", (STOP, NOTIFY, RELEASE))
    if state == "cancelling" and event == "step_completed":
        return Transition("done", (RELEASE,))
    return lesson4.on_event(state, event, step_in_flight)


def no_stop_on_event(state: str, event: str, step_in_flight: bool) -> Transition:
    """The reference machine without stop_scheduling on cancel."""
    tr = lesson4.on_event(state, event, step_in_flight)
    if event == "cancel":
        return Transition(tr.next_state, tuple(a for a in tr.actions if a != STOP))
    return tr


# Policies whose faults stress the books in different ways (the books must hold anyway).
def policy_variants() -> dict[str, Policy]:
    ref = reference_policy()
    return {
        "reference": ref,
        "prompt_only": reference_policy({"admission_ledger": {"reserve": "prompt_only"}}),
        "outstanding_ignore": reference_policy({"admission_ledger": {"outstanding": "ignore",
                                                                     "inactive_hits": "free"}}),
        "release_at_cancel": reference_policy({"cancellation": {"release": "at_cancel"}}),
        "double_release": ref.with_(on_event=double_release_on_event),
        "no_stop": ref.with_(on_event=no_stop_on_event),
        "leaky_prefix": reference_policy({"cancellation": {
            "with_scope": False, "with_parent": False, "partial": True, "require_written": False}}),
        "fixed_chunks": reference_policy({"chunk_rule": {"rule": "fixed", "fixed_tokens": 40},
                                          "admission_ledger": {"prefix_cache": False}}),
        # Admits everything and promises nothing: prompt allocations fail at admission.
        "greedy": ref.with_(admit=lambda ask, ledger: Admission("admit", 0)),
        "never_release": reference_policy({"cancellation": {"release": "never"}}),
    }


# ---- what every run must satisfy, whatever the policy ------------------------------------------
def check_records(run: Run, requests, worker: WorkerSpec) -> None:
    """Per-request facts that follow from the worker's semantics alone."""
    pt = worker.page_tokens
    ends = set((run.steps.launch_s + run.steps.duration_s).tolist())
    assert len(run.requests) == len(requests)
    for rec, req in zip(run.requests, requests):
        assert rec.id == req.id and rec.outcome in OUTCOMES, rec
        assert rec.tokens_out == len(rec.token_times) <= req.output_tokens, rec.id
        times = rec.token_times
        assert all(a < b for a, b in zip(times, times[1:])), f"{rec.id}: token times not increasing"
        assert set(times) <= ends, f"{rec.id}: a token outside a step's end"
        if times:
            assert rec.first_token_s == times[0] and rec.admitted_s is not None
            assert req.arrival_s <= rec.admitted_s < rec.first_token_s
        if rec.outcome == "completed":
            assert rec.tokens_out == req.output_tokens and rec.finish_s == times[-1], rec.id
            # Pages grow one at a time as the context crosses a boundary: the most it held is
            # the final context, prompt plus every output token, in pages.
            assert rec.pages_held == pages_for(req.prompt_tokens + req.output_tokens, pt), rec.id
        else:
            assert rec.finish_s is None
        if rec.outcome == "cancelled_by_client":
            assert rec.cancel_s == req.cancel_at_s
        assert rec.pages_held <= run.total_pages
    steps = run.steps
    assert np.all(steps.duration_s > 0)
    # One step in flight at a time.
    assert np.all(steps.launch_s[1:] >= steps.launch_s[:-1] + steps.duration_s[:-1])
    assert np.all(steps.batch <= worker.max_running)
    assert all((c > 0) == (r != "") for c, r in zip(steps.chunk_tokens.tolist(), steps.chunk_request))
    series = run.series
    assert len(series["time_s"]) == len(steps)
    assert np.all(series["free"] + series["evictable"] <= run.total_pages)
    assert np.all(series["reserved"] >= 0)
    assert np.all(np.diff(series["prefix_hits"]) >= 0)


def replay_steps(run: Run, requests, worker: WorkerSpec):
    """Each step's batch, duration and pinned pages, rebuilt from the request records alone.

    Valid for runs without cancellations: a decode step that emits token k (k >= 2) of a
    request with a p-token prompt reads a context of p + k - 1 and holds pages for p + k
    tokens; a prefill chunk's request holds its prompt's pages, plus the first token's slot
    on its last chunk (where "done" counts the tokens already prefilled or hit).
    """
    pt, cost, steps = worker.page_tokens, worker.cost, run.steps
    ends = steps.launch_s + steps.duration_s
    index = {e: i for i, e in enumerate(ends.tolist())}
    contexts: list[list[int]] = [[] for _ in range(len(steps))]
    pinned = [0] * len(steps)
    by_id = {r.id: r for r in requests}
    for rec in run.requests:
        p = by_id[rec.id].prompt_tokens
        for k, t in enumerate(rec.token_times[1:], start=2):
            contexts[index[t]].append(p + k - 1)
            pinned[index[t]] += pages_for(p + k, pt)
    done = {rid: by_id[rid].prompt_tokens - int(steps.chunk_tokens[[
        i for i, r in enumerate(steps.chunk_request) if r == rid]].sum())
        for rid in set(steps.chunk_request) - {""}}
    durations = []
    for i, rid in enumerate(steps.chunk_request):
        chunk, d = int(steps.chunk_tokens[i]), 0
        if rid:
            p, d = by_id[rid].prompt_tokens, done[rid]
            done[rid] += chunk
            pinned[i] += pages_for(p + (done[rid] == p), pt)
        durations.append(cost.step_time(tuple(contexts[i]), chunk, d))
    return [len(c) for c in contexts], durations, pinned
