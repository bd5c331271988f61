"""Preemption under over-admission: who is preempted, what a recompute costs, and how a run
that cannot finish stops and says so (reference/worker/admission.py, engine.py).

The case is the one that used to livelock: four long-output requests admitted on their
prompts alone (``reserve: prompt_only``, prefix cache off) into a pool that holds a quarter
of their final contexts each. When the pool is full, whoever crosses a page boundary first
breaks its promise.
"""
from __future__ import annotations

import numpy as np

from grader.engine.oracle import reference_policy
from reference.solutions.lesson1 import pages_for
from reference.worker import simulate
from reference.worker.engine import Worker
from worker_helpers import machine, nonzero, outcomes, request, run

PROMPT, OUTPUT, PAGES = 250, 3000, 384
OVER = reference_policy({"admission_ledger": {"reserve": "prompt_only", "prefix_cache": False}})
CORRECT = reference_policy({"admission_ledger": {"prefix_cache": False}})


def four():
    return tuple(request(i, 0.0, PROMPT, OUTPUT) for i in range(4))


def ends(result) -> np.ndarray:
    return result.steps.launch_s + result.steps.duration_s


def test_the_case_over_admits():
    # Each request's final context is pages_for(3,250) = 204 pages: the correct ledger runs
    # them one at a time (2 x 204 > 384), the prompt-only one admits all four (4 x 16 pages).
    assert pages_for(PROMPT + OUTPUT, 16) == 204 and 2 * 204 > PAGES
    model, worker = machine(PAGES)
    correct = run(model, worker, CORRECT, four())
    admitted = sorted(r.admitted_s for r in correct.requests)
    finished = sorted(r.finish_s for r in correct.requests)
    assert all(a >= f for a, f in zip(admitted[1:], finished))      # one at a time
    assert nonzero(correct) == {}


def test_over_admission_preempts_the_latest_admitted_and_every_request_completes():
    model, worker = machine(PAGES)
    result = run(model, worker, OVER, four())              # the books audited after every event
    assert not result.aborted and outcomes(result) == {"completed": 4}
    r0, r1, r2, r3 = result.requests
    assert all(r.tokens_out == OUTPUT for r in result.requests)
    # All four decode in lockstep, r0 one token ahead of r1, r1 of r2, r2 of r3 (their
    # prompts were prefilled one per step), so r0 is the first to cross a page boundary
    # once the pool is full: at 96 pages each (4 x 96 = 384), it needs its 97th. Each time,
    # the request admitted last among those still running is preempted for it.
    broken = [v for v in result.violations if v.kind == "broken_promise"]
    assert nonzero(result) == {"broken_promise": 3}
    assert [v.requests for v in broken] == [("r0", "r3"), ("r0", "r2"), ("r0", "r1")]
    assert broken[0].detail.startswith("r0 needed page 97 with 0 reserved pages left; 0 free")
    assert [r.preemptions for r in result.requests] == [0, 1, 1, 1]
    # r0 was never in anyone's way: a token at the end of every step until its last.
    assert r0.token_times == tuple(ends(result)[:OUTPUT].tolist())
    # The victims wait for r0's pages, then come back in their admission order (the queue's
    # order survives preemption), each emitting its next token only after r0 finished.
    resumed = []
    for victim, v in zip((r3, r2, r1), broken):
        times = np.asarray(victim.token_times)
        after = times[times > v.time_s]
        assert after[0] > r0.finish_s
        resumed.append(after[0])
    assert resumed[2] < resumed[1] < resumed[0]             # r1, then r2, then r3


def test_what_over_admission_costs_on_this_case():
    """Tokens per simulated second against the correct ledger, and the victims' stalls.

    The prompt-only ledger does not lose throughput here: four decoders share each step
    for most of the run, where the correct ledger runs one, and a decode step of four
    costs little more than a step of one. What it costs is the victims' latency: each
    stalls from its preemption until r0's pages come back, far beyond any gap SLO."""
    model, worker = machine(PAGES)
    over, correct = (simulate(model, worker, p, four()) for p in (OVER, CORRECT))
    rate = {name: sum(r.tokens_out for r in res.requests) / res.end_s
            for name, res in (("over", over), ("correct", correct))}
    assert sum(r.tokens_out for r in over.requests) == sum(r.tokens_out for r in correct.requests)
    assert rate["over"] > 2 * rate["correct"]
    # The correct ledger's largest gap is one decode step; the victims' are whole seconds.
    step = max(max(np.diff(r.token_times)) for r in correct.requests)
    assert step <= correct.steps.duration_s.max()
    gaps = {r.id: max(np.diff(r.token_times)) for r in over.requests}
    assert gaps["r0"] <= over.steps.duration_s.max()
    assert min(gaps["r1"], gaps["r2"], gaps["r3"]) > 100 * step


def test_a_recompute_is_a_prefill_of_prompt_and_emitted_tokens_priced_like_any():
    """On a long context the victim's recompute takes several chunks of the chunk rule,
    each a step the cost model prices with the decoders that share it."""
    model, worker = machine(3072)
    reqs = tuple(request(i, 0.0, 1000, 12000) for i in range(4))
    result = simulate(model, worker, OVER, reqs)
    assert outcomes(result) == {"completed": 4}
    (v,) = [v for v in result.violations if v.kind == "broken_promise"]
    asker, victim = v.requests
    rec = result.by_id()[victim]
    emitted = sum(1 for t in rec.token_times if t <= v.time_s)
    steps, cost = result.steps, worker.cost
    mine = [i for i in range(len(steps)) if steps.chunk_request[i] == victim
            and steps.launch_s[i] > v.time_s]
    assert int(steps.chunk_tokens[mine].sum()) == 1000 + emitted   # the whole context, again
    assert len(mine) > 1 and {steps.chunk_verdict[i] for i in mine} == {"ok"}
    assert all(steps.duration_s[i] <= OVER.gap_budget_s for i in mine)
    # Rebuilt from the records: a token k (k >= 2) of another request at a step's end was
    # a decode in it, reading prompt + k - 1 tokens; the chunk pays for the tokens it
    # prefilled before in this recompute (its attention term).
    at = {e: i for i, e in enumerate(ends(result).tolist())}
    contexts = {i: [] for i in mine}
    for r in result.requests:
        if r.id != victim:
            for k, t in enumerate(r.token_times[1:], start=2):
                if at[t] in contexts:
                    contexts[at[t]].append(1000 + k - 1)
    done = 0
    for i in mine:
        chunk = int(steps.chunk_tokens[i])
        assert steps.batch[i] == len(contexts[i])
        assert steps.duration_s[i] == cost.step_time(tuple(contexts[i]), chunk, done)
        done += chunk


class AskerIsVictim(Worker):
    """The rule the worker had before: the request that asked for the page is preempted."""

    def _grow(self, live):
        if self._allocate(live):
            return True
        self._violate("broken_promise", live, detail=self._shortfall(live))
        self._preempt(live)
        return False


def test_preempting_the_asker_livelocks_and_the_run_stops_within_its_stall_bound():
    model, worker = machine(PAGES)
    worker_ = AskerIsVictim(model, worker, OVER, four(), None, False)
    limit = worker_.stall_limit
    assert limit == PROMPT + OUTPUT + 64
    result = worker_.run()
    # Each asker takes its pages straight back when re-admitted, before the others get
    # theirs: requests sit at page boundaries, preempting one another, and no token comes.
    assert result.unfinished == ("r0", "r1", "r2", "r3")
    assert outcomes(result) == {"failed": 4}
    last_token = max(max(r.token_times) for r in result.requests)
    stopped_at = len(result.steps)
    assert result.aborted == (f"stopped after step {stopped_at}: no token and no request ended for "
                              f"{limit + 1} steps (stuck: a healthy run has one within {limit})")
    # It stops one step past the bound, counted from the step of the last token.
    assert stopped_at == int(np.searchsorted(ends(result), last_token)) + 1 + limit + 1
    assert all(r.tokens_out < OUTPUT and r.reason.startswith("unfinished (") for r in result.requests)
    assert sum(r.preemptions for r in result.requests) > 1000


def test_the_stall_bound_never_stops_a_run_that_progresses_one_token_a_step():
    """The longest a healthy run goes without a token: one request prefilled a token per
    step with nothing decoding. It must finish, however close it comes to the bound."""
    model, worker = machine(200)
    one_token = reference_policy({"chunk_rule": {"rule": "fixed", "fixed_tokens": 1},
                                  "admission_ledger": {"prefix_cache": False}})
    reqs = (request(0, 0.0, 2000, 1),)
    result = simulate(model, worker, one_token, reqs)
    assert not result.aborted and outcomes(result) == {"completed": 1}
    assert len(result.steps) == 2000                        # 1,999 steps without a token
    w = Worker(model, worker, one_token, reqs, None, False)
    assert len(result.steps) - 1 <= w.stall_limit < len(result.steps) + 100


def test_a_re_admission_asks_for_its_context_and_the_budget_left():
    """A victim comes back with its prompt and the tokens it had emitted as its prompt,
    and its budget less those tokens as its max_new_tokens: its footprint (the two summed)
    is unchanged, so an admission policy reserves its worst case again, not more."""
    asks = []

    def admit(ask, ledger):
        asks.append((ask.id, ask.prompt_tokens, ask.max_new_tokens))
        return OVER.admit(ask, ledger)

    model, worker = machine(PAGES)
    result = run(model, worker, OVER.with_(admit=admit), four())
    for v in (v for v in result.violations if v.kind == "broken_promise"):
        victim = result.by_id()[v.requests[1]]
        emitted = sum(1 for t in victim.token_times if t <= v.time_s)
        again = {(p, m) for rid, p, m in asks if rid == victim.id and p != PROMPT}
        assert again == {(PROMPT + emitted, OUTPUT - emitted)}, victim.id


class ChunksWriteNothing(Worker):
    """A worker whose prefill chunks write no token: no step ever emits one."""

    def _plan_chunk(self):
        live, _, verdict = super()._plan_chunk()
        return live, 0, verdict


def test_a_run_stuck_from_its_first_step_stops_one_step_past_its_stall_bound():
    """With no token ever, the stall bound counts from the start of the run: it stops after
    step limit + 1, the first to leave more than ``limit`` steps without a token."""
    model, worker = machine(40)
    stuck = ChunksWriteNothing(model, worker, CORRECT, (request(0, 0.0, 20, 5),), None, True)
    limit = stuck.stall_limit
    assert limit == 20 + 5 + 64
    result = stuck.run()
    assert len(result.steps) == limit + 1 and result.unfinished == ("r0",)
    assert result.aborted == (f"stopped after step {limit + 1}: no token and no request ended for "
                              f"{limit + 1} steps (stuck: a healthy run has one within {limit})")


class FirstTokenThenStuck(Worker):
    """A worker that preempts a request at its first token and whose recomputes write no
    token: after that first token, nothing."""

    def _first_token(self, live, index):
        super()._first_token(live, index)
        if live.phase == "decode":
            self._preempt(live)

    def _plan_chunk(self):
        live, chunk, verdict = super()._plan_chunk()
        return live, 0 if live is not None and live.preemptions else chunk, verdict


def test_the_stall_bound_counts_from_the_step_after_a_first_token():
    """Step 0 emits r0's first token, so the run has progressed up to step 1, and it stops
    after step limit + 2, the first to leave more than ``limit`` steps since then."""
    model, worker = machine(40)
    stuck = FirstTokenThenStuck(model, worker, CORRECT, (request(0, 0.0, 20, 5),), None, True)
    limit = stuck.stall_limit
    result = stuck.run()
    (r0,) = result.requests
    assert r0.tokens_out == 1 and r0.preemptions == 1
    assert len(result.steps) == limit + 2
    assert result.aborted == (f"stopped after step {limit + 2}: no token and no request ended for "
                              f"{limit + 1} steps (stuck: a healthy run has one within {limit})")


def _admissions(trace: list, rid: str) -> list[tuple[list[int], list[int], set[int]]]:
    """Each admission of ``rid`` read from the trace: (its prefix hits, the pages taken for
    the rest of its prompt in block order, the pages it published until it left)."""
    found, pending, current = [], [], None
    for event in trace:
        if len(event) < 3 or event[2] != rid:
            continue
        kind = event[0]
        if kind in ("ref", "take"):
            pending.append(event)
        elif kind == "unref":
            pending = []                  # an attempt given back, or a departure
        elif kind == "admit":
            current = ([e[3] for e in pending if e[0] == "ref"], [e[3] for e in pending if e[0] == "take"], set())
            found.append(current)
            pending = []
        elif kind == "publish" and current is not None:
            current[2].add(event[3])
        elif kind == "requeue":
            current = None
    return found


def test_a_victim_recomputing_its_prompt_publishes_the_blocks_it_lost_again():
    """A victim's cached prompt pages are evicted while it waits, so it comes back with
    fewer hits than it had published; its recompute writes those blocks again, and the
    first one it missed (whose key is no longer cached) must be published again, or every
    later request with that prefix misses it too. Found in a review: the publishing book
    kept the pages offered before the preemption as if they were still published."""
    model, worker = machine(256)
    policy = reference_policy({"admission_ledger": {"reserve": "prompt_only"},
                               "chunk_rule": {"rule": "fixed", "fixed_tokens": 256}})
    prompt = 800                            # 50 full blocks, prefilled in 4 chunks
    walked = (prompt - 1) // 16             # the blocks a lookup walks: one token stays to prefill
    reqs = tuple(request(i, 0.0, prompt, 2000) for i in range(4))
    trace: list = []
    result = simulate(model, worker, policy, reqs, trace=trace, check_invariants=True)
    assert outcomes(result) == {"completed": 4}
    lost = 0
    for r in reqs:
        before = 0
        for hits, taken, published in _admissions(trace, r.id):
            blocks = hits + taken
            if len(hits) < before:          # it had published more than it hit now
                lost += 1
                assert blocks[len(hits)] in published, (r.id, len(hits), before)
            before = len(hits) + sum(1 for p in blocks[len(hits):walked] if p in published)
    assert lost                              # the premise: some victim lost cached blocks
