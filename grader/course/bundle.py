"""An incident bundle: the folder a learner diagnoses (``grader incident``).

Layout::

    README.md              what is here and what to hand in
    incident.yaml          the incident's id, the releases, the workload and the public seeds
    symptoms.md            what users and on-call reported, with numbers (they conflict)
    changes.yaml           release R42's changes, C1..Cn, each a design-sheet diff
    sheets/R41.yaml        the last good release's design sheet
    sheets/R42.yaml        the regressed release's design sheet
    evidence/index.yaml    the evidence items E1..En a diagnosis cites
    evidence/requests.csv  the request log of R42 on the evidence seed
    evidence/steps.csv     its step log
    evidence/series.csv    its time series
    evidence/audit.csv     its audit log (the worker's violations)
    evidence/release_report.yaml   the release gate re-run under R42's own criteria

Everything is computed from the incident (grader.course.incident), so the same incident always
writes the same bytes.
"""
from __future__ import annotations

import csv
import io
import shutil
import statistics
from functools import partial
from pathlib import Path

import yaml

from grader.engine.errors import InputError
from grader.course.evidence import Tables
from grader.course.incident import NEXT, PREVIOUS, RELEASE, Incident
from grader.course import slo
from grader.course.core import reference as reference_core
from grader.course.trials import mean_tpot_s, truncation

MARKER = "incident.yaml"


# ---- symptoms ---------------------------------------------------------------------------------
def _ttft_p50(run) -> float:
    ttfts = [r.first_token_s - r.arrival_s for r in run.requests if r.first_token_s is not None]
    return statistics.median(ttfts) if ttfts else 0.0


def _slow(tables: Tables, cls: str) -> list[dict]:
    return [r for r in tables.requests if r["class"] == cls and r["largest_gap_s"] != ""
            and r["largest_gap_s"] > r["slo_gap_s"]]


def _than_before(before: float, after: float, what: str, unit: str = "s") -> str:
    """'first tokens came faster than before (p50 0.38 s -> 0.31 s)', as the numbers say."""
    if after < before * 0.95:
        how = "faster than"
    elif after > before * 1.05:
        how = "slower than"
    else:
        how = "as fast as"
    return f"{what} came {how} before (p50 {before:.2f} {unit} -> {after:.2f} {unit})"


def symptoms(incident: Incident) -> list[str]:
    """One report per fault, in the words of the people who noticed it (numbers of the
    evidence seed, R41 against R42), in the order of the changes."""
    seed = incident.evidence_seed
    run, before = incident.run(RELEASE, seed), incident.run(PREVIOUS, seed)
    t = Tables.of(run)
    total = run.total_pages
    tight = min(incident.scenario.workload.classes, key=lambda c: c.gap_s)
    first_tokens = _than_before(_ttft_p50(before), _ttft_p50(run), "first tokens")
    slow = _slow(t, tight.name)
    worst = max((r["largest_gap_s"] for r in slow), default=0.0)
    out = []
    for change in incident.faults:
        m = change.mechanism
        if m == "inactive_hits_as_free":
            over = [a for a in t.audit if a["kind"] == "over_commit"]
            at = over[0]["time_s"] if over else 0.0
            sample = next((x for x in t.series if x["time_s"] >= at), t.series[-1])
            pre = sum(1 for r in t.requests if r["preemptions"])
            out.append(f"On-call: the worker's audit log shows {len(over)} admission{'s' if len(over) != 1 else ''} "
                       f"that promised more pages than the pool could give (at {at:.1f} s the memory "
                       f"dashboard counted {sample['capacity']} of {total} pages free or evictable), and "
                       f"{pre} request{'s were' if pre != 1 else ' was'} stopped and restarted from the "
                       f"queue. Before {RELEASE} this never happened.")
        elif m in ("attention_term_dropped", "stall_hidden_by_average"):
            gate = ""
            if m == "stall_hidden_by_average":
                gate = (f" The release gate raised no alarm; the mean time per output token it watches "
                        f"went {mean_tpot_s(before) * 1000:.1f} ms -> {mean_tpot_s(run) * 1000:.1f} ms.")
            out.append(f"{tight.name.capitalize()} users report streams that freeze mid-reply: {len(slow)} "
                       f"{tight.name} requests had a gap between tokens over their {tight.gap_s * 1000:.0f} ms "
                       f"(up to {worst * 1000:.0f} ms), while {first_tokens}.{gate}")
        elif m == "reclaim_before_fence":
            garbled = [r["id"] for r in t.requests if r["client_report"] == "garbled"]
            cancels = sum(1 for r in t.requests if r["outcome"] == "cancelled_by_client")
            said = "client reported a garbled reply" if len(garbled) == 1 else "clients reported garbled replies"
            out.append(f"Support: {len(garbled)} {said} "
                       f"({', '.join(garbled[:5]) or 'none in this stretch'}); the service saw {cancels} "
                       f"client cancellations in the same stretch.")
        elif m == "reclaim_never":
            first, last = t.series[0], t.series[-1]
            never = sum(1 for r in t.requests if r["outcome"] == "failed" and r["admitted_s"] == "")
            out.append(f"Memory does not come back after cancellations: free or evictable pages went "
                       f"{first['capacity']} -> {last['capacity']} of {total} over the run, with "
                       f"{last['running']} requests running at the end; {never} requests were never admitted.")
        elif m == "key_without_scope":
            leaked = [r for r in t.requests if r["client_report"] == "other_tenant_text"]
            tenant = leaked[0]["tenant"] if leaked else "a tenant"
            out.append(f"Tenant {tenant} reports a reply that quoted another tenant's system prompt "
                       f"({len(leaked)} such replies in all); the prefix cache hit {_final(before)} -> "
                       f"{_final(run)} pages, and {first_tokens}.")
    return out


def _final(run) -> int:
    hits = run.series["prefix_hits"]
    return int(hits[-1]) if len(hits) else 0


# ---- the release report -----------------------------------------------------------------------------
def release_report(incident: Incident) -> dict:
    """The release gate re-run on the report seeds under R42's own release criteria."""
    criteria = incident.release["release_criteria"]
    averaged = criteria["qualification"]["token_deadline"] == "average_tpot"
    core = reference_core()          # bundles are built in the course, where the reference is
    qualify = partial(core.qualify, gaps="average") if averaged else core.qualify
    rule = type(incident.rule)(**criteria["rule"])
    runs = {name: incident.replay(sheet, incident.report_seeds, qualify=qualify, name=name)
            for name, sheet in ((PREVIOUS, incident.baseline), (RELEASE, incident.release))}
    decision = core.decide(runs[PREVIOUS].summaries, runs[RELEASE].summaries, rule)
    classes = {}
    for c in incident.scenario.workload.classes:
        classes[c.name] = {}
        for name, r in runs.items():
            att = slo.attainment(r.summaries, c.name)
            classes[c.name][name] = None if att is None else round(att, 4)
    truncated = {n: {s.seed: truncation(run) for s, (_, run) in zip(r.summaries, r.runs) if run.aborted}
                 for n, r in runs.items()}
    return {
        "release": RELEASE, "previous": PREVIOUS, "seeds": list(incident.report_seeds),
        "token_deadline": criteria["qualification"]["token_deadline"], "rule": dict(criteria["rule"]),
        "attainment": classes,
        "goodput_rps": {n: round(sum(slo.run_goodput(s) for s in r.summaries) / len(r.summaries), 4)
                        for n, r in runs.items()},
        "mean_tpot_ms": {n: round(sum(s.mean_tpot_s for s in r.summaries) / len(r.summaries) * 1000, 2)
                         for n, r in runs.items()},
        "decision": decision.decision, "reasons": list(decision.reasons),
        # Runs that stopped early, by release and seed: their unfinished requests counted as failed.
        **({"truncated": {n: t for n, t in truncated.items() if t}} if any(truncated.values()) else {}),
    }


# ---- writing -------------------------------------------------------------------------------------
def _csv(rows: list[dict]) -> str:
    out = io.StringIO()
    if rows:
        w = csv.DictWriter(out, fieldnames=list(rows[0]), lineterminator="\n")
        w.writeheader()
        w.writerows(rows)
    return out.getvalue()


def _yaml(data, head: str = "") -> str:
    return head + yaml.safe_dump(data, sort_keys=False, allow_unicode=True, width=100)


def _truncated(incident: Incident) -> str:
    """A paragraph for the README when the evidence run stopped early, else ""."""
    why = truncation(incident.run(RELEASE, incident.evidence_seed))
    return (f"\n**The evidence run did not finish.** The worker stopped it early ({why}). The "
            f"logs end where it stopped; what they show of gaps and times covers only what ran.\n"
            if why else "")


def _readme(incident: Incident) -> str:
    return f"""# Incident {incident.id}

Release {RELEASE} of the service's design sheet went out, and the service regressed. You have
the evidence of one stretch of traffic under {RELEASE} (the workload of
`assignments/lesson6/public/incident.scenario.yaml`, seed {incident.evidence_seed}), the
changes {RELEASE} made to {PREVIOUS} as design-sheet diffs, and what people reported.
{_truncated(incident)}
- `symptoms.md`: the reports. They conflict on purpose: more than one change is at fault.
- `changes.yaml`: the {len(incident.changes)} changes of {RELEASE}, C1..C{len(incident.changes)}.
- `sheets/{PREVIOUS}.yaml`, `sheets/{RELEASE}.yaml`: the two releases' full design sheets.
- `evidence/index.yaml`: the evidence items E1..E{len(incident.evidence())} you cite; each selects
  rows of one file of `evidence/`.
- `evidence/release_report.yaml`: the release gate re-run on seeds
  {', '.join(map(str, incident.report_seeds))} under {RELEASE}'s own criteria.

Replay any sheet on the incident workload yourself:

    grader sheet run sheets/{RELEASE}.yaml
    grader sheet run my_sheet.yaml --baseline sheets/{RELEASE}.yaml

Hand in a folder with `diagnosis.yaml` (for each root cause: the change, the mechanism
from the lesson's taxonomy, the evidence items you cite, the fix as design-sheet values)
and `design_sheet.yaml` ({RELEASE} with your fixes, recorded as release {NEXT} with a
rollback rule). Put `incident: {incident.id}` at the top of your diagnosis. Your fix is
replayed on other seeds of the same workload. An incident has two or three root causes;
the other changes are harmless.
"""


def write_bundle(incident: Incident, out: Path) -> list[Path]:
    out = Path(out)
    if out.exists():
        if not out.is_dir():
            raise InputError(str(out), "exists and is not a folder")
        if any(out.iterdir()):
            if not (out / MARKER).is_file():
                raise InputError(str(out), "is not empty and holds no earlier incident bundle")
            shutil.rmtree(out)
    run = incident.run(RELEASE, incident.evidence_seed)
    t = Tables.of(run)
    files = {
        "README.md": _readme(incident),
        MARKER: _yaml({"incident": incident.id, "release": RELEASE, "previous": PREVIOUS,
                       "workload": "assignments/lesson6/public/incident.scenario.yaml",
                       "evidence_seed": incident.evidence_seed, "report_seeds": list(incident.report_seeds),
                       **({"truncated": truncation(run)} if run.aborted else {})},
                      f"# Incident {incident.id}: see README.md\n"),
        "symptoms.md": f"# What was reported after {RELEASE} went out\n\n"
                       + "".join(f"- {s}\n" for s in symptoms(incident)),
        "changes.yaml": _yaml({"release": RELEASE, "previous": PREVIOUS,
                               "changes": [c.entry() for c in incident.changes]},
                              f"# The changes release {RELEASE} made to {PREVIOUS}'s design sheet.\n"),
        f"sheets/{PREVIOUS}.yaml": _yaml(dict(incident.baseline), f"# Release {PREVIOUS}: the last good release.\n"),
        f"sheets/{RELEASE}.yaml": _yaml(dict(incident.release), f"# Release {RELEASE}: the release that regressed.\n"),
        "evidence/index.yaml": _yaml({"incident": incident.id,
                                      "items": [i.entry() for i in incident.evidence()]},
                                     "# Evidence items: cite them by id. 'first' lists the first rows' keys\n"
                                     "# (request ids, step numbers or sample times) of each selection.\n"),
        "evidence/requests.csv": _csv(t.requests),
        "evidence/steps.csv": _csv(t.steps),
        "evidence/series.csv": _csv(t.series),
        "evidence/audit.csv": _csv(t.audit) or "time_s,kind,requests,pages,step,detail\n",
        "evidence/release_report.yaml": _yaml(release_report(incident),
                                              f"# The release gate re-run after the incident, under {RELEASE}'s "
                                              f"own release criteria.\n"),
    }
    written = []
    try:
        for name, text in files.items():
            path = out / name
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text, encoding="utf-8")
            written.append(path)
    except OSError as e:
        raise InputError(str(out), f"cannot write the incident bundle: {e.strerror or e}") from None
    return written


# How each file of an answer key begins: the release tells one saved in the course's
# folders by it (grader.instructor.outputs.course_outputs), whatever its name.
ANSWER_HEADS = ("# The reference diagnosis of incident ", f"# Release {NEXT}: {RELEASE} with its faults reverted.")


def write_answer(incident: Incident, out: Path) -> Path:
    """The reference diagnosis and fixed sheet of an incident (an instructor's answer key)."""
    from grader.course.incident import reference_diagnosis, reference_sheet
    out = Path(out)
    try:
        out.mkdir(parents=True, exist_ok=True)
        (out / "diagnosis.yaml").write_text(_yaml(reference_diagnosis(incident),
                                                  f"{ANSWER_HEADS[0]}{incident.id}.\n"),
                                            encoding="utf-8")
        (out / "design_sheet.yaml").write_text(_yaml(reference_sheet(incident), f"{ANSWER_HEADS[1]}\n"),
                                               encoding="utf-8")
    except OSError as e:
        raise InputError(str(out), f"cannot write the reference answer: {e.strerror or e}") from None
    return out
