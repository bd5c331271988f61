"""The goodput experiment (lesson 5): a baseline and candidate designs across the request rate.

Lesson 5's fixed workload (assignments/lesson5/public/release.yaml) runs at each request
rate under the release suite's baseline design and each chosen candidate design (the
suite's candidates: gain, noise, rejections, class, stalls), on the same ``seeds`` paired
seeds. Each run is qualified with the plugged-in core's qualify (the reference's, or the
learner's: grader.course.experiments.plugged); per rate and design the table gives goodput
(the mean over the seeds, with its noise band: noise_k standard errors), each class's SLO
attainment, the rejected share and the dashboard's mean TPOT, and for a candidate the
paired goodput difference with its noise band and the release decision of the core's
decide_release under the rule set by the knobs. The reasons follow as notes. Beside a
learner's rows, the reference's ("reference: baseline", ...). The plot draws goodput with
each design's own spread over the seeds, the decision at each rate right under it, each
class's attainment against the 90% line, and the rejected share with the rejection
guard's limit when a candidate rejects. The cost model is synthetic.
"""
from __future__ import annotations

import math
import statistics

from grader.course.experiments import experiment
from grader.course.experiments.common import Column, Knob, Line, Mark, Outcome, Panel, Plot, Table, plot_notes
from grader.course.experiments.plugged import REFERENCE_PREFIX as REFERENCE
from grader.course.experiments.plugged import Side, Sides
from grader.course.slo import attainment, rejected_share, run_goodput
from grader.course.trials import KINDS, Design, Trial, public_suites, summaries, truncations
from grader.engine.errors import InputError
from reference.shapes import ReleaseRule, RunSummary
from reference.workload import with_overrides

_RULE = ReleaseRule()
# The default candidates show the lesson's point on the plain command: gain ships once the
# small card runs out of pages, while class and rejections raise goodput at high rates and
# still roll back (a class loses its SLO; requests are turned away).
KNOBS = (
    Knob("candidates", ("gain", "class", "rejections"), "candidate designs of the release suite to compare with the baseline",
         "words", choices=KINDS),
    # Rates and the rule's values are bounded as the design sheet's schema bounds them
    # (release_criteria.workload.rate, release_criteria.rule); the two shares stop at 1.
    Knob("rate_from", 3.0, "lowest request rate (requests per second)", "float", minimum=0.01,
         maximum=100_000),
    Knob("rate_to", 9.0, "highest request rate", "float", minimum=0.01, maximum=100_000),
    # The sizes' bounds keep each one alone under half a minute on a laptop's core; every run
    # is kept for the table, so requests also bound memory (1,000 of them: about 0.8 GB).
    Knob("rates", 7, "how many rates, evenly spaced from rate_from to rate_to", "int", minimum=1,
         maximum=100),
    Knob("requests", 80, "requests per run (the fixed workload's size)", "int", minimum=2, maximum=1000),
    Knob("seeds", 4, "paired seeds per rate: both designs run on the same requests", "int", minimum=1,
         maximum=100),
    Knob("noise_k", _RULE.noise_k, "rule: the noise band is noise_k standard errors", "float", minimum=0,
         maximum=100),
    Knob("min_gain", _RULE.min_gain, "rule: goodput gain needed to ship (0.02 = 2%)", "float",
         minimum=0, maximum=10),
    Knob("max_class_drop", _RULE.max_class_drop, "rule: largest fall of a class's attainment", "float",
         minimum=0, maximum=1),
    Knob("max_rejection_rise", _RULE.max_rejection_rise, "rule: largest rise of the rejected share",
         "float", minimum=0, maximum=1),
)


def _band(values: list[float], k: float) -> float:
    """k standard errors of the mean over the seeds; infinite with one seed, as lesson 5's
    rule has it (no spread is known): the table shows "-", the plot no band."""
    return k * statistics.stdev(values) / math.sqrt(len(values)) if len(values) > 1 else math.inf


def _side(runs: tuple[RunSummary, ...], classes: tuple[str, ...], k: float) -> dict:
    goodputs = [run_goodput(r) for r in runs]
    row = {"goodput": statistics.fmean(goodputs), "band": _band(goodputs, k),
           "rejected": rejected_share(runs),
           "tpot_ms": statistics.fmean(r.mean_tpot_s for r in runs) * 1000}
    for name in classes:
        row[f"att_{name}"] = attainment(runs, name)
        per_run = [attainment((r,), name) for r in runs]
        row[f"att_band_{name}"] = _band([a for a in per_run if a is not None], k)
    return row


# Each size has its bound, but they multiply: every run's summary is kept for the table, at
# about 1.7 KB and 0.17 ms of one core per request of a run (measured 2026-12-05). 500,000
# requests over all runs: about a minute and a half and 1 GB.
MAX_REQUEST_RUNS = 500_000


def _within_work(s: dict) -> None:
    designs = 1 + len(dict.fromkeys(s["candidates"]))
    runs = s["rates"] * s["seeds"] * designs
    if runs * s["requests"] > MAX_REQUEST_RUNS:
        raise InputError("--set rates, seeds, requests",
                         f"{s['rates']} rates x {s['seeds']} seeds x {designs} designs is {runs:,} runs of "
                         f"{s['requests']} requests, {runs * s['requests']:,} in all; at most "
                         f"{MAX_REQUEST_RUNS:,} (each setting is within its bound, but they multiply)")


def _rates(s: dict) -> list[float]:
    if s["rate_to"] < s["rate_from"]:
        raise InputError("--set rate_to", f"must be >= rate_from ({s['rate_from']:g})")
    n = s["rates"]
    step = (s["rate_to"] - s["rate_from"]) / (n - 1) if n > 1 else 0.0
    return [round(s["rate_from"] + i * step, 6) for i in range(n)]


def _rule(s: dict) -> ReleaseRule:
    return ReleaseRule(min_gain=s["min_gain"], noise_k=s["noise_k"], max_class_drop=s["max_class_drop"],
                       max_rejection_rise=s["max_rejection_rise"])


def _setup(s: dict, course) -> tuple[Trial, list[Design], tuple[int, ...]]:
    suite = public_suites(course)[0]
    trials = {t.kind: t for t in suite.trials}
    some: Trial = suite.trials[0]
    designs = [some.baseline] + [trials[k].candidate for k in dict.fromkeys(s["candidates"])]
    return some, designs, tuple(some.workload.seed + i for i in range(s["seeds"]))


# ---- the runs: every design at every rate on one core ------------------------------------------
def _measure(s: dict, course, ran):
    """core -> its Side: a row per (rate, design), qualified and decided by the core's gate."""
    def side(core) -> Side:
        some, designs, seeds = _setup(s, course)
        rule, classes = _rule(s), tuple(c.name for c in some.workload.classes)
        rows, notes = [], []
        for rate in _rates(s):
            workload = with_overrides(some.workload, **{"arrival.rate": rate, "requests": s["requests"]})
            base = summaries(some.model, some.baseline, workload, seeds, core)
            ran(len(seeds))
            for design in designs:
                runs = base
                if design is not some.baseline:
                    runs = summaries(some.model, design, workload, seeds, core)
                    ran(len(seeds))
                row = {"rate": rate, "design": design.name, **_side(runs, classes, s["noise_k"])}
                if design is not some.baseline:
                    mine = {r.seed: r for r in runs}
                    diffs = [run_goodput(mine[b.seed]) - run_goodput(b) for b in base if b.seed in mine]
                    row.update(diff=statistics.fmean(diffs), diff_band=_band(diffs, rule.noise_k),
                               decision=None)
                    if core.decide is not None:
                        decision = core.decide(base, runs, rule)
                        row["decision"] = decision.decision
                        notes.append(f"rate {rate:g}, {design.name}: {decision.decision}: "
                                     f"{'; '.join(decision.reasons)}")
                rows.append(row)
                notes += [f"rate {rate:g}, {design.name}, seed {seed}: {why}"
                          for seed, why in truncations(some.model, design, workload, seeds, core).items()]
        if core.decide is None:
            notes.append("no release decisions: decide_release is not written yet (goodput, "
                         "attainment and the paired differences need only qualify)")
        return {"rows": rows, "extras": {}, "notes": notes}
    return side


@experiment("goodput", title="goodput and SLO attainment against the request rate, baseline and candidates",
            knobs=KNOBS, lesson="lesson5")
def goodput_sweep(s: dict, course, sides: Sides) -> Outcome:
    _rates(s)                       # a bad range, or too much work, is refused before any run
    _within_work(s)
    some, designs, seeds = _setup(s, course)
    classes = tuple(c.name for c in some.workload.classes)
    labels = tuple(d.name for d in designs)
    both = sides.both(_measure(s, course, sides.ran), "design", labels)
    rows, notes = both.rows, list(both.notes)
    columns = (Column("rate", "rate\n/s", "g"), Column("design", "design"),
               Column("goodput", "goodput\n/s", ".2f"), Column("band", "+-\nband", ".2f"),
               *(Column(f"att_{c}", f"{c}", ".1%") for c in classes),
               Column("rejected", "rejected", ".1%"), Column("tpot_ms", "mean\nTPOT", ".1f"),
               Column("diff", "paired\ndiff /s", "+.2f"), Column("diff_band", "+-\nband", ".2f"),
               Column("decision", "decision"))
    notes.insert(0, f"{s['requests']} requests per run, paired seeds {', '.join(map(str, seeds))}; "
                    f"+-band: {s['noise_k']:g} standard errors over the seeds (of each design's goodput, "
                    "and of the paired differences); mean TPOT: the dashboard's mean time per output "
                    "token in ms, not an SLO")
    if s["rates"] == 1 and s["rate_to"] != s["rate_from"]:
        # Accepted, since rate_to has a default, but the settings line shows a range: say so.
        notes.insert(1, f"rates=1: only rate_from ({s['rate_from']:g}/s) is run; rate_to "
                        f"({s['rate_to']:g}) is read only with 2 rates or more")
    notes += both.sources
    groups = ([list(labels)] if both.mine else []) + ([[REFERENCE + n for n in labels]] if both.reference else [])
    return Outcome("goodput", "goodput and SLO attainment against the request rate, baseline and candidates",
                   dict(s), Table(columns, tuple(rows), keys=2),
                   _plot([r for r in rows if not r.get("missing")], groups, classes,
                         _rule(s), len(seeds), plot_notes(notes)),
                   tuple(notes))


TARGET = 0.9     # the attainment a service is sized for: goodput is read where it holds
PERCENT = (-2.0, 104.0)   # a percentage panel's y range: 0 to 100 with room for the markers


def _plot(rows: list[dict], groups: list[list[str]], classes: tuple[str, ...], rule: ReleaseRule,
          seeds: int, told: tuple[tuple[str, ...], tuple[str, ...]]) -> Plot:
    """``groups``: the design names of each side (its baseline first), the plugged-in core's
    and the reference's beside it."""
    def line(label: str, name: str, key: str, band_key: str, scale: float = 1.0,
             top: float = math.inf) -> Line:
        mine = [r for r in rows if r["design"] == name and r[key] is not None]
        xs = tuple(float(r["rate"]) for r in mine)
        ys = tuple(float(r[key]) * scale for r in mine)
        bands = tuple(float(r[band_key]) * scale if math.isfinite(r[band_key]) else 0.0 for r in mine)
        return Line(label, xs, ys, band=(tuple(max(0.0, y - b) for y, b in zip(ys, bands)),
                                         tuple(min(top, y + b) for y, b in zip(ys, bands))))

    names = [n for g in groups for n in g]
    bases = {g[0] for g in groups}
    base = groups[0][0] if groups else "baseline"
    panels = [Panel("goodput (good requests / s)", tuple(line(n, n, "goodput", "band") for n in names))]
    marks = tuple(Mark(float(r["rate"]), r["design"], r["decision"]) for r in rows
                  if r["design"] not in bases and r.get("decision"))
    if marks:
        # Right under goodput: a candidate whose line is higher may still roll back.
        panels.append(Panel(f"release decision\nagainst {base}", marks=marks))
    for c in classes:
        panels.append(Panel(f"{c} SLO attainment (%)",
                            tuple(line(n, n, f"att_{c}", f"att_band_{c}", 100.0, 100.0) for n in names),
                            hlines=((TARGET * 100, f"{TARGET:.0%} attainment"),),
                            ylim=PERCENT))   # the whole scale: a cut axis would magnify a fall
    if any(r["rejected"] for r in rows):
        # The rejection guard: a candidate whose share rises above the baseline's by more than
        # max_rejection_rise rolls back, whatever its goodput.
        mine = [r for r in rows if r["design"] == base]
        limit = Line(f"rollback above: {base} + {rule.max_rejection_rise * 100:g} points",
                     tuple(float(r["rate"]) for r in mine),
                     tuple((r["rejected"] + rule.max_rejection_rise) * 100 for r in mine), "dashed")
        panels.append(Panel("rejected share (%)", tuple(
            Line(n, tuple(float(r["rate"]) for r in rows if r["design"] == n),
                 tuple(r["rejected"] * 100 for r in rows if r["design"] == n)) for n in names)
            + (limit,)))
    # With one seed there is no spread and no band is drawn: the title must not promise one.
    shaded = (f"shaded: each design's own spread over its {seeds} seeds (±{rule.noise_k:g} standard "
              "errors),\nnot the paired noise band the release decisions use" if seeds > 1 else
              "one seed: no spread over seeds to shade (and the paired band the decisions use is infinite)")
    warnings, captions = told
    return Plot("Goodput and SLO attainment against the request rate\n" + shaded,
                "request rate (requests / s)", tuple(panels), warnings=warnings, captions=captions)
