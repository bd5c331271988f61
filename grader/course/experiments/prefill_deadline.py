"""The prefill deadline experiment (lesson 3): one chunk size against the other, on one workload.

A fixed workload on the course's a80 worker: ``decode_batch`` requests arrive at t = 0 and
keep decoding for the whole run; once their prompts are in, ``prompts`` long prompts of
``prompt`` tokens arrive every ``interval`` seconds. Each row runs it with one chunk rule:
a fixed chunk size, or a rule variant of lesson 3 ("budget": the largest page-aligned
chunk that fits the token-gap budget; "per_token_only": the slack divided by per_token).
Measured while the long prompts wait or prefill (from the first one's arrival to the last
one's first token): every token gap (p50, p99, how many over the budget) and the long
prompts' TTFT. Big chunks finish prompts sooner and stall the decoders; small ones keep
the gaps short and let TTFT grow. For each row, where in its long prompt the chunk of the
first step over the budget started ("first miss"), and in the plot each rule's step times
along the first long prompt: the per-token rule ignores the attention term, so its chunks
miss, and miss by more the further into the prompt they go. The cost model is synthetic.

The rules' rows are the plugged-in ``choose_chunk`` (the reference's, or the learner's file:
grader.course.experiments.plugged) as it is and under a cost model without the attention
term; the fixed chunks are the knob that replaces any rule. Beside a learner's rules, the
reference's, named "reference: budget" and so on.
"""
from __future__ import annotations

import math
from dataclasses import replace

import numpy as np

from grader.course.experiments import experiment
from grader.course.experiments.common import (
    Column,
    Knob,
    Line,
    Outcome,
    Panel,
    Plot,
    Table,
    percentile,
    plot_notes,
    refused,
    token_gaps,
    ttfts,
)
from grader.course.scenario import course_machines, named
from grader.engine.errors import InputError
from grader.course.experiments.plugged import Side, Sides
from grader.course.trials import truncation
from reference.baselines import baseline_policy
from reference.knobs import with_knobs
from reference.request import Request
from reference.shapes import CostModel, ModelSpec, Slo, WorkerSpec
from reference.sizing import Geometry
from reference.specs import model_from, worker_from
from reference.worker import simulate

RULES = ("budget", "per_token_only")
_COST = CostModel()
KNOBS = (
    # Times and costs are bounded too: the budget as the design sheet bounds gap_budget_s, a
    # step at 10 s and each cost term at a second, already absurd (the defaults are tens of
    # microseconds and less); per_token=1e300 overflowed the chunk rule's arithmetic.
    Knob("budget", 0.1, "token-gap budget of the chunk rule (s)", "float", minimum=1e-6, maximum=10),
    Knob("step_fixed", _COST.step_fixed, "cost model: seconds per step", "float", minimum=1e-9, maximum=10),
    Knob("per_token", _COST.per_token, "cost model: seconds per token in the step", "float", minimum=0,
         maximum=1),
    Knob("per_context_token", _COST.per_context_token, "cost model: seconds per decode context token",
         "float", minimum=0, maximum=1),
    Knob("per_attention_pair", _COST.per_attention_pair, "cost model: seconds per prefill attention pair",
         "float", minimum=0, maximum=1),
    # Sizes are bounded so a typo cannot start an hours-long run (each at its bound alone:
    # seconds).
    Knob("prompt", 8192, "tokens of each long prompt", "int", minimum=1, maximum=1 << 20),
    Knob("prompts", 10, "how many long prompts arrive", "int", minimum=1, maximum=1000),
    Knob("interval", 1.0, "seconds between long prompts", "float", minimum=0, maximum=3600),
    Knob("decode_batch", 32, "requests decoding through the whole run", "int", minimum=0, maximum=4096),
    Knob("decode_context", 1024, "prompt tokens of each decoding request (its context grows from there)",
         "int", minimum=1, maximum=1 << 20),
    Knob("min_chunk", 64, "min_chunk_tokens of the budget rules (their floor when starved)", "int",
         minimum=0, maximum=1 << 20),
    Knob("chunks", (64, 128, 256, 512, 1024, 2048, 4096, 8192), "fixed chunk sizes to compare", "ints",
         minimum=1, maximum=1 << 20, max_items=32),       # 1 to 16 took 11 s; small chunks cost most
    Knob("rules", RULES, "rule variants of lesson 3 to compare", "words", choices=RULES),
)
LONG_OUTPUT = 16          # tokens each long prompt emits: enough to have gaps of its own
MODEL, WORKER = "gqa-8b-bf16", "a80"


def _machine(s: dict, course) -> tuple[ModelSpec, WorkerSpec]:
    models, workers = course_machines(course)
    where = course.root / "assignments" / "worker.yaml"
    model = model_from(named(MODEL, models, "model", f"{where}: models"), f"{where}: models.{MODEL}")
    worker = worker_from(named(WORKER, workers, "worker", f"{where}: workers"),
                         f"{where}: workers.{WORKER}")
    cost = CostModel(s["step_fixed"], s["per_token"], s["per_context_token"], s["per_attention_pair"])
    # The batch cap never binds here: the experiment is about the chunk, not admission.
    return model, replace(worker, cost=cost, max_running=max(worker.max_running,
                                                            s["decode_batch"] + s["prompts"]))


def _schedule(s: dict, cost: CostModel, page_tokens: int) -> tuple[float, int]:
    """When the long prompts start, and how long the decoders decode, for the slowest row.

    The decoders' prompts go first; the long prompts start once even the smallest chunk
    has prefilled them. Each decoder emits enough tokens to keep decoding until the last
    long prompt's first token under the slowest rule, so the batch holds still for the
    window that is measured (its contexts grow by one token per step).
    """
    b, ctx = s["decode_batch"], s["decode_context"]
    # The rules' floor when starved is max(min_chunk, page); a fixed row may go below it.
    floor = max(s["min_chunk"], page_tokens)
    smallest = min(min(s["chunks"]), floor) if s["rules"] else min(s["chunks"])
    batch = (ctx,) * b
    slow_step = cost.step_time(batch, smallest, ctx)
    start = 0.5 + b * math.ceil(ctx / smallest) * slow_step
    per_prompt = math.ceil(s["prompt"] / smallest) * cost.step_time(batch, smallest, s["prompt"])
    end = start + s["prompts"] * max(s["interval"], per_prompt)
    quickest = max(cost.step_time(batch), 1e-6)
    return start, int(min(1.1 * end / quickest, 1 << 20)) + 64


def _within_context(s: dict, model: ModelSpec) -> None:
    """A request over the model's context is rejected by the contract: a prompt that long
    would leave every row empty ("-"), so the setting is refused, saying how long may be."""
    for knob, tokens, more in (("prompt", s["prompt"], LONG_OUTPUT), ("decode_context", s["decode_context"], 1)):
        if tokens + more > model.max_context:
            raise InputError(f"--set {knob}={tokens}",
                             f"{tokens} tokens and the {more} its request emits are over {MODEL}'s "
                             f"max_context of {model.max_context}: the contract would reject every "
                             f"one; at most {model.max_context - more}")


def workload(s: dict, model: ModelSpec, worker: WorkerSpec) -> tuple[tuple[Request, ...], float, list[str]]:
    _within_context(s, model)
    start, out = _schedule(s, worker.cost, worker.page_tokens)
    notes = []
    room = model.max_context - s["decode_context"]
    pool_tokens = Geometry.of(model, worker).pool_pages * worker.page_tokens
    share = (pool_tokens - s["prompts"] * (s["prompt"] + LONG_OUTPUT)) // max(1, s["decode_batch"])
    cap = min(room, share - s["decode_context"])
    if out > cap:
        out = max(1, cap)
        notes.append(f"the decoders' outputs are cut to {out} tokens (context window or KV pool): "
                     "the decode batch may shrink before the prompts finish")
    loose = Slo(ttft_s=1e9, gap_s=1e9)      # nothing is rejected by the contract
    reqs = [Request(i, f"d{i}", "exp", "decode", 0.0, np.full(s["decode_context"], i % 32000, np.int32),
                    out, out, loose) for i in range(s["decode_batch"])]
    for k in range(s["prompts"]):
        i = len(reqs)
        reqs.append(Request(i, f"p{k}", "exp", "prompt", start + k * s["interval"],
                            np.full(s["prompt"], i % 32000, np.int32), LONG_OUTPUT, LONG_OUTPUT, loose))
    return tuple(reqs), start, notes


def _sheet(s: dict, **rule) -> dict:
    return {"admission_ledger": {"prefix_cache": False},
            "chunk_rule": {"gap_budget_s": s["budget"], "min_chunk_tokens": s["min_chunk"], **rule}}


def measure(run, start_s: float, budget: float) -> dict:
    long_ids = {r.id for r in run.requests if r.cls == "prompt"}
    firsts = [r.first_token_s for r in run.requests if r.id in long_ids]
    end_s = max(firsts) if firsts and None not in firsts else math.inf
    gaps = token_gaps(run, start_s, end_s)
    ttft = ttfts(run, long_ids)
    steps = run.steps
    mine = np.asarray([rid in long_ids for rid in steps.chunk_request], dtype=bool)
    chunks = steps.chunk_tokens[mine] if len(steps) else np.zeros(0)
    late = int(np.count_nonzero(gaps > budget * (1 + 1e-9)))
    early = any(r.cls == "decode" and r.finish_s is not None and r.finish_s < end_s for r in run.requests)
    over = [at for _, at, seconds in chunk_steps(run, long_ids) if seconds > budget * (1 + 1e-9)]
    return {"mean_chunk": float(chunks.mean()) if chunks.size else math.nan,
            "first_miss": over[0] if over else None,
            "gap_p50_ms": percentile(gaps, 50) * 1000, "gap_p99_ms": percentile(gaps, 99) * 1000,
            "ttft_p50_s": percentile(ttft, 50), "ttft_p99_s": percentile(ttft, 99),
            "late_gaps": late, "gaps": int(gaps.size),
            "late_share": late / gaps.size if gaps.size else math.nan,
            "complete": end_s < math.inf, "batch_shrank": early}


def chunk_steps(run, ids: set[str]) -> list[tuple[str, int, float]]:
    """(request, where its chunk starts in its prompt, step seconds) of every step that
    prefilled a chunk of one of ``ids``, in order."""
    done: dict[str, int] = {}
    out = []
    for i, rid in enumerate(run.steps.chunk_request):
        if rid in ids:
            at = done.get(rid, 0)
            out.append((rid, at, float(run.steps.duration_s[i])))
            done[rid] = at + int(run.steps.chunk_tokens[i])
    return out


COLUMNS = (
    Column("rule", "chunk or rule"), Column("mean_chunk", "mean\nchunk", ".0f"),
    Column("gap_p50_ms", "gap p50\nms", ".1f"), Column("gap_p99_ms", "gap p99\nms", ".1f"),
    Column("ttft_p50_s", "TTFT\np50 s", ".2f"), Column("ttft_p99_s", "TTFT\np99 s", ".2f"),
    Column("late_gaps", "gaps over\nbudget", "d"), Column("first_miss", "first miss\nat token", "d"),
)


# ---- the runs: one row per chunk rule ----------------------------------------------------
def _rows(policy, variants, s: dict, course, ran) -> Side:
    """A row per (label, chunk, rule knob) of ``variants`` on ``policy`` under that knob, with
    each row's steps along the first long prompt (for the plot) and what stopped a run."""
    model, worker = _machine(s, course)
    reqs, start, _ = workload(s, model, worker)
    first = next(r.id for r in reqs if r.cls == "prompt")
    rows, along, notes, made = [], {}, [], []
    for label, chunk, rule in variants:
        run = simulate(model, worker, with_knobs(policy, _sheet(s, **rule)), reqs)
        ran(1)
        row = {"rule": label, "chunk": chunk, **measure(run, start, s["budget"])}
        if run.aborted:
            notes.append(f"{label}: {truncation(run)}")
        elif not row["complete"]:
            notes.append(f"{label}: not every long prompt got its first token")
        if row["batch_shrank"]:
            notes.append(f"{label}: some decoders finished before the last prompt's first token")
        rows.append(row)
        along[label] = [(at, sec * 1000) for _, at, sec in chunk_steps(run, {first})]
        made.append((label, run))
    return {"rows": rows, "extras": {"along": along}, "notes": notes + refused(made, ("choose_chunk",))}


def _fixed(s: dict, course, core, ran) -> Side:
    # The fixed-chunk knob replaces whatever rule it distorts: these rows hold for any core.
    policy = core.policy if core is not None else baseline_policy()
    return _rows(policy, [(f"fixed {c}", c, {"rule": "fixed", "fixed_tokens": c})
                          for c in sorted(set(s["chunks"]))], s, course, ran)


def _rules(s: dict, course, ran):
    """core -> its Side: the core as it is ("budget") and under the per-token-only knob."""
    return lambda core: _rows(core.policy, [(name, None, {"rule": name}) for name in s["rules"]], s, course, ran)


@experiment("prefill-deadline", title="chunk size against the token-gap budget and TTFT", knobs=KNOBS,
            lesson="lesson3")
def prefill_deadline(s: dict, course, sides: Sides) -> Outcome:
    model, worker = _machine(s, course)
    _, start, notes = workload(s, model, worker)
    fixed = _fixed(s, course, sides.plugged.core, sides.ran)
    rules = sides.both(_rules(s, course, sides.ran), "rule", tuple(s["rules"]))
    rows = fixed["rows"] + (rules.rows if s["rules"] else [])
    along = {**fixed["extras"]["along"], **rules.extras.get("along", {})}
    notes += fixed["notes"] + rules.notes
    batch_step = worker.cost.step_time((s["decode_context"],) * s["decode_batch"])
    notes.insert(0, f"{s['decode_batch']} decoding from t=0 (decode-only step {batch_step * 1000:.1f} ms "
                    f"at their starting context); {s['prompts']} prompts of {s['prompt']} tokens every "
                    f"{s['interval']:g} s from t={start:.2f} s; gaps and TTFT measured from then until "
                    "the last prompt's first token; first miss: where in its long prompt the chunk of the first step "
                    "over the budget started (a chunk's attention cost grows with the tokens before it)")
    notes += rules.sources if s["rules"] else []
    return Outcome("prefill-deadline", "chunk size against the token-gap budget and TTFT", dict(s),
                   Table(COLUMNS, tuple(rows)), _plot(rows, along, s, notes), tuple(notes))


def _plot(rows: list[dict], along: dict, s: dict, notes: list[str]) -> Plot:
    fixed = [r for r in rows if r.get("chunk") is not None]
    rules = [r for r in rows if r.get("chunk") is None and not r.get("missing")
             and r["mean_chunk"] is not None and math.isfinite(r["mean_chunk"])]
    xs = tuple(float(r["chunk"]) for r in fixed)
    col = lambda rs, key: tuple(float(r[key]) for r in rs)
    rule_points = lambda key: tuple(Line(f"rule {r['rule']}", (r["mean_chunk"],), (float(r[key]),), "points")
                                    for r in rules)
    gap = Panel("token gap p99 (ms)", (Line("fixed chunk", xs, col(fixed, "gap_p99_ms")),
                                      *rule_points("gap_p99_ms")),
                hlines=((s["budget"] * 1000, f"budget {s['budget'] * 1000:g} ms"),), ylog=True)
    ttft = Panel("TTFT of the prompts (s)", (Line("fixed chunk, p50", xs, col(fixed, "ttft_p50_s")),
                                            Line("fixed chunk, p99", xs, col(fixed, "ttft_p99_s")),
                                            *rule_points("ttft_p50_s")), ylog=True)
    panels = [gap, ttft]
    if rules:
        # Each rule's chunks of the first long prompt: where its steps cross the budget.
        lines, texts = [], []
        for r in rules:
            steps = [(float(at), float(ms)) for at, ms in along[r["rule"]]]
            lines.append(Line(f"rule {r['rule']}", tuple(a for a, _ in steps), tuple(ms for _, ms in steps)))
            worst_at, worst = max(steps, key=lambda x: x[1], default=(0, 0.0))
            miss = r["first_miss"]
            texts.append(f"{r['rule']}: " + ("never over the budget" if miss is None else
                                            f"first over the budget at token {miss:,} of {s['prompt']:,}")
                         + f"; its longest step {worst:.1f} ms, at token {int(worst_at):,}")
        panels.append(Panel("step time with a chunk of the\nfirst long prompt (ms)", tuple(lines),
                            hlines=((s["budget"] * 1000, f"budget {s['budget'] * 1000:g} ms"),),
                            xlabel="where the chunk starts in the prompt (tokens)", notes=tuple(texts),
                            notes_low=True))
    warnings, captions = plot_notes(notes)
    # The title names the trade-off the panels show, not only the workload.
    return Plot(f"Prefill deadline: a bigger chunk stalls the decoders longer and gives the prompts "
                f"their first token sooner\n({s['prompt']}-token prompts, {s['decode_batch']} decoding, "
                f"token-gap budget {s['budget'] * 1000:g} ms)",
                "prefill chunk (tokens; rules at their mean chunk)", tuple(panels), xlog=True, xticks=xs,
                warnings=warnings, captions=captions)
