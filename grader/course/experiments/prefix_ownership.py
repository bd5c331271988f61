"""The prefix ownership experiment (lesson 4): one ownership rule changed at a time.

The workload is lesson 4's public scenario (assignments/lesson4/public/cancel-prefix):
three tenants whose system prompts share their text, bursts of arrivals that land inside
in-flight steps, prompts prefilled in chunks that end inside a page, and a share of
requests cancelled early; a share of prompts repeat their first block (a paragraph
quoted twice), so one block appears at two positions. Each row runs the reference worker with the design sheet's
cancellation values except one: release at cancel or never (instead of at the fence), a
prefix key without the scope or the parent, publishing partial or unwritten pages; then
the design values at several cancellation rates. The table counts what the worker
records (use-after-free, leaks, cross-scope hits, poisoned publishes), the prefix hit
rate and how long a cancelled request's pages take to come back; the plot shows pages in
use over time, and pages still held by cancelled requests, against the design's run.
The cost model is synthetic.
"""
from __future__ import annotations

import math
from dataclasses import replace

import numpy as np

from grader.engine.errors import InputError
from grader.course.experiments import experiment
from grader.course.experiments.common import Column, Knob, Line, Outcome, Panel, Plot, Table, percentile
from grader.course.scenario import load_scenario
from grader.course.trials import truncation
from reference.policy import reference_policy
from reference.records import Run
from reference.request import Request
from reference.workload import with_overrides
from reference.worker import simulate

SCENARIO = ("lesson4", "public", "cancel-prefix.scenario.yaml")
# One constraint each, as design-sheet `cancellation` values (reference/policy.py).
VARIANTS = {
    "at_cancel": ("release at cancel", {"release": "at_cancel"}),
    "never": ("never release", {"release": "never"}),
    "no_scope": ("key without scope", {"with_scope": False}),
    "no_parent": ("key without parent", {"with_parent": False}),
    "partial": ("publish partial pages", {"partial": True}),
    "unwritten": ("publish unwritten pages", {"require_written": False}),
}
DESIGN = "design: at the fence"
KNOBS = (
    Knob("requests", 300, "requests in the workload", "int", minimum=1),
    Knob("rate", 60.0, "mean arrival rate (requests/s, gamma bursts)", "float", minimum=1e-6),
    Knob("cancel", 0.4, "share of requests the client cancels (0..1), for the variant rows", "float",
         minimum=0),
    Knob("cancel_rates", (0, 20, 40, 60, 80), "cancellation rates (percent) of the design rows",
         "ints", minimum=0),
    Knob("repeat", 20, "percent of prompts that repeat their first block right after it", "int",
         minimum=0),
    Knob("chunk", 40, "prefill chunk tokens (not a page multiple: chunks end inside pages)", "int",
         minimum=1),
    Knob("seed", 41, "workload seed", "int", minimum=0),
    Knob("variants", tuple(VARIANTS), "the one-constraint variants to run", "words",
         choices=tuple(VARIANTS)),
)
POINTS = 240          # samples per plotted line


def _scenario(s: dict, course, cancel: float):
    base = load_scenario(course.root.joinpath("assignments", *SCENARIO), course)
    workload = with_overrides(base.workload, requests=s["requests"], seed=s["seed"],
                              **{"arrival.rate": s["rate"], "cancel.probability": cancel})
    sheet = {**base.sheet, "chunk_rule": {"rule": "fixed", "fixed_tokens": s["chunk"]}}
    return replace(base, workload=workload, seed=s["seed"], sheet=sheet)


def requests(scenario, repeat_pct: int) -> tuple[Request, ...]:
    """The scenario's requests; ``repeat_pct`` percent of them (drawn from the workload seed)
    repeat their first full block right after it."""
    out = list(scenario.requests())
    pt = scenario.worker.page_tokens
    pick = np.random.Generator(np.random.PCG64(scenario.seed)).random(len(out)) < repeat_pct / 100
    for i, r in enumerate(out):
        if pick[i] and r.prompt_tokens > pt:
            prompt = np.concatenate((r.prompt[:pt], r.prompt))
            prompt.flags.writeable = False
            out[i] = replace(r, prompt=prompt)
    return tuple(out)


def reclaim_ms(run: Run) -> np.ndarray:
    """From each admitted request's cancel to its pages' release (ms); leaks are not in it."""
    return np.asarray([(r.released_s - r.cancel_s) * 1000 for r in run.requests
                       if r.cancel_s is not None and r.admitted_s is not None and r.released_s is not None])


def hit_rate(run: Run, page_tokens: int) -> float:
    """Prefix hits per full prompt block looked up at admission (one token stays to prefill)."""
    blocks = sum((r.prompt_tokens - 1) // page_tokens for r in run.requests if r.admitted_s is not None)
    hits = run.series["prefix_hits"]
    return float(hits[-1]) / blocks if blocks and len(hits) else math.nan


def _held(run: Run) -> list[tuple[float, float, int]]:
    """(cancel, release or end of run, pages) of each cancelled request that held pages, counted
    with the most pages it held: the worker records no finer page history."""
    return [(r.cancel_s, r.released_s if r.released_s is not None else run.end_s, r.pages_held)
            for r in run.requests if r.cancel_s is not None and r.admitted_s is not None and r.pages_held]


def held_after_cancel(run: Run) -> tuple[tuple, tuple]:
    """Pages of cancelled requests not yet released, as a step function (x, y)."""
    changes: dict[float, int] = {}
    for r in run.requests:
        if r.cancel_s is not None and r.admitted_s is not None and r.pages_held:
            changes[r.cancel_s] = changes.get(r.cancel_s, 0) + r.pages_held
            if r.released_s is not None:          # a leak stays held to the end
                changes[r.released_s] = changes.get(r.released_s, 0) - r.pages_held
    xs, ys, level = [0.0], [0.0], 0
    for t in sorted(changes):
        xs += [t, t]
        ys += [level, level + changes[t]]
        level += changes[t]
    return tuple(xs + [run.end_s]), tuple(float(y) for y in ys + [level])


def measure(run: Run, page_tokens: int) -> dict:
    counts = run.counts()
    lat = reclaim_ms(run)
    return {"cancelled": sum(r.outcome == "cancelled_by_client" for r in run.requests),
            "use_after_free": counts["use_after_free"], "leaks": counts["leak"],
            "double_releases": counts["double_release"],
            "cross_scope": counts["cross_scope_hit"], "wrong_prefix": counts["wrong_prefix_hit"],
            "poisoned": counts["poisoned_publish"],
            "hit_rate": hit_rate(run, page_tokens) * 100,
            "reclaim_p50_ms": percentile(lat, 50), "reclaim_max_ms": float(lat.max()) if lat.size else math.nan,
            "held_page_s": sum((end - start) * pages for start, end, pages in _held(run))}


COLUMNS = (
    Column("variant", "variant"), Column("cancel_pct", "cancel %", "d"),
    Column("use_after_free", "use-after-free", "d"), Column("leaks", "leaks", "d"),
    Column("cross_scope", "cross-scope hits", "d"), Column("wrong_prefix", "wrong-position hits", "d"),
    Column("poisoned", "poisoned", "d"),
    Column("hit_rate", "hit rate %", ".1f"), Column("reclaim_p50_ms", "reclaim p50 ms", ".2f"),
    Column("reclaim_max_ms", "reclaim max ms", ".2f"), Column("held_page_s", "held after cancel page*s", ".1f"),
)


@experiment("prefix-ownership", title="release, prefix keys and publishing under cancellation",
            knobs=KNOBS)
def prefix_ownership(s: dict, course) -> Outcome:
    if s["cancel"] > 1 or max(s["cancel_rates"], default=0) > 100 or s["repeat"] > 100:
        raise InputError("--set", "cancel is a share in 0..1; cancel_rates and repeat are percents in 0..100")
    rows, runs, stopped = [], {}, []
    base = _scenario(s, course, s["cancel"])
    pt = base.worker.page_tokens

    def add(label: str, scenario, changes: dict, cancel: float) -> None:
        policy = reference_policy({**scenario.sheet, "cancellation": changes})
        run = simulate(scenario.model, scenario.worker, policy, requests(scenario, s["repeat"]))
        runs[label] = run
        rows.append({"variant": label, "cancel_pct": round(cancel * 100), **measure(run, pt)})
        if run.aborted:
            stopped.append(f"{label}: {truncation(run)}")

    add(DESIGN, base, {}, s["cancel"])
    for name in s["variants"]:
        label, changes = VARIANTS[name]
        add(label, base, changes, s["cancel"])
    for pct in s["cancel_rates"]:
        if pct / 100 != s["cancel"]:
            add(f"design, {pct}% cancelled", _scenario(s, course, pct / 100), {}, pct / 100)
    notes = (f"{base.workload.requests} requests in 3 tenants sharing system-prompt text, "
             f"{s['rate']:g}/s in bursts, {s['repeat']}% of prompts repeating their first block, chunks "
             f"of {s['chunk']} tokens on {pt}-token pages; each row changes one cancellation value of "
             "the design sheet, or the cancellation rate",
             "a key without parent gives a repeated block the key of its first copy: the worker counts "
             "those hits as wrong-position hits (the column after cross-scope hits)",
             "hit rate: prefix-cache hits per full prompt block looked up at admission; a key without "
             "scope raises it by sharing pages across tenants (see cross-scope hits)",
             "reclaim: from the client's cancel to the release of its pages; the design waits for the "
             "fence (the in-flight step's end), releasing at cancel does not wait and reuses pages "
             "that step still writes (use-after-free); never releasing leaks them",
             "held after cancel: pages of cancelled requests not yet released, integrated over the "
             "run (each request counted with the most pages it held)", *stopped)
    return Outcome("prefix-ownership", "release, prefix keys and publishing under cancellation",
                   dict(s), Table(COLUMNS, tuple(rows)), _plot(runs, s), notes)


def _sampled(times: np.ndarray, values: np.ndarray) -> tuple[tuple, tuple]:
    step = max(1, len(times) // POINTS)
    return tuple(times[::step].tolist()), tuple(float(v) for v in values[::step])


def _plot(runs: dict[str, Run], s: dict) -> Plot:
    # The design's line goes last, on top: releasing at cancel frees the same pages a few
    # milliseconds sooner, so its line lies under the ideal's.
    shown = [VARIANTS[n][0] for n in ("never", "at_cancel") if n in s["variants"]] + [DESIGN]
    in_use, held = [], []
    for label in shown:
        run = runs[label]
        t = run.series["time_s"]
        used = run.total_pages - run.series["free"] - run.series["evictable"]
        name = f"{label} (ideal)" if label == DESIGN else label
        in_use.append(Line(name, *_sampled(t, used)))
        held.append(Line(name, *held_after_cancel(run)))
    return Plot(f"Prefix ownership: {s['requests']} requests, {s['cancel'] * 100:g}% cancelled",
                "time (s)", (Panel("pages in use (referenced)", tuple(in_use)),
                             Panel("pages held by cancelled requests", tuple(held))))
