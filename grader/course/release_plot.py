"""The release figures of a design sheet against its baseline, as a picture (``grader sheet
run --plot FILE``): goodput on each paired seed, each class's SLO attainment with the rejected
share, and the violations, with lesson 5's decision in the title. The data are the figures
``sheet run`` prints (grader.course.replay.figures), so the picture and the text agree.
"""
from __future__ import annotations

from typing import Mapping

from grader.course.plots import Bars, Panel, Plot
from grader.course import slo


def release_plot(sides: Mapping[str, tuple], decision=None, rule=None) -> Plot:
    """``sides``: name -> (Replay, its figures), the baseline first when there is one;
    ``rule``: the baseline's release rule, whose class guard is drawn over the attainment."""
    names = list(sides)
    replays = {n: r for n, (r, _) in sides.items()}
    figs = {n: f for n, (_, f) in sides.items()}
    seeds = figs[names[0]]["seeds"]
    goodput = Panel("goodput on each paired seed\n(good requests / s)", bars=Bars(
        tuple(f"seed {s}" for s in seeds),
        tuple((n, tuple(round(slo.run_goodput(x), 4) for x in replays[n].summaries)) for n in names),
        fmt=".2f"), notes=tuple(f"{n}: mean {figs[n]['goodput_rps']:.3f} req/s, completed "
                                f"{figs[n]['completed']} of {figs[n]['requests']}, p99 largest gap "
                                f"{figs[n]['p99_largest_gap_ms']:.0f} ms" for n in names))
    classes = sorted({c for n in names for c in figs[n]["classes"]})
    # The rollback rule on attainment, per class: a candidate whose attainment of a class
    # falls below the baseline's by more than max_class_drop rolls back, whatever its goodput.
    guard = [figs[names[0]]["classes"].get(c, {}).get("attainment") for c in classes]
    limits = (tuple(None if a is None else 100.0 * (a - rule.max_class_drop) for a in guard)
              if rule is not None and len(names) > 1 else ())
    attainment = Panel("SLO attainment per class (%)", bars=Bars(
        tuple(classes),
        tuple((n, tuple(100.0 * (figs[n]["classes"].get(c, {}).get("attainment") or 0.0) for c in classes))
              for n in names), fmt=".1f", least=100.0, limits=limits,
        limits_label=f"rollback below: baseline - {rule.max_class_drop * 100:g} points" if limits else ""),
        notes=tuple(f"{n}: rejected {figs[n]['rejected_share']:.1%} of requests" for n in names))
    panels = [goodput, attainment]
    kinds = sorted({k for n in names for k in figs[n]["violations"]})
    if kinds:
        panels.append(Panel("violations over the seeds", bars=Bars(
            tuple(k.replace("_", " ") for k in kinds),
            tuple((n, tuple(float(figs[n]["violations"].get(k, 0)) for k in kinds)) for n in names),
            fmt=".0f")))
    else:
        attainment = Panel(attainment.ylabel, bars=attainment.bars,
                           notes=attainment.notes + ("no violations" + (" on either side" if len(names) > 1
                                                                          else ""),))
        panels[1] = attainment
    # Alone, the title says what the panels are and why no decision is drawn.
    title = (" against ".join(reversed(names)) if len(names) > 1 else
             f"{names[0]}: goodput, SLO attainment and violations on seeds {', '.join(map(str, seeds))}\n"
             "no baseline, so no release decision (sheet run --baseline SHEET)")
    if decision is not None:
        title += f"\nlesson 5's rule decides: {decision.decision}"
    warnings = tuple(f"{n}, seed {t['seed']}: {t['why']}" for n in names for t in figs[n]["truncated"])
    reasons = tuple(decision.reasons) if decision is not None else ()
    return Plot(title, "", tuple(panels), warnings=warnings, captions=reasons)
