"""The values that cross the boundary between the grader and a learner's code.

Every argument a learner function receives and every value it returns is one of
these frozen dataclasses of plain values (ints, floats, strings, tuples), so a call
can be sent to an isolated child process and back as JSON. This module is the only
course module a submission may import (``from reference.shapes import ...``): it
uses the standard library alone, holds no solution, and is the same file inside the
sandbox and out.

Units: bytes are integers in binary units; times are seconds (float).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional

__all__ = [
    "ModelSpec", "CostModel", "WorkerSpec", "Slo", "RequestView", "Verdict",
    "AdmissionRequest", "LedgerView", "Admission", "ChunkContext", "ChunkPlan",
    "Transition", "PageInfo", "RequestRecord",
    "CONTRACT_REASONS", "DECISIONS", "CHUNK_VERDICTS", "STATES", "EVENTS", "ACTIONS",
    "OUTCOMES", "attention_pairs",
    "QUALIFICATIONS", "RELEASE_DECISIONS", "ClassSummary", "RunSummary", "ReleaseRule",
    "ReleaseDecision",
]

# Lesson 1: why a request breaks its contract, in the order the reference checks them.
CONTRACT_REASONS = (
    "empty_prompt",       # no prompt tokens
    "no_output_budget",   # no output tokens allowed
    "over_max_context",   # the prompt and the output budget exceed the model's context window
    "over_pool",          # the worst case needs more pages than the whole pool
    "ttft_unreachable",   # one chunk of the whole prompt on an idle worker misses ttft
    "gap_unreachable",    # one decode step of this request alone, at its largest context, misses gap
)
DECISIONS = ("admit", "wait", "reject")                       # lesson 2
CHUNK_VERDICTS = ("ok", "starved", "infeasible")              # lesson 3
STATES = ("waiting", "admitted", "running", "cancelling", "done")          # lesson 4
EVENTS = ("admit", "step_launched", "step_completed", "finished", "cancel")
ACTIONS = ("stop_scheduling", "notify_client", "release_pages")
OUTCOMES = ("completed", "cancelled_by_client", "rejected", "preempted", "failed")


@dataclass(frozen=True)
class ModelSpec:
    """A dense decoder: its KV geometry (layers, KV heads, head size, bytes per element),
    its context window in tokens and the bytes of its weights."""
    name: str
    layers: int
    kv_heads: int
    head_dim: int
    dtype_bytes: int
    max_context: int
    weight_bytes: int


def attention_pairs(chunk_tokens: int, chunk_done: int) -> int:
    """Causal attention pairs of a prefill chunk of c tokens after d prefilled tokens."""
    c, d = chunk_tokens, chunk_done
    return c * d + c * (c + 1) // 2


@dataclass(frozen=True)
class CostModel:
    """The course's synthetic step-time model (seconds). Not a measurement of any engine or GPU.

    step = step_fixed + per_token*T + per_context_token*C + per_attention_pair*A, where
    T = decode tokens (one per decoding request) + prefill chunk tokens,
    C = sum of the decoding requests' context lengths,
    A = attention_pairs(chunk_tokens, chunk_done).
    """
    step_fixed: float = 0.004
    per_token: float = 4e-05
    per_context_token: float = 1e-07
    per_attention_pair: float = 2e-09

    def step_time(self, decode_contexts: tuple[int, ...] = (), chunk_tokens: int = 0,
                  chunk_done: int = 0) -> float:
        return self.step_time_of(len(decode_contexts), sum(decode_contexts), chunk_tokens, chunk_done)

    def step_time_of(self, decoding: int, context_sum: int, chunk_tokens: int = 0,
                     chunk_done: int = 0) -> float:
        """The same step time from the decode batch's size and summed context."""
        return (self.step_fixed + self.per_token * (decoding + chunk_tokens)
                + self.per_context_token * context_sum
                + self.per_attention_pair * attention_pairs(chunk_tokens, chunk_done))

    def decode_step_time(self, decoding: int, context_sum: int) -> float:
        """step_time_of(decoding, context_sum) for a step without a chunk, to the bit: its
        attention term is 0.0, and adding 0.0 to a positive float leaves it unchanged. Most
        of a run's steps are these."""
        return (self.step_fixed + self.per_token * decoding
                + self.per_context_token * context_sum)


@dataclass(frozen=True)
class WorkerSpec:
    """One worker: device memory, what the runtime keeps, page size, decode batch cap, cost."""
    device_bytes: int
    reserved_bytes: int
    page_tokens: int
    max_running: int
    cost: CostModel = field(default_factory=CostModel)


@dataclass(frozen=True)
class Slo:
    """Request-level deadlines: time to first token, and the largest gap between tokens."""
    ttft_s: float
    gap_s: float


@dataclass(frozen=True)
class RequestView:
    """What a policy may know of a request: never its true output length."""
    id: str
    scope: str
    prompt_tokens: int
    max_new_tokens: int
    slo: Slo
    cls: str = "default"


@dataclass(frozen=True)
class Verdict:
    ok: bool
    reason: str = ""  # "" when ok, else one of CONTRACT_REASONS


@dataclass(frozen=True)
class AdmissionRequest:
    id: str
    scope: str
    prompt_tokens: int
    max_new_tokens: int
    page_tokens: int
    prefix_hit_pages: int     # leading full prompt pages found in the prefix cache
    prefix_hit_active: int    # how many of those hits some running request references now


@dataclass(frozen=True)
class LedgerView:
    total_pages: int
    unallocated_pages: int
    evictable_pages: int      # published, unreferenced: free capacity, evicted LRU on demand
    reserved_pages: int       # outstanding: promised to running requests, not yet allocated
    running: int


@dataclass(frozen=True)
class Admission:
    decision: str             # one of DECISIONS
    reserve_pages: int = 0    # new pages promised to this request for its whole life
    reason: str = ""


@dataclass(frozen=True)
class ChunkContext:
    gap_budget_s: float
    cost: CostModel
    decode_contexts: tuple[int, ...]
    prefill_done: int
    prefill_remaining: int
    page_tokens: int
    min_chunk_tokens: int


@dataclass(frozen=True)
class ChunkPlan:
    tokens: int
    verdict: str              # one of CHUNK_VERDICTS


@dataclass(frozen=True)
class Transition:
    next_state: str           # one of STATES
    actions: tuple[str, ...] = ()   # each one of ACTIONS


@dataclass(frozen=True)
class PageInfo:
    """One page of a request, as the publish decision sees it."""
    index: int                # position of the page in the request's context (0 = first)
    prompt_tokens: int        # how many of its slots hold prompt tokens
    page_tokens: int          # slots per page
    written_tokens: int       # slots whose KV write has completed (the writing step finished)
    published: bool           # already in the prefix cache


@dataclass(frozen=True)
class RequestRecord:
    """What the worker recorded of one request. Times are seconds since the run began."""
    id: str
    scope: str
    cls: str
    slo: Slo
    arrival_s: float
    outcome: str                          # one of OUTCOMES
    prompt_tokens: int
    max_new_tokens: int
    tokens_out: int
    token_times: tuple[float, ...] = ()   # emission time of every output token, in order
    admitted_s: Optional[float] = None
    first_token_s: Optional[float] = None
    finish_s: Optional[float] = None
    cancel_s: Optional[float] = None      # when the client cancelled, if it did
    fence_s: Optional[float] = None       # a cancelled request's fence: when the last step that
                                          # pinned its pages completed (cancel_s if none did)
    released_s: Optional[float] = None    # when its pages were released, if they were
    preemptions: int = 0
    pages_held: int = 0                   # the most pages it held at once
    reason: str = ""                      # why it was rejected or failed


# Lesson 5: what a request counts as against its SLO, and what a release decides.
QUALIFICATIONS = ("good", "late_first_token", "slow_tokens", "rejected", "failed", "excluded")
RELEASE_DECISIONS = ("ship", "rollback", "inconclusive")


@dataclass(frozen=True)
class ClassSummary:
    """One SLO class in one run: how many of its requests qualified as each verdict."""
    cls: str
    requests: int                 # every request of the class, whatever became of it
    good: int = 0
    late_first_token: int = 0
    slow_tokens: int = 0
    rejected: int = 0
    failed: int = 0
    excluded: int = 0             # cancelled by the client before any deadline was missed


@dataclass(frozen=True)
class RunSummary:
    """One run of the fixed workload under one seed, as the release decision sees it."""
    seed: int                     # the workload seed: a baseline and a candidate run pair on it
    window_s: float               # the window goodput is counted over (the arrival window, at
                                  # least the longest ttft_s: see lesson 5's README)
    classes: tuple[ClassSummary, ...]
    mean_tpot_s: float = 0.0      # the dashboard's average time per output token: not an SLO


@dataclass(frozen=True)
class ReleaseRule:
    """When a candidate ships, and what rolls it back."""
    min_gain: float = 0.02             # goodput gain needed to ship, relative to the baseline's
    noise_k: float = 2.0               # the noise band: noise_k standard errors of the paired differences
    max_class_drop: float = 0.05       # largest fall of any class's SLO attainment (0.05 = 5 points)
    max_rejection_rise: float = 0.02   # largest rise of the rejected share of requests


@dataclass(frozen=True)
class ReleaseDecision:
    decision: str                      # one of RELEASE_DECISIONS
    reasons: tuple[str, ...] = ()
