"""The prefix ownership experiment (lesson 4): one ownership rule changed at a time.

The workload is lesson 4's public scenario (assignments/lesson4/public/cancel-prefix):
three tenants whose system prompts share their text, bursts of arrivals that land inside
in-flight steps, prompts prefilled in chunks that end inside a page, and a share of
requests cancelled early; a share of prompts repeat their first block (a paragraph quoted
twice), so one block appears at two positions. Each row runs the reference worker with
the design sheet's cancellation values except one: release at cancel or never (instead of
at the fence), a prefix key without the scope or the parent, publishing partial or
unwritten pages; then the design values at several cancellation rates. The table counts
what the worker records (use-after-free, leaks and the pages they hold, cross-scope and
wrong-position hits, poisoned publishes), then what the rule costs: the prefix hit rate,
how long a cancelled request's pages take to come back, and for the design and the key
without scope the TTFT gap a probing tenant measures.

The probe is the side channel a key without scope opens: once the workload is served, a
tenant of its own sends, for each tenant's system prompt, one request that starts with it
(a right guess) and one of the same length with other text (a wrong guess), each alone on
the idle worker. A right guess that hits another tenant's cached pages comes back sooner;
the TTFT gap between the two tells the prober the other tenant's prompt. The plot shows
each variant's violations and the probe's TTFTs. The cost model is synthetic.
"""
from __future__ import annotations

import math
from dataclasses import replace

import numpy as np

from grader.course.experiments import experiment
from grader.course.experiments.common import (Bars, Column, Knob, Outcome, Panel, Plot, Table,
                                              percentile, plot_notes, refused)
from grader.course.experiments.plugged import Side, Sides
from grader.course.scenario import load_scenario
from grader.course.trials import truncation
from reference.knobs import with_knobs
from reference.records import Run
from reference.request import Request
from reference.shapes import Slo
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
    Knob("requests", 300, "requests in the workload", "int", minimum=1, maximum=20000),   # ~30 s
    Knob("rate", 60.0, "mean arrival rate (requests/s, gamma bursts)", "float", minimum=1e-6,
         maximum=100_000),                     # the design sheet's bound on a workload's rate
    Knob("cancel", 0.4, "share of requests the client cancels, for the variant rows", "float",
         minimum=0, maximum=1),
    Knob("cancel_rates", (0, 20, 40, 60, 80), "cancellation rates (percent) of the design rows",
         "ints", minimum=0, maximum=100, max_items=101),   # each percent once: 101 rows
    Knob("repeat", 20, "percent of prompts that repeat their first block right after it", "int",
         minimum=0, maximum=100),
    Knob("chunk", 40, "prefill chunk tokens (not a page multiple: chunks end inside pages)", "int",
         minimum=1, maximum=1 << 20),
    Knob("seed", 41, "workload seed", "int", minimum=0, maximum=2**31 - 1),   # as paired_seeds
    Knob("variants", tuple(VARIANTS), "the one-constraint variants to run", "words",
         choices=tuple(VARIANTS)),
)
PROBE_TAIL = 16       # tokens of its own after a probe's guessed (or other) system prompt
PROBE_SPACING_S = 0.5 # probes arrive one at a time, each on an idle worker


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


def measure(run: Run, page_tokens: int) -> dict:
    counts = run.counts()
    lat = reclaim_ms(run)
    return {"cancelled": sum(r.outcome == "cancelled_by_client" for r in run.requests),
            "use_after_free": counts["use_after_free"], "leaks": counts["leak"],
            "leaked_pages": sum(len(v.pages) for v in run.violations if v.kind == "leak"),
            "double_releases": counts["double_release"],
            "cross_scope": counts["cross_scope_hit"], "wrong_prefix": counts["wrong_prefix_hit"],
            "poisoned": counts["poisoned_publish"],
            "hit_rate": hit_rate(run, page_tokens) * 100,
            "reclaim_p50_ms": percentile(lat, 50), "reclaim_max_ms": float(lat.max()) if lat.size else math.nan,
            "held_page_s": sum((end - start) * pages for start, end, pages in _held(run))}


COLUMNS = (
    # what broke
    Column("variant", "variant"), Column("cancel_pct", "cancel\n%", "d"),
    Column("use_after_free", "use-after-\nfree", "d"), Column("leaks", "leaks", "d"),
    Column("leaked_pages", "leaked\npages", "d"), Column("cross_scope", "cross-scope\nhits", "d"),
    Column("wrong_prefix", "wrong-pos.\nhits", "d"), Column("poisoned", "poisoned", "d"),
    # what it costs
    Column("hit_rate", "hit\nrate %", ".1f"), Column("reclaim_p50_ms", "reclaim\np50 ms", ".2f"),
    Column("reclaim_max_ms", "reclaim\nmax ms", ".2f"),
    Column("held_page_s", "held after\ncancel page*s", ".1f"),
    Column("probe_gap_ms", "probe TTFT\ngap ms", ".2f"),
)
# The violations the plot shows, one bar colour each (a leak as the pages it keeps).
FAILURES = (("use_after_free", "use-after-free"), ("cross_scope", "cross-scope hits"),
            ("wrong_prefix", "wrong-position hits"), ("poisoned", "poisoned publishes"),
            ("leaked_pages", "leaked pages"))


# ---- the probe -------------------------------------------------------------------------------
def system_prompts(requests, page_tokens: int) -> list[tuple[str, np.ndarray]]:
    """(scope, tokens) of each shared system prompt: the common start of two requests of one
    scope whose first pages are the same (a prober's guess needs nothing more)."""
    firsts: dict[tuple, list] = {}
    for r in requests:
        if r.prompt_tokens > page_tokens:
            firsts.setdefault((r.scope, r.prompt[:page_tokens].tobytes()), []).append(r.prompt)
    out = []
    for (scope, _), prompts in firsts.items():
        if len(prompts) >= 2:
            a, b = prompts[0], prompts[1]
            n = min(len(a), len(b))
            same = int(np.argmin(a[:n] == b[:n])) if not np.all(a[:n] == b[:n]) else n
            if same >= page_tokens:
                out.append((scope, a[:same]))
    return out


def probes(scenario, after_s: float) -> tuple[Request, ...]:
    """A right and a wrong guess per system prompt, each from a scope of its own, one at a
    time from ``after_s`` on; the wrong guess has the same length and other tokens."""
    pt = scenario.worker.page_tokens
    base = scenario.requests()
    rng = np.random.Generator(np.random.PCG64(scenario.seed + 1))
    loose = Slo(ttft_s=1e9, gap_s=1e9)
    out = []
    for k, (scope, prompt) in enumerate(system_prompts(base, pt)):
        tail = rng.integers(0, 32000, PROBE_TAIL, dtype=np.int32)
        for guess, head in (("right", prompt), ("wrong", rng.integers(0, 32000, len(prompt), dtype=np.int32))):
            tokens = np.concatenate((head, tail))
            tokens.flags.writeable = False
            i = len(base) + len(out)
            out.append(Request(i, f"probe-{guess}-{scope}-{k}", f"prober-{len(out)}", "probe",
                               after_s + PROBE_SPACING_S * len(out), tokens, 1, 1, loose))
    return tuple(out)


def probe_ttfts_ms(run: Run) -> dict[str, list[float]]:
    """The probes' TTFTs (ms) by guess, in probe order."""
    out = {"right": [], "wrong": []}
    for r in run.requests:
        if r.cls == "probe" and r.first_token_s is not None:
            out[r.id.split("-")[1]].append((r.first_token_s - r.arrival_s) * 1000)
    return out


# ---- the runs: the plugged-in core, and one knob at a time around it --------------------------
def _labels(s: dict) -> tuple[str, ...]:
    return (DESIGN, *(VARIANTS[n][0] for n in s["variants"]),
            *(f"design, {pct}% cancelled" for pct in s["cancel_rates"] if pct / 100 != s["cancel"]))


def _measure(s: dict, course, ran):
    """core -> its Side: a row per variant (the core, each knob around it, each cancellation
    rate), and the probe's TTFTs of the design and the key without scope."""
    def side(core) -> Side:
        rows, ends, stopped, probed, made = [], {}, [], {}, []
        base = _scenario(s, course, s["cancel"])
        pt = base.worker.page_tokens

        def add(label: str, scenario, changes: dict, cancel: float) -> None:
            policy = with_knobs(core.policy, {**scenario.sheet, "cancellation": changes})
            run = simulate(scenario.model, scenario.worker, policy, requests(scenario, s["repeat"]))
            ran(1)
            made.append((label, run))
            ends[label] = run.end_s
            rows.append({"variant": label, "cancel_pct": round(cancel * 100), **measure(run, pt),
                         "probe_gap_ms": None})
            if run.aborted:
                stopped.append(f"{label}: {truncation(run)}")

        def probe(label: str, changes: dict) -> None:
            """The row's run again with the probes after its end: what a prober measures."""
            policy = with_knobs(core.policy, {**base.sheet, "cancellation": changes})
            extra = probes(base, ends[label] + 1.0)
            run = simulate(base.model, base.worker, policy, requests(base, s["repeat"]) + extra)
            ran(1)
            t = probed[label] = probe_ttfts_ms(run)
            row = next(r for r in rows if r["variant"] == label)
            # Rounded to the nanosecond: TTFTs are differences of absolute times, and two equal
            # ones can differ in the last bits.
            row["probe_gap_ms"] = round(float(np.mean(t["wrong"]) - np.mean(t["right"])), 6) if t["right"] else None

        add(DESIGN, base, {}, s["cancel"])
        for name in s["variants"]:
            label, changes = VARIANTS[name]
            add(label, base, changes, s["cancel"])
        for pct in s["cancel_rates"]:
            if pct / 100 != s["cancel"]:
                add(f"design, {pct}% cancelled", _scenario(s, course, pct / 100), {}, pct / 100)
        probe(DESIGN, {})
        if "no_scope" in s["variants"]:
            probe(*VARIANTS["no_scope"])
        return {"rows": rows, "extras": {"probed": probed},
                "notes": stopped + refused(made, ("on_event", "prefix_key", "publishable"))}
    return side


@experiment("prefix-ownership", title="release, prefix keys and publishing under cancellation",
            knobs=KNOBS, lesson="lesson4")
def prefix_ownership(s: dict, course, sides: Sides) -> Outcome:
    base = _scenario(s, course, s["cancel"])
    pt = base.worker.page_tokens
    both = sides.both(_measure(s, course, sides.ran), "variant", _labels(s))
    rows, probed, stopped = both.rows, both.extras.get("probed", {}), both.notes
    n = len(next(iter(probed.values()))["right"]) if probed else 0
    notes = (f"{base.workload.requests} requests in 3 tenants sharing system-prompt text, "
             f"{s['rate']:g}/s in bursts, {s['repeat']}% of prompts repeating their first block, chunks "
             f"of {s['chunk']} tokens on {pt}-token pages; each row changes one cancellation value of "
             "the design sheet, or the cancellation rate",
             "leaks: finished or cancelled requests that never gave their pages back; leaked pages: "
             "the pages they still held at the end",
             "a key without parent gives a repeated block the key of its first copy: the worker counts "
             "those hits as wrong-position hits",
             "hit rate: prefix-cache hits per full prompt block looked up at admission; a key without "
             "scope raises it by sharing pages across tenants (see cross-scope hits)",
             "reclaim: from the client's cancel to the release of its pages; the design waits for the "
             "fence (the in-flight step's end), releasing at cancel does not wait and reuses pages "
             "that step still writes (use-after-free); never releasing leaks them",
             "held after cancel: pages of cancelled requests not yet released, integrated over the "
             "run (each request counted with the most pages it held)",
             f"probe TTFT gap: after the workload, a tenant of its own sends {n} right guesses (a "
             "request starting with another tenant's system prompt) and as many wrong ones (the same "
             "length, other text), one at a time on the idle worker; the gap is the wrong guesses' "
             "mean TTFT minus the right ones'. Where it is above 0 the prober learns the other "
             "tenant's prompt" + ("" if "no_scope" in s["variants"] else
                                  "; add the no_scope variant to see it open"),
             *both.sources, *stopped)
    return Outcome("prefix-ownership", "release, prefix keys and publishing under cancellation",
                   dict(s), Table(COLUMNS, tuple(rows)), _plot(rows, probed, s, notes), notes)


def _plot(rows: list[dict], probed: dict, s: dict, notes: tuple[str, ...]) -> Plot:
    def empty(r: dict) -> str:
        wait = r["reclaim_p50_ms"]
        if wait is None or not math.isfinite(wait):
            return "none"
        return f"none (waits a median {wait:.2f} ms per cancel for the fence)"

    rows = [r for r in rows if not r.get("missing")]
    failures = Panel("what the worker recorded, per variant (log scale)", bars=Bars(
        tuple(r["variant"] for r in rows),
        tuple((name, tuple(float(r[key]) for r in rows)) for key, name in FAILURES),
        horizontal=True, log=True, pack=True, fmt=".0f", empty=tuple(empty(r) for r in rows)),
        xlabel="count (pages, for leaked pages)")
    panels = [failures]
    labels = list(probed)
    if labels:
        mean = lambda xs: float(np.mean(xs)) if xs else 0.0
        gaps = [f"{label}: gap {mean(probed[label]['wrong']) - mean(probed[label]['right']):.2f} ms"
                for label in labels]
        panels.append(Panel("TTFT of a probing tenant's requests (ms)", bars=Bars(
            tuple(labels),
            (("guess right: starts with another tenant's system prompt",
              tuple(mean(probed[label]["right"]) for label in labels)),
             ("guess wrong: same length, other text", tuple(mean(probed[label]["wrong"]) for label in labels))),
            fmt=".2f"), notes=("the gap a prober measures (wrong - right):", *gaps)))
    warnings, captions = plot_notes(notes)
    return Plot(f"Prefix ownership: what each rule breaks ({s['requests']} requests, "
                f"{s['cancel'] * 100:g}% cancelled)", "", tuple(panels), warnings=warnings, captions=captions)
